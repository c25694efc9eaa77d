"""Which substrates to run, with what options: ``--substrate``, ``--substrate-opt``, pyproject."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, did_you_mean

PYPROJECT_TABLE = ("tool", "rollout-tax", "substrates")
#: The substrate every other one is compared against; no table may make it another kind.
FLOOR = "local"
#: Variants every run knows, as if defined in pyproject.toml (a table of the same name there
#: adds to it and overrides its keys).
#: Variants that work by name with no configuration; a pyproject table of the same name
#: overrides their keys (docs/api.md#built-in-variants).
BUILTIN_VARIANTS: dict[str, dict[str, Any]] = {
    "docker-session": {"kind": "docker", "transport": "session"},
    "docker-reset": {"kind": "docker", "reuse": "reset"},
    "bwrap-session": {"kind": "bwrap", "transport": "session"},
    "bwrap-reset": {"kind": "bwrap", "reuse": "reset"},
    "docker-pool": {"kind": "docker", "pool": 2},
    "docker-gvisor": {"kind": "docker", "runtime": "runsc", "platform": "systrap"},
    "docker-snap": {"kind": "docker", "runtime": "runsc", "platform": "systrap", "snapshot": True},
    "k8s-session": {"kind": "k8s", "transport": "session"},
    "ec2-session": {"kind": "ec2", "transport": "session"},
    "k8s-claim": {"kind": "k8s", "api": "claim"},
}


@dataclass(frozen=True)
class SubstrateSpec:
    """A selected substrate: its name, the implementation it uses, and its options."""

    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)


def split_names(values: Iterable[str], option: str = "substrates") -> list[str]:
    """``["local,docker", "k8s"]`` -> ``["local", "docker", "k8s"]``, first occurrence kept;
    an error names ``option`` (where the names came from)."""
    names = [name.strip() for value in values for name in value.split(",")]
    if any(not name for name in names):
        raise ConfigError(f"{option}={','.join(values)!r}: empty substrate name")
    return list(dict.fromkeys(names))


def parse_substrate_opt(text: str) -> tuple[str, str, str]:
    """``"docker.image=x:y"`` -> ``("docker", "image", "x:y")``."""
    target, sep, value = text.partition("=")
    name, dot, key = target.strip().partition(".")
    if not sep or not dot or not name or not key:
        raise ConfigError(
            f"substrate option {text!r}: expected NAME.KEY=VALUE, e.g. docker.image=x"
        )
    return name, key.strip(), value


def pyproject_tables(path: Path) -> dict[str, dict[str, Any]]:
    """The ``[tool.rollout-tax.substrates.NAME]`` tables of a pyproject.toml, if any."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    for key in PYPROJECT_TABLE:
        data = data.get(key, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [{'.'.join(PYPROJECT_TABLE)}] must be a table")
    return data


def variant_tables(path: Path) -> dict[str, dict[str, Any]]:
    """The built-in variants, a pyproject table of the same name overriding their keys, and
    the pyproject's other tables."""
    tables = {name: dict(table) for name, table in BUILTIN_VARIANTS.items()}
    for name, table in pyproject_tables(path).items():
        if name in tables and isinstance(table, Mapping):
            tables[name] |= table
        else:
            tables[name] = table
    return tables


def identity(name: str, tables: Mapping[str, Mapping[str, Any]], aliases: Mapping[str, str]) -> str:
    """The substrate ``name`` stands for: a pyproject variant (a table with ``kind``) is itself,
    a registry name is the first of its aliases (``kubernetes`` -> ``k8s``)."""
    table = tables.get(name)
    if isinstance(table, Mapping) and "kind" in table:
        return name
    return aliases.get(name, name)


@dataclass(frozen=True)
class Catalog:
    """Every substrate name a run knows (registry names and pyproject variants), by identity."""

    identities: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, tables: Mapping[str, Mapping[str, Any]], aliases: Mapping[str, str]) -> Catalog:
        names = set(aliases) | set(tables)
        return cls({name: identity(name, tables, aliases) for name in names})

    @property
    def names(self) -> list[str]:
        return sorted(self.identities)

    def same(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` name one substrate (equal, or aliases)."""
        return self.identities.get(a, a) == self.identities.get(b, b)


def resolve(
    selected: Iterable[str],
    substrate_opts: Iterable[str],
    tables: Mapping[str, Mapping[str, Any]],
    known: Iterable[str],
    aliases: Mapping[str, str] | None = None,
) -> list[SubstrateSpec]:
    """The selected substrates, each with pyproject options overlaid by ``--substrate-opt``.

    A pyproject table with ``kind = "docker"`` defines a named variant of that implementation.
    Aliases of one substrate (``aliases``, e.g. ``k8s`` and ``kubernetes``) run once, under
    the name given first.
    """
    known = set(known)
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"[tool.rollout-tax.substrates.{name}] must be a table")
        kind = table.get("kind", name)
        if kind not in known:
            raise ConfigError(
                f"[tool.rollout-tax.substrates.{name}]: unknown kind {kind!r}; "
                f"available: {', '.join(sorted(known))}"
            )
        if name in known and kind != name:
            raise ConfigError(_redefined(name, kind))
    available = sorted(known | set(tables))
    names = list(selected)
    for name in names:
        if name not in available:
            raise ConfigError(
                f"unknown substrate {name!r}{did_you_mean(name, available)}; available "
                f"substrates: {', '.join(available)}"
            )
    cli: dict[str, dict[str, str]] = {}
    for text in substrate_opts:
        name, key, value = parse_substrate_opt(text)
        if name not in available:
            raise ConfigError(
                f"substrate option {text!r}: unknown substrate {name!r}"
                f"{did_you_mean(name, available)}; "
                f"available: {', '.join(available)}"
            )
        cli.setdefault(name, {})[key] = value
    specs = []
    for name in names:
        table = dict(tables.get(name, {}))
        kind = table.pop("kind", name)
        specs.append(SubstrateSpec(name=name, kind=kind, options=table | cli.get(name, {})))
    return _without_aliases(specs, tables, aliases or {})


def _redefined(name: str, kind: str) -> str:
    """The one line for a table that makes a registered substrate another kind."""
    what = (
        "local is the floor every other substrate is compared against"
        if name == FLOOR
        else f"{name} is a registered substrate"
    )
    return (
        f"[tool.rollout-tax.substrates.{name}]: kind = {kind!r} cannot redefine {name} ({what}); "
        f"name the variant otherwise, e.g. [tool.rollout-tax.substrates.{name}-{kind}]"
    )


def _without_aliases(
    specs: list[SubstrateSpec],
    tables: Mapping[str, Mapping[str, Any]],
    aliases: Mapping[str, str],
) -> list[SubstrateSpec]:
    """``specs`` with one spec per substrate, the first given; aliases must agree on options."""
    kept: dict[str, SubstrateSpec] = {}
    for spec in specs:
        first = kept.setdefault(identity(spec.name, tables, aliases), spec)
        if first.options != spec.options:
            raise ConfigError(
                f"substrates {first.name!r} and {spec.name!r} are one substrate with different "
                "options; select one of them, or define a variant with kind"
            )
    return list(kept.values())
