"""Which substrates exist: the built-ins plus those plugins register through the hookspec."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import pluggy

from ..core.substrate import Substrate
from ..errors import ConfigError, ExtraMissing, SubstrateUnavailable, did_you_mean
from . import builtin, hookspecs


class Registry:
    """Substrate classes by name, imported lazily."""

    def __init__(self, entries: Mapping[str, object]) -> None:
        self._entries = dict(entries)

    @classmethod
    def discover(cls) -> Registry:
        """The built-ins and the substrates of every plugin in entry point group ``rollout_tax``."""
        manager = pluggy.PluginManager(hookspecs.PROJECT)
        manager.add_hookspecs(hookspecs)
        manager.register(builtin)
        manager.load_setuptools_entrypoints(hookspecs.PROJECT)
        entries: dict[str, object] = {}
        # pluggy calls the last registered plugin first; let plugins override built-ins.
        for result in reversed(manager.hook.rollout_tax_substrates()):
            entries.update(result)
        return cls(entries)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def aliases(self) -> dict[str, str]:
        """Each name -> the first name, alphabetically, registered with the same implementation.

        ``{"k8s": "k8s", "kubernetes": "k8s", ...}``: names that share an entry are aliases.
        """
        first: dict[object, str] = {}
        return {name: first.setdefault(self._entries[name], name) for name in self.names()}

    def load(self, name: str) -> type[Substrate]:
        """The Substrate class registered as ``name``."""
        if name not in self._entries:
            raise ConfigError(
                f"unknown substrate {name!r}{did_you_mean(name, self.names())}; available "
                f"substrates: {', '.join(self.names())}"
            )
        entry = self._entries[name]
        if isinstance(entry, str):
            module_name, _, attr = entry.partition(":")
            try:
                module = importlib.import_module(module_name)
            except ExtraMissing:
                raise
            except ImportError as exc:
                raise SubstrateUnavailable(f"substrate {name!r} cannot be loaded: {exc}") from None
            entry = getattr(module, attr)
        return entry  # type: ignore[return-value]

    def create(self, name: str, kind: str | None = None, **options: Any) -> Substrate:
        """A substrate named ``name`` of implementation ``kind`` (default: ``name``)."""
        try:
            implementation = self.load(kind or name)
        except ExtraMissing as exc:
            raise exc.named(name) from None
        return implementation(name, **options)


def get_substrate(name: str, **options: Any) -> Substrate:
    """A substrate by name, outside pytest: ``get_substrate("docker", image="...").start()``."""
    return Registry.discover().create(name, **options)
