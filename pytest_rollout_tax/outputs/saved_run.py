"""``--rollout-save`` and ``--rollout-autosave``: the run saved in ``--rollout-storage`` for
later comparison (gate/storage.py, docs/gating.md), never an interrupted one."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .. import flags
from ..errors import RolloutTaxError
from ..gate.compare import Verdict, fit
from ..gate.storage import Storage, check_name
from ..report.build import for_saving
from ..report.document import Report
from . import INTERRUPTED, SAVED, add_option, is_controller, option

SAVE = "--rollout-save"
AUTOSAVE = "--rollout-autosave"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, SAVE, "save this run as STORAGE/NAME.json for later comparison",
               "string", None, metavar="NAME")  # fmt: skip
    add_option(parser, AUTOSAVE, "save this run as STORAGE/NNNN_<commit-or-time>.json",
               "bool", False, action="store_true", default=None)  # fmt: skip


@dataclass(frozen=True)
class Saving:
    """Where and as what the run is saved: its options, checked."""

    storage: Storage
    name: str | None = None
    autosave: bool = False

    @classmethod
    def of(cls, config: pytest.Config) -> Saving:
        name = option(config, SAVE)
        return cls(
            Storage.at(option(config, flags.STORAGE.plugin)),
            None if name is None else check_name(name, SAVE),
            bool(option(config, AUTOSAVE)),
        )

    @property
    def asked(self) -> bool:
        return self.name is not None or self.autosave

    def save(self, report: Report) -> tuple[tuple[Path, ...], list[str]]:
        """Save ``report`` as asked: the files written, and the lines that say so (an error's
        last: the files saved before it stay)."""
        paths: list[Path] = []
        try:
            if self.name is not None:
                paths.append(self.storage.save(self.name, report))
            if self.autosave:
                paths.append(self.storage.autosave(report))
        except (OSError, ValueError, RolloutTaxError) as exc:
            error = f"rollout-tax: error: cannot save this run in {self.storage}: {exc}"
            return tuple(paths), [*(f"run saved to {path}" for path in paths), error]
        return tuple(paths), [f"run saved to {path}" for path in paths]


def written_files(config: pytest.Config) -> list[tuple[str, str | None]]:
    """The file ``--rollout-save`` writes (``plugin/output_paths.py``: one path, one output;
    an autosave's name is new, never another's)."""
    name = option(config, SAVE)
    if not name:
        return []
    storage = Storage.at(option(config, flags.STORAGE.plugin))
    return [(f"{SAVE}={name}", str(storage.root / f"{check_name(name, SAVE)}.json"))]


def pytest_configure(config: pytest.Config) -> None:
    """A bad name, or a storage where it cannot be saved, is a usage error before any test
    (the storage is checked by the controller, which saves)."""
    try:
        saving = Saving.of(config)
        if saving.asked and is_controller(config):
            saving.storage.check_writable(saving.name)
    except (RolloutTaxError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_rollout_tax_report(
    config: pytest.Config, report: Report, summary: Any, verdict: Verdict
) -> Generator[None, list, list]:
    """Save the run before every other output (the page's title names the file); its lines
    come last, after the terminal's summary and the gate's lines."""
    saving = Saving.of(config)
    paths: tuple[Path, ...] = ()
    lines: list[str] = []
    if saving.asked and config.stash.get(INTERRUPTED, False):
        lines = ["rollout-tax: the session was interrupted: this run is not saved"]
    elif saving.asked:
        paths, lines = saving.save(for_saving(report))
    config.stash[SAVED] = paths
    written = yield
    return [*written, fit(lines, verdict.width)] if lines else written
