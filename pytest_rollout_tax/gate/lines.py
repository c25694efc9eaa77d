"""The gate's lines: one per check on each substrate (its figures, its evidence, what it could
have seen), the tests that carry a change, and the tally every verdict line repeats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

from ..core.stats import min_samples
from ..text.units import dollars, hours, percent, seconds, value
from .checks import PROJECTED, RATES
from .judge import Outcome, TestChange

#: What a gate that ran decided: ``not applicable`` when it judged no check.
State = Literal["passed", "failed", "not applicable"]


@dataclass(frozen=True)
class Tally:
    """The gate's outcomes counted once: every line that states the verdict reads this."""

    failed: int = 0
    noise: int = 0
    passed: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Tally:
        return cls(*(sum(o.status == s for o in outcomes)
                     for s in ("failed", "noise", "passed", "skipped")))  # fmt: skip

    @property
    def total(self) -> int:
        return self.failed + self.noise + self.passed + self.skipped

    @property
    def state(self) -> State:
        if self.failed:
            return "failed"
        return "passed" if self.total > self.skipped else "not applicable"

    def text(self) -> str:
        """``3 check(s): 1 failed, 1 passed, 1 crossed inside the noise (not failed)``."""
        parts = [
            f"{count} {what}"
            for count, what in (
                (self.failed, "failed"),
                (self.passed, "passed"),
                (self.noise, "crossed inside the noise (not failed)"),
                (self.skipped, "not judged"),
            )
            if count
        ]
        return f"{self.total} check(s): {', '.join(parts) or 'none judged'}"


def change(metric: str, before: float | None, after: float | None) -> str:
    """The absolute change in the metric's unit: ``+4.13ms``, ``+172 h``, ``-$3.20``."""
    if before is None or after is None:
        return "-"
    delta = after - before
    if delta == 0:
        return "0"
    sign = "+" if delta > 0 else "-"
    if metric == "worker_hours":
        return f"{sign}{hours(abs(delta))} h"
    if metric == "cost":
        return f"{sign}{dollars(abs(delta))}"
    if metric in RATES:
        return f"{sign}{abs(delta) * 100:.3g} points"
    return f"{sign}{seconds(abs(delta))}"


def figures(o: Outcome) -> str:
    """``local step.mean: baseline 3.64ms, now 7.77ms (+4.13ms, +113.2%), threshold 10%``."""
    metric = o.check.metric
    grown = change(metric, o.baseline, o.now)
    if metric not in RATES:  # a rate's threshold is in points: no relative change
        grown += f", {percent(o.baseline, o.now)}"
    return (
        f"{o.substrate} {o.check.name}: baseline {value(metric, o.baseline)}, "
        f"now {value(metric, o.now)} ({grown}), threshold {o.check.threshold.text}"
    )


def outcome_line(o: Outcome) -> str:
    """The check's line: its status, figures, evidence, what it could have seen, the control."""
    extra = ""
    if o.sensitivity is not None:
        extra += f"; {o.sensitivity.text()}"
    if o.drift is not None:
        extra += f"; control changed x{o.drift:.2f}, divided out"
    why = o.evidence.why if o.evidence else ""
    if o.status == "failed":
        return f"FAILED {figures(o)}; {why}{extra}"
    if o.status == "noise":
        return f"not credible: {figures(o)} crossed, but {why}: not failed{extra}"
    if o.status == "skipped":
        return f"not judged: {o.substrate} {o.check.name} ({o.why})"
    return f"passed {figures(o)}{extra}"


def brief(o: Outcome) -> str:
    """``local cold_start.p50 +94.9% (threshold 15%)``: the check, its change, its limit."""
    threshold = o.check.threshold
    relative = threshold.relative and o.check.metric not in RATES
    grown = (percent if relative else partial(change, o.check.metric))(o.baseline, o.now)
    named = o.carriers if len(o.tests) > 1 else []
    carried = f", in {', '.join(t.test for t in named)}" if named else ""
    return f"{o.substrate} {o.check.name} {grown} (threshold {threshold.text}{carried})"


def _test(t: TestChange, metric: str) -> str:
    p = f", p={t.p_value:.2g}" if t.p_value is not None else ""
    return f"{t.test} {percent(t.baseline, t.now)}{p}"


def test_lines(o: Outcome) -> list[str]:
    """The tests that carry the check's change on their own rollouts, and those that do not
    (nothing with one test: the check's line says it all)."""
    if len(o.tests) < 2:
        return []
    carriers = o.carriers
    if not carriers and o.status in ("passed", "skipped"):
        return []
    prefix = f"{o.substrate} {o.check.name}"
    others = [t for t in o.tests if not t.carries]
    rest = f"; not alone: {'; '.join(_test(t, o.check.metric) for t in others)}" if others else ""
    if not carriers:
        return [f"{prefix}: no test carries it alone{rest}"]
    named = "; ".join(_test(t, o.check.metric) for t in carriers)
    return [f"{prefix} carried by: {named}{rest}"]


def warnings(o: Outcome) -> list[str]:
    """What the check could not have seen (rounds needed), and a STAT from too few samples."""
    lines = []
    s = o.sensitivity
    if s is not None and s.rounds_needed is not None:
        lines.append(
            f"warning: {o.substrate} {o.check.name} could not have seen a "
            f"{o.check.threshold.text} change: it needs {s.rounds_needed} rounds per test "
            f"to see one at 80% power (this run: {s.rounds})"
        )
    need = min_samples(o.check.stat)
    if o.status != "skipped" and o.check.metric not in PROJECTED and min(o.samples) < need:
        lines.append(
            f"warning: {o.substrate} {o.check.name} is quoted from {o.samples[0]}/"
            f"{o.samples[1]} sample(s); a {o.check.stat} needs {need} or more"
        )
    return lines


def kept_out(outcomes: Sequence[Outcome]) -> list[str]:
    """Once per substrate: the tests on one side only, kept out of the like-with-like figures."""
    lines, seen = [], set()
    for o in outcomes:
        if o.substrate in seen or not (o.only_baseline or o.only_now):
            continue
        seen.add(o.substrate)
        parts = [f"in the baseline only: {', '.join(o.only_baseline)}"] if o.only_baseline else []
        parts += [f"in this run only: {', '.join(o.only_now)}"] if o.only_now else []
        lines.append(
            f"{o.substrate}: tests kept out of the like-with-like figures ({'; '.join(parts)})"
        )
    return lines


def gate_lines(outcomes: Sequence[Outcome], checks: int = 0) -> list[str]:
    """Every check's line (failed first), the tests carrying each, the warnings, the tests
    kept out, and the tally last (``checks`` given, counted when none was judged)."""
    order = {"failed": 0, "noise": 1, "passed": 2, "skipped": 3}
    lines = []
    for o in sorted(outcomes, key=lambda o: order[o.status]):
        lines += [outcome_line(o), *test_lines(o), *warnings(o)]
    lines += kept_out(outcomes)
    if not outcomes:
        lines.append("no substrate in common with the baseline: no check judged")
    tally = Tally.of(outcomes) if outcomes else Tally(skipped=checks)
    lines.append(f"gate {tally.state}: {tally.text()}")
    return lines
