"""``--rollout-save`` and ``--rollout-autosave``: the run saved in ``--rollout-storage`` for
later comparison (gate/storage.py, docs/gating.md), never an interrupted one. The session
saves it (:func:`save`) before it calls any output, whose outcome then names the files."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from .. import flags
from ..errors import RolloutTaxError
from ..gate.compare import fit
from ..gate.storage import Storage, check_name
from ..report.build import for_saving
from ..report.document import Report
from . import add_option, is_controller, option
from .outcome import OutputResult

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

    def save(self, report: Report) -> tuple[tuple[Path, ...], OutputResult]:
        """Save ``report`` as asked: the files written, and the lines that say so (an error's
        last: the files saved before it stay)."""
        paths: list[Path] = []
        try:
            if self.name is not None:
                paths.append(self.storage.save(self.name, report))
            if self.autosave:
                paths.append(self.storage.autosave(report))
        except (OSError, ValueError, RolloutTaxError) as exc:
            error = OutputResult.error(f"cannot save this run in {self.storage}: {exc}")
            lines = (*(f"run saved to {path}" for path in paths), *error.lines)
            return tuple(paths), OutputResult(lines, failed=True)
        return tuple(paths), OutputResult(tuple(f"run saved to {path}" for path in paths))


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


def save(
    config: pytest.Config, report: Report, *, interrupted: bool, width: int
) -> tuple[tuple[Path, ...], OutputResult]:
    """Save the run as asked, before every output (the session's outcome names the files, the
    page's title the first): the files, and the lines that come last, after the terminal's
    summary and the gate's lines, fitted to ``width``."""
    saving = Saving.of(config)
    if not saving.asked:
        return (), OutputResult()
    if interrupted:
        return (), OutputResult(
            ("rollout-tax: the session was interrupted: this run is not saved",)
        )
    paths, result = saving.save(for_saving(report))
    return paths, dataclasses.replace(result, lines=tuple(fit(list(result.lines), width)))
