"""The gate of one pytest session: its ``--rollout-compare`` and ``--rollout-compare-fail``
options, checked at configure time, and its verdict once the run is summarized (compare.py
judges; the run is saved by ``outputs/saved_run.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .. import flags
from ..errors import ConfigError, RolloutTaxError
from ..gate.compare import Check, Verdict, compare_reports, run_label
from ..gate.storage import NAME_PATTERN, NoSavedRun, SavedRun, Storage
from ..report.document import Report
from ..text.width import terminal_width


@dataclass(frozen=True)
class Gate:
    """Compare and gate one pytest session (options checked and baseline loaded early)."""

    storage: Storage = field(default_factory=lambda: Storage.at(None))
    compare: str | None = None  #: None: no comparison; "": the newest saved run
    checks: tuple[Check, ...] = ()
    baseline: SavedRun | None = None
    missing: str | None = None  #: the warning when the baseline does not exist (yet)

    @classmethod
    def from_options(
        cls,
        *,
        storage: str | None,
        compare: str | None,
        fail: Sequence[str] | None,
        load_baseline: bool = True,
    ) -> Gate:
        """Parse and check every option and load the baseline now, before any rollout runs.

        Raises ConfigError / SavedRunError (RolloutTaxError) for bad input. A missing baseline
        is not an error: ``missing`` holds the warning. ``load_baseline=False`` (xdist workers)
        skips the file work the controller does.
        """
        checks = tuple(flags.FAIL.value(text, flags.FAIL.plugin) for text in fail or [])
        store = Storage.at(storage)
        if compare is not None:
            compare = check_compare(compare)
        if not load_baseline:
            return cls(store, compare, checks)
        baseline, missing = None, None
        if compare is not None:
            try:
                baseline = store.load(compare)
            except NoSavedRun as exc:
                missing = f"rollout-tax: {exc}: nothing to compare (this run is not failed)"
        return cls(store, compare, checks, baseline, missing)

    def judge(self, report: Report, *, width: int | None = None) -> Verdict:
        """Compare ``report`` with the baseline; called once, on the controller. Every line
        fits ``width`` (None: the terminal's)."""
        width = width or terminal_width()
        if self.compare is None:
            inert = "rollout-tax: --rollout-compare-fail has no effect without --rollout-compare"
            return Verdict([inert] if self.checks else [], width=width)
        if self.baseline is None:
            missing = self.missing or "rollout-tax: no baseline: nothing to compare"
            return Verdict([missing], width=width)
        return compare_reports(
            self.baseline.report,
            report,
            self.checks,
            baseline_label=self.baseline.label,
            current_label=run_label(report),
            width=width,
        )


def gate_of(config: Any) -> Gate:
    """The session's gate from its options (``--rollout-storage``, ``-compare``,
    ``-compare-fail``); bad input is a pytest.UsageError."""
    from .settings import option

    try:
        return Gate.from_options(
            storage=option(config, flags.STORAGE.plugin),
            compare=option(config, "--rollout-compare"),
            fail=option(config, flags.FAIL.plugin),
            load_baseline=not hasattr(config, "workerinput"),  # workers skip file work
        )
    except (RolloutTaxError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None


def check_compare(ref: str) -> str:
    """A ``--rollout-compare`` value, refused when it is a test path rather than a saved run.

    The option's value is optional, so ``pytest --rollout-compare tests`` takes the test
    directory ``tests`` for the baseline's name: the whole rootdir would run, with the gate off
    behind a "no baseline" warning. A directory, a ``.py`` file or a node id (``::``) is never a
    saved run, so it is an error instead.
    """
    hint = ""
    if "::" in ref:
        what = "a test id"
    elif ref.endswith(".py"):
        what = "a Python file"
    elif ref and Path(ref).is_dir():
        what = "a directory"
        if NAME_PATTERN.fullmatch(ref):
            hint = f" (a saved run of that name: --rollout-compare={ref}.json)"
    else:
        return ref
    raise ConfigError(
        f"--rollout-compare={ref!r} is {what}, not a saved run: write --rollout-compare=NAME "
        f"(with '='), or put the option after the test paths{hint}"
    )
