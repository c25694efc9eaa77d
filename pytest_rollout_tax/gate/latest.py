"""The latest change point of each of this run's series, on every gated run with history: per
testbed and metric, its size (relative, and in run-to-run sigmas: beyond the noise or not)
and the run it happened at (docs/gating.md#change-points-on-every-gated-run)."""

from __future__ import annotations

from dataclasses import dataclass

from ..report.document import Report
from ..text.units import percent, value
from .history import BEYOND_NOISE, MIN_RUNS, SERIES, ChangePoint, History, testbed_key


@dataclass(frozen=True)
class Latest:
    """What the gate says about the history: the latest change point of each series of this
    run's testbeds, and a line for each substrate with too little history or none."""

    points: tuple[ChangePoint, ...] = ()
    #: One line per substrate whose history has no change point, or is too short to look.
    notes: tuple[str, ...] = ()
    #: The saved runs the history holds (this run included).
    runs: int = 0

    def lines(self) -> list[str]:
        """The gate's lines: one per change point, then the notes."""
        return [*(point_line(c) for c in self.points), *self.notes]


def point_line(c: ChangePoint) -> str:
    """``change point: local step.p95 on [<testbed>]: 3.1ms -> 6.2ms (+100.0%, 9.3x the run-to-run
    noise: beyond it; t-test p=1e-05) at 0007_ab12 (2026-12-06T05:00:00Z)``."""
    unit = c.metric.split(".")[-2]
    substrate, figure = c.metric.split(".", 1)
    sigmas = "no run-to-run noise" if c.noise == 0 else f"{c.sigmas:.1f}x the run-to-run noise"
    where = "beyond it" if c.beyond_noise else f"within {BEYOND_NOISE:g} sigma: seen over runs"
    return (
        f"change point: {substrate} {figure} on [{c.testbed}]: {value(unit, c.before)} -> "
        f"{value(unit, c.after)} ({percent(c.before, c.after)}, {sigmas}: {where}; "
        f"t-test p={c.p:.2g}) at {c.run} ({c.created or 'date unknown'})"
    )


def latest(history: History, report: Report) -> Latest:
    """The latest change point of every series of ``report``'s substrates on their testbeds
    in ``history`` (which holds ``report``), or a line saying there is none or too little."""
    points: list[ChangePoint] = []
    notes: list[str] = []
    for substrate in report.substrates:
        bed = testbed_key(report, substrate)
        keys = [(bed, f"{substrate}.{metric}.{stat}") for metric, stat in SERIES]
        runs = max((history.counts.get(key, 0) for key in keys), default=0)
        if runs < MIN_RUNS:
            notes.append(
                f"change points: {substrate} on [{bed}]: {runs} saved run(s) on this testbed, "
                f"{MIN_RUNS} needed: none looked for"
            )
            continue
        found = [c for key in keys if (c := history.latest(key)) is not None]
        points += found
        if not found:
            notes.append(f"change points: {substrate} on [{bed}]: none over {runs} saved run(s)")
            continue
        seen = {c.metric for c in found}
        none = [
            m.split(".", 1)[1] for _, m in keys if m not in seen and history.counts.get((bed, m))
        ]
        if none:
            notes.append(f"change points: {substrate} on [{bed}]: none in {', '.join(none)} "
                         f"over {runs} saved run(s)")  # fmt: skip
    return Latest(tuple(points), tuple(notes), len(history.runs))


def unavailable(why: str) -> Latest:
    """The one line of a gated run whose history could not be looked at."""
    return Latest(notes=(f"change points: not looked for: {why}",))
