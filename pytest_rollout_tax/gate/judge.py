"""Judging checks like with like: each substrate's check compares each test's rollouts with the
same test's baseline rollouts, the total over the tests both runs ran judged by the stratified
permutation test (stratified.py), what it could have seen stated (power.py), and the tests that
carry a change named (docs/gating-fidelity.md).

A check ``METRIC.STAT:THRESHOLD`` fails on a substrate when its like-with-like figure (over the
tests both runs ran) grew past the threshold *and* the growth credibly exceeds the threshold:
the permutation test finds the current rollouts larger than the baseline's raised by the
threshold, test by test. With fewer than MIN_SAMPLES rollouts on a side the threshold alone
decides. A crossing that is not credible is reported but does not fail. With a control
substrate (``--rollout-control``) every other substrate's current figures are first divided by
the control's own change (a ratio of ratios).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..core.noise import ALPHA, MIN_SAMPLES, Evidence
from ..report.projection import Scale
from .checks import RATES, Check
from .power import Group, Sensitivity, sensitivity
from .sides import Side
from .stratified import Stratum, p_greater

Status = Literal["passed", "failed", "noise", "skipped"]


@dataclass(frozen=True)
class Run:
    """One run's substrate: the whole side and each test's side (its rollouts alone)."""

    whole: Side
    tests: Mapping[str, Side] = field(default_factory=dict)
    #: The projection both runs' worker-hours are at (a part of the tests is projected anew).
    scale: Scale = field(default_factory=Scale)

    def like_with(self, other: Run) -> tuple[Side, Side]:
        """Both runs' sides over the tests both ran (the whole sides when every test is in
        both, or when a run has no per-test rollouts)."""
        common = [t for t in self.tests if t in other.tests]
        if not common or (len(common) == len(self.tests) == len(other.tests)):
            return self.whole, other.whole
        return _part(self, common), _part(other, common)


def _part(run: Run, tests: Sequence[str]) -> Side:
    """The side of ``tests``' rollouts alone; its dollars at the whole side's price."""
    rollouts = [r for test in tests for r in run.tests[test].rollouts]
    side = Side.of(rollouts, run.scale)
    if run.whole.dollars is None or not run.whole.worker_hours or side.worker_hours is None:
        return side
    per_hour = run.whole.dollars / run.whole.worker_hours
    return dataclasses.replace(side, dollars=side.worker_hours * per_hour)


@dataclass(frozen=True)
class TestChange:
    """One test's own change in a check's figure, and whether its rollouts alone credibly
    cross the threshold (the figures the verdict compared, for the page)."""

    test: str
    baseline: float | None
    now: float | None
    p_value: float | None  #: None: too few rollouts to test it alone, or not crossed
    carries: bool  #: crossed the threshold, credibly on its own rollouts


@dataclass(frozen=True)
class Outcome:
    """The verdict of one check on one substrate, with every figure it compared."""

    substrate: str
    check: Check
    status: Status
    baseline: float | None = None  #: the like-with-like figure (tests both runs ran)
    now: float | None = None  #: the same, divided by the control's change when there is one
    evidence: Evidence | None = None
    why: str = ""
    #: The rollouts compared, in the baseline and now.
    counts: tuple[int, int] = (0, 0)
    #: The samples the STAT was computed from, in the baseline and now.
    samples: tuple[int, int] = (0, 0)
    tests: tuple[TestChange, ...] = ()
    only_baseline: tuple[str, ...] = ()  #: tests kept out: in the baseline only
    only_now: tuple[str, ...] = ()  #: tests kept out: in this run only
    sensitivity: Sensitivity | None = None
    #: The control's own change (now / baseline) the current figures were divided by.
    drift: float | None = None

    @property
    def carriers(self) -> list[TestChange]:
        return [t for t in self.tests if t.carries]


def drift_of(check: Check, before: Run, after: Run) -> float | None:
    """The control's change in ``check``'s figure, like with like (None: no figure)."""
    then, now = before.like_with(after)
    b, a = then.value(check.metric, check.stat), now.value(check.metric, check.stat)
    return a / b if a is not None and b else None


def _units(side: Side, check: Check) -> list[float]:
    """The permutation test's per-rollout figures: cost is worker time at one price."""
    metric = "worker_hours" if check.metric == "cost" else check.metric
    return side.units(metric, check.stat)


