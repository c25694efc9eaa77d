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
from ..errors import ConfigError, NoSavedRun, RolloutTaxError
from ..gate.compare import Check, State, Verdict, compare_reports, run_label
from ..gate.storage import NAME_PATTERN, SavedRun, Storage
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
    strict: bool = False  #: another testbed than the baseline's is a usage error
    control: str | None = None  #: the substrate whose change is divided out of the others'

    @classmethod
    def from_options(
        cls,
        *,
        storage: str | None,
        compare: str | None,
        fail: Sequence[str] | None,
        load_baseline: bool = True,
        missing: str = "fail",
        strict: bool = False,
        control: str | None = None,
    ) -> Gate:
        """Parse and check every option and load the baseline now, before any rollout runs.

        Raises ConfigError / SavedRunError (RolloutTaxError) for bad input, and for a missing
        baseline under checks unless ``missing`` is ``pass`` (then ``missing`` holds the
        warning). ``load_baseline=False`` (xdist workers) skips the file work the controller
        does.
        """
        checks = tuple(flags.FAIL.value(text, flags.FAIL.plugin) for text in fail or [])
        allow = flags.MISSING.value(missing, flags.MISSING.plugin) == "pass"
        store = Storage.at(storage)
        if compare is not None:
            compare = check_compare(compare)
        if not load_baseline:
            return cls(store, compare, checks, strict=strict, control=control)
        baseline, warning = None, None
        if compare is not None:
            try:
                baseline = store.load(compare)
            except NoSavedRun as exc:
                if checks and not allow:
                    raise ConfigError(missing_error(store, compare, exc)) from None
                warning = f"rollout-tax: {exc}: nothing to compare (this run is not failed)"
        return cls(store, compare, checks, baseline, warning, strict=strict, control=control)

    def missing_name(self) -> str:
        """How the missing baseline was asked for: ``'mian'``, or the newest saved run."""
        return repr(self.compare) if self.compare else "the newest saved run"

    def judge(self, report: Report, *, width: int | None = None) -> Verdict:
        """Compare ``report`` with the baseline; called once, on the controller. Every line
        fits ``width`` (None: the terminal's)."""
        width = width or terminal_width()
        if self.compare is None:
            inert = "rollout-tax: --rollout-compare-fail has no effect without --rollout-compare"
            return Verdict([inert] if self.checks else [], width=width)
        if self.baseline is None:
            missing = self.missing or "rollout-tax: no baseline: nothing to compare"
            state: State = "no baseline" if self.checks else "compared"
            return Verdict([missing], width=width, state=state, checks=len(self.checks))
        return compare_reports(
            self.baseline.report,
            report,
            self.checks,
            baseline_label=self.baseline.label,
            current_label=run_label(report),
            width=width,
            control=self.control,
            strict=self.strict,
        )


def missing_error(store: Storage, ref: str, exc: NoSavedRun) -> str:
    """The one line a gate with a missing baseline fails with: what is missing, what exists,
    and the opt-out."""
    try:
        names = [path.stem for path in store.paths()]
    except RolloutTaxError:
        names = []
    there = f"saved runs there: {', '.join(names[-8:])}" if names else "no saved run there yet"
    return (
        f"rollout-tax: --rollout-compare={ref!r} under {flags.FAIL.plugin}: {exc} ({there}); "
        f"save one with --rollout-save=NAME, or {flags.MISSING.plugin}=pass for a first run"
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
            missing=str(option(config, flags.MISSING.plugin)),
            strict=bool(option(config, flags.STRICT.plugin)),
            control=option(config, flags.CONTROL.plugin) or None,
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