def evaluate(
    check: Check, substrate: str, before: Run, after: Run, drift: float | None = None
) -> Outcome:
    """Whether ``check`` passes on ``substrate``, like with like (after ``drift``, if any)."""
    common = [t for t in after.tests if t in before.tests]
    both = bool(before.tests) and bool(after.tests)  # else a run without rollouts[]
    only_baseline = tuple(t for t in before.tests if t not in after.tests and both)
    only_now = tuple(t for t in after.tests if t not in before.tests and both)
    then, now = before.like_with(after)
    base, current = then.value(check.metric, check.stat), now.value(check.metric, check.stat)
    if base is None or current is None:
        side = "baseline" if base is None else "current run"
        why = f"no {check.metric} in the {side}"
        return Outcome(
            substrate, check, "skipped", why=why, only_baseline=only_baseline, only_now=only_now
        )
    scale = 1 / drift if drift else 1.0
    current *= scale
    pairs = [(t, before.tests[t], after.tests[t]) for t in common] or [("all", then, now)]
    strata = [
        Stratum(
            test,
            tuple(check.threshold.raised(_units(b, check), base, check.metric)),
            tuple(x * scale for x in _units(a, check)),
        )
        for test, b, a in pairs
    ]
    counts = (sum(len(s.baseline) for s in strata), sum(len(s.now) for s in strata))
    groups = [Group(tuple(_units(b, check)), tuple(x * scale for x in _units(a, check)))
              for _, b, a in pairs]  # fmt: skip
    passed = Outcome(
        substrate,
        check,
        "passed",
        base,
        current,
        counts=counts,
        samples=(_count(then, check.metric), _count(now, check.metric)),
        tests=tuple(_test_change(check, t, b, a, scale) for t, b, a in pairs if common),
        only_baseline=only_baseline,
        only_now=only_now,
        sensitivity=sensitivity(groups, ALPHA, check.threshold.share(base, check.metric)),
        drift=drift,
    )
    if not check.threshold.crossed(base, current, check.metric):
        return passed
    proof = _evidence(strata)
    status: Status = "failed" if proof.credible else "noise"
    return dataclasses.replace(passed, status=status, evidence=proof)


def _count(side: Side, metric: str) -> int:
    if metric in RATES:  # one figure per rollout
        return len(side.units(metric, "rate"))
    stats = side.stats.get(metric)
    return stats.n if stats else 0


def _evidence(strata: Sequence[Stratum]) -> Evidence:
    """The stratified permutation test's verdict, when each side has MIN_SAMPLES rollouts."""
    used = [s for s in strata if s.usable]
    n = (sum(len(s.baseline) for s in strata), sum(len(s.now) for s in strata))
    if min(n) < MIN_SAMPLES or not used:
        return Evidence(
            None,
            f"threshold alone: {n[0]}/{n[1]} rollouts, the noise test needs {MIN_SAMPLES} a side",
        )
    p = p_greater(used, level=ALPHA)
    relation = "<" if p < ALPHA else ">="
    within = f"within {len(used)} tests" if len(used) > 1 else "of one test"
    return Evidence(
        p, f"permutation test {within} p={p:.2g} {relation} {ALPHA} (n={n[0]}/{n[1]} rollouts)"
    )


def _test_change(check: Check, test: str, before: Side, after: Side, scale: float) -> TestChange:
    """``test``'s own figure and whether its rollouts alone credibly cross the threshold."""
    base, now = before.value(check.metric, check.stat), after.value(check.metric, check.stat)
    if base is None or now is None:
        return TestChange(test, base, now, None, False)
    now *= scale
    if not check.threshold.crossed(base, now, check.metric):
        return TestChange(test, base, now, None, False)
    stratum = Stratum(
        test,
        tuple(check.threshold.raised(_units(before, check), base, check.metric)),
        tuple(x * scale for x in _units(after, check)),
    )
    if min(len(stratum.baseline), len(stratum.now)) < 2:  # too few to test alone
        return TestChange(test, base, now, None, True)
    p = p_greater([stratum], level=ALPHA)
    return TestChange(test, base, now, p, p < ALPHA)


def judge(
    checks: Iterable[Check],
    before: Mapping[str, Run],
    after: Mapping[str, Run],
    control: str | None = None,
) -> list[Outcome]:
    """The outcome of every check on every substrate both sides measured (the control's
    change divided out of the others, the control itself not gated): the whole gate."""
    common = [name for name in after if name in before and name != control]
    outcomes = []
    for check in checks:
        drift = None
        if control is not None and control in before and control in after:
            drift = drift_of(check, before[control], after[control])
        outcomes += [evaluate(check, n, before[n], after[n], drift) for n in common]
    return outcomes
