"""Comparing two runs: the comparison table, and checks that fail on a credible regression.

A check ``METRIC.STAT:THRESHOLD`` fails when, on a substrate both runs measured, ``STAT`` of
``METRIC`` grew by more than ``THRESHOLD`` (``15%`` of the baseline, or an absolute ``5ms``,
``0.2s``, ...) *and* the rise credibly exceeds the threshold: the noise test (noise.py) finds
the current run's per-rollout figures (sides.py) larger than the baseline's raised by the
threshold. With too few rollouts on either side the threshold alone decides. A crossing that
is not credible is reported but does not fail.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from tabulate import tabulate

from ..core.noise import Evidence, evidence
from ..core.record import workload_of
from ..core.stats import STAT_NAMES, min_samples
from ..errors import ConfigError
from ..report.document import Report
from ..report.schema import SAMPLE_METRICS
from ..text.units import dollars, hours, percent, seconds, value
from ..text.width import MIN_WIDTH, terminal_width, wrap
from .by_test import lines_by_test, sides_by_test
from .sides import Side, sides

#: Metrics projected from the means (one figure per run, ``.mean`` only).
PROJECTED = ("worker_hours", "cost")
METRICS = (*SAMPLE_METRICS, *PROJECTED)
STATS = STAT_NAMES
#: What a sample of each metric is: the comparison table's counts say it in place.
SAMPLE_NOUNS = {"cold_start": "rollouts", "action": "probes", "step": "steps",
                "teardown": "rollouts", "trajectory": "rollouts"}  # fmt: skip
#: Rows of the comparison table.
TABLE_ROWS = [(m, s) for m in ("cold_start", "action", "step", "teardown") for s in ("p50", "p95")]
REGRESSION_HEADING = "rollout tax regression"

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 4

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_THRESHOLD = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|us|µs|ms|s|min|h)?")


# -- thresholds and checks --------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """How much growth is allowed: a fraction of the baseline, or an absolute duration."""

    value: float  #: a fraction (0.15 for ``15%``) when relative, else seconds
    relative: bool
    text: str

    @classmethod
    def parse(cls, text: str) -> Threshold:
        """``15%``, ``0.5%``, ``5ms``, ``250us``, ``0.2s``, ``1min`` or ``2h``."""
        match = _THRESHOLD.fullmatch(text.strip())
        if not match:
            raise ValueError(f"malformed threshold {text!r} (expected e.g. 15%, 5ms or 0.2s)")
        number, unit = float(match.group(1)), match.group(2)
        if unit is None:
            raise ValueError(f"threshold {text!r} needs a unit: % or us, ms, s, min, h")
        if not math.isfinite(number):
            raise ValueError(f"malformed threshold {text!r}")
        if unit == "%":
            return cls(number / 100, True, text.strip())
        return cls(number * _UNITS[unit], False, text.strip())

    def allowed(self, baseline: float, metric: str) -> float:
        """The largest growth that passes, in the metric's unit (hours for worker_hours)."""
        if self.relative:
            return self.value * baseline
        return self.value / 3600 if metric == "worker_hours" else self.value

    def crossed(self, baseline: float, now: float, metric: str) -> bool:
        return now - baseline > self.allowed(baseline, metric)

    def raised(self, figures: Sequence[float], baseline: float, metric: str) -> list[float]:
        """Per-rollout ``figures`` of the baseline grown by the allowed amount: a run right at
        the threshold. ``baseline`` is the check's figure, which converts an absolute
        worker-hours threshold to a share."""
        if self.relative:
            return [f * (1 + self.value) for f in figures]
        if metric == "worker_hours":
            share = self.allowed(baseline, metric) / baseline if baseline > 0 else 0.0
            return [f * (1 + share) for f in figures]
        return [f + self.value for f in figures]


@dataclass(frozen=True)
class Check:
    """One ``METRIC.STAT:THRESHOLD`` gate."""

    metric: str
    stat: str
    threshold: Threshold
    text: str

    @classmethod
    def parse(cls, text: str, option: str = "check") -> Check:
        """Parse ``cold_start.p95:15%``; ``worker_hours:10%`` means ``worker_hours.mean:10%``.
        An error names ``option`` (where the text came from)."""
        where = f"{option}={text!r}"
        target, sep, limit = text.partition(":")
        if not sep:
            raise ConfigError(f"{where}: expected METRIC.STAT:THRESHOLD, e.g. cold_start.p95:15%")
        metric, dot, stat = (part.strip() for part in target.partition("."))
        if metric not in METRICS:
            raise ConfigError(f"{where}: unknown metric {metric!r}; one of {', '.join(METRICS)}")
        if metric in PROJECTED and not dot:
            stat = "mean"
        elif not dot:
            raise ConfigError(f"{where}: missing STAT after {metric!r}; e.g. {metric}.p95:{limit}")
        if stat not in STATS:
            raise ConfigError(f"{where}: unknown stat {stat!r}; one of {', '.join(STATS)}")
        if metric in PROJECTED and stat != "mean":
            raise ConfigError(
                f"{where}: {metric} is projected from means; use {metric}.mean:{limit}"
            )
        try:
            threshold = Threshold.parse(limit)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if metric == "cost" and not threshold.relative:
            raise ConfigError(f"{where}: cost takes a percentage, e.g. cost.mean:10%")
        return cls(metric, stat, threshold, text.strip())

    @property
    def name(self) -> str:
        return f"{self.metric}.{self.stat}"


# -- the verdict of one check on one substrate ------------------------------------------------

Status = Literal["passed", "failed", "noise", "skipped"]


@dataclass(frozen=True)
class Outcome:
    substrate: str
    check: Check
    status: Status
    baseline: float | None = None
    now: float | None = None
    evidence: Evidence | None = None
    why: str = ""
    #: The samples the STAT was computed from, in the baseline and now.
    counts: tuple[int, int] = (0, 0)

    def line(self) -> str:
        """``FAILED local cold_start.p95: baseline 1.2ms, now 12ms (...), threshold 15%; ...``"""
        metric = self.check.metric
        figures = (
            f"{self.substrate} {self.check.name}: baseline {value(metric, self.baseline)}, "
            f"now {value(metric, self.now)} ({change(metric, self.baseline, self.now)}, "
            f"{percent(self.baseline, self.now)}), threshold {self.check.threshold.text}"
        )
        why = self.evidence.why if self.evidence else ""
        if self.status == "failed":
            return f"FAILED {figures}; {why}"
        return f"not credible: {figures} crossed, but {why}: not failed"

    def brief(self) -> str:
        """``local cold_start.p50 +94.9% (threshold 15%)``: the check, its change, its limit."""
        threshold = self.check.threshold
        grown = (percent if threshold.relative else partial(change, self.check.metric))(
            self.baseline, self.now
        )
        return f"{self.substrate} {self.check.name} {grown} (threshold {threshold.text})"


def evaluate(check: Check, substrate: str, baseline: Side, now: Side) -> Outcome:
    """Whether ``check`` passes on ``substrate``."""
    before, after = baseline.value(check.metric, check.stat), now.value(check.metric, check.stat)
    if before is None or after is None:
        side = "baseline" if before is None else "current run"
        return Outcome(substrate, check, "skipped", why=f"no {check.metric} in the {side}")
    counts = (_count(baseline, check.metric), _count(now, check.metric))
    if not check.threshold.crossed(before, after, check.metric):
        return Outcome(substrate, check, "passed", before, after, counts=counts)
    found = evidence(
        check.threshold.raised(baseline.units(check.metric, check.stat), before, check.metric),
        now.units(check.metric, check.stat),
    )
    status: Status = "failed" if found.credible else "noise"
    return Outcome(substrate, check, status, before, after, found, counts=counts)


def _count(side: Side, metric: str) -> int:
    stats = side.stats.get(metric)
    return stats.n if stats else 0


def judge(
    checks: Iterable[Check], before: dict[str, Side], after: dict[str, Side]
) -> list[Outcome]:
    """The outcome of every check on every substrate both sides measured: the whole gate."""
    common = [name for name in after if name in before]
    return [evaluate(c, name, before[name], after[name]) for c in checks for name in common]


# -- formatting ---------------------------------------------------------------------------------


def change(metric: str, before: float | None, after: float | None) -> str:
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
    return f"{sign}{seconds(abs(delta))}"


def heading(title: str, width: int = 80) -> str:
    """A separator line like pytest's ``write_sep("=", title)``."""
    fill = max(3, (width - len(title) - 2) // 2)
    return f"{'=' * fill} {title} {'=' * fill}"


def run_label(report: Report) -> str:
    """How the comparison names the current run: ``this run (<created>, <sha12>)``, or
    ``<sha12>-dirty`` with uncommitted changes, as the saved run's label says."""
    commit = report.commit or {}
    sha = commit.get("sha")
    label = sha[:12] + ("-dirty" if commit.get("dirty") else "") if sha else ""
    return f"this run ({report.created or '?'}{', ' + label if label else ''})"


# -- comparing two runs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What a comparison found: lines for the summary, the regression section, failed or not."""

    summary: list[str] = field(default_factory=list)
    #: The body of the "rollout tax regression" section; empty unless a check failed.
    regression: list[str] = field(default_factory=list)
    failed: bool = False
    #: Every check's outcome on every common substrate (what the HTML page marks).
    outcomes: tuple[Outcome, ...] = ()
    #: The width the printed lines fit (the terminal's); ``summary`` and ``regression`` keep
    #: each note whole, ``summary_lines``, ``regression_lines`` and ``lines`` fit it.
    width: int = MIN_WIDTH

    @property
    def lines(self) -> list[str]:
        """Every line fitted to the width, the regression section under its own heading."""
        if not self.regression:
            return self.summary_lines
        heading_line = heading(REGRESSION_HEADING, self.width)
        return [*self.summary_lines, heading_line, *self.regression_lines]

    @property
    def summary_lines(self) -> list[str]:
        """The summary's lines as printed: each fitted to the width."""
        return fit(self.summary, self.width)

    @property
    def regression_lines(self) -> list[str]:
        """The regression section's lines as printed: each fitted to the width."""
        return fit(self.regression, self.width)

    @property
    def exit_status(self) -> int:
        return EXIT_REGRESSION if self.failed else EXIT_OK


def compare_reports(
    baseline: Report,
    current: Report,
    checks: Iterable[Check] = (),
    *,
    baseline_label: str = "?",
    current_label: str = "this run",
    width: int | None = None,
) -> Verdict:
    """The comparison table of every common substrate (and a line per test), and the verdict of
    every check on it; its printed lines fit ``width`` (None: the terminal's)."""
    width = width or terminal_width()
    scale = current.projection
    before, after = sides(baseline, scale), sides(current, scale)
    common = [name for name in after if name in before]
    lines = [
        f"baseline: {baseline_label}",
        f"now:      {current_label}",
        f"both runs' worker-hours projected for {scale.rollouts:,} rollouts x {scale.steps} "
        f"steps"
        + (f", think time {seconds(scale.think_time_s)}/step" if scale.think_time_s else ""),
        *notes(baseline, current),
    ]
    tests_before, tests_after = sides_by_test(baseline, scale), sides_by_test(current, scale)
    for name in common:
        lines += table(name, before[name], after[name], width)
        by_test = lines_by_test(name, tests_before.get(name, {}), tests_after.get(name, {}))
        lines += by_test if len(by_test) > 1 else []
    only_before = [name for name in before if name not in after]
    only_after = [name for name in after if name not in before]
    if only_before:
        lines.append(f"only in the baseline (not compared): {', '.join(only_before)}")
    if only_after:
        lines.append(f"only in this run (no baseline): {', '.join(only_after)}")
    checks = list(checks)
    if not checks:
        return Verdict(lines, width=width)
    if not common:
        lines.append("rollout-tax: no substrate in common with the baseline: no check applied")
        return Verdict(lines, width=width)
    outcomes = judge(checks, before, after)
    gate = gate_lines(outcomes, tests_before, tests_after)
    if any(o.status == "failed" for o in outcomes):
        return Verdict(lines, gate, failed=True, outcomes=tuple(outcomes), width=width)
    return Verdict(lines + gate, outcomes=tuple(outcomes), width=width)


def fit(lines: Iterable[str], width: int) -> list[str]:
    """``lines`` as printed in ``width`` columns: a longer one wrapped, its continuation lines
    indented (a path longer than a line stays whole); the others (tables, blanks) as they are."""
    return [
        fitted
        for line in lines
        for fitted in ([line] if len(line) <= width else wrap(line, width, break_words=False))
    ]


def table(name: str, before: Side, after: Side, width: int = MIN_WIDTH) -> list[str]:
    """The comparison table of one substrate (p50/p95 of each phase, then worker-hours).

    Too wide for ``width``, it narrows a step at a time: a long substrate name moves to a line
    of its own above the table, then the absolute change goes (the change in % stays).
    """
    rows = table_rows(before, after)
    headers = [name, "baseline", "now", "change", "change %", "n base/now"]
    lines = _tabulate(headers, rows)
    if _widest(lines) > width:
        headers[0] = "figure"
        lines = [f"{name}:", *_tabulate(headers, rows)]
    if _widest(lines) > width:
        del headers[3]
        lines = [f"{name}:", *_tabulate(headers, [row[:3] + row[4:] for row in rows])]
    return ["", *lines]


def _tabulate(headers: Sequence[str], rows: list[list[str]]) -> list[str]:
    align = ("left",) + ("right",) * (len(headers) - 1)
    return tabulate(rows, headers=headers, tablefmt="simple", colalign=align).splitlines()


def _widest(lines: Iterable[str]) -> int:
    return max((len(line) for line in lines), default=0)


def table_rows(before: Side, after: Side) -> list[list[str]]:
    """The comparison table's rows: figure, baseline, now, change, change %, and the sample
    counts, each with what it counts (``6/6 rollouts``, ``30/30 probes``, ``480/480 steps``)."""
    rows = []
    for metric, stat in TABLE_ROWS:
        b, a = before.value(metric, stat), after.value(metric, stat)
        counts = f"{_n(before, metric)}/{_n(after, metric)} {SAMPLE_NOUNS[metric]}"
        rows.append(
            [f"{metric} {stat}", value(metric, b), value(metric, a), change(metric, b, a),
             percent(b, a), counts]
        )  # fmt: skip
    b, a = before.worker_hours, after.worker_hours
    rows.append(["worker-hours", value("worker_hours", b), value("worker_hours", a),
                 change("worker_hours", b, a), percent(b, a), ""])  # fmt: skip
    if before.dollars is not None or after.dollars is not None:
        b, a = before.dollars, after.dollars
        rows.append(["dollars", value("cost", b), value("cost", a),
                     change("cost", b, a), percent(b, a), ""])  # fmt: skip
    return rows


def _n(side: Side, metric: str) -> str:
    stats = side.stats.get(metric)
    return str(stats.n) if stats else "0"


def gate_lines(
    outcomes: list[Outcome],
    tests_before: dict[str, dict[str, Side]] | None = None,
    tests_after: dict[str, dict[str, Side]] | None = None,
) -> list[str]:
    """One line per failed check (then the tests that carry it), one per crossing that was not
    credible, one for the rest."""
    failed = [o for o in outcomes if o.status == "failed"]
    noise = [o for o in outcomes if o.status == "noise"]
    passed = [o for o in outcomes if o.status == "passed"]
    skipped = [o for o in outcomes if o.status == "skipped"]
    lines = []
    for o in failed + noise:
        lines.append(o.line())
        if tests_before is not None and tests_after is not None:
            lines += carried_by(
                o, tests_before.get(o.substrate, {}), tests_after.get(o.substrate, {})
            )
    if skipped:
        lines.append(
            f"skipped {len(skipped)} check(s) without figures on both sides: "
            + "; ".join(f"{o.substrate} {o.check.name} ({o.why})" for o in skipped)
        )
    by_check: dict[str, list[str]] = {}
    for outcome in passed:
        by_check.setdefault(outcome.check.text, []).append(outcome.substrate)
    names = ", ".join(f"{text} ({', '.join(subs)})" for text, subs in by_check.items())
    for o in outcomes:
        need = min_samples(o.check.stat)
        if o.status != "skipped" and o.check.metric not in PROJECTED and min(o.counts) < need:
            lines.append(
                f"warning: {o.substrate} {o.check.name} is quoted from {o.counts[0]}/"
                f"{o.counts[1]} sample(s); a {o.check.stat} needs {need} or more"
            )
    lines.append(
        f"passed {len(passed)} of {len(outcomes)} check(s)" + (f": {names}" if names else "")
    )
    return lines


def carried_by(outcome: Outcome, before: dict[str, Side], after: dict[str, Side]) -> list[str]:
    """The tests whose own rollouts carry a crossing: the check, judged again on each test's
    rollouts alone (the same threshold and noise test), fails there. A crossing that was noise
    over all tests may be credible in one (it is still not failed). Nothing with one test in
    common (the substrate's line says it all)."""
    common = [test for test in after if test in before]
    if len(common) < 2:
        return []
    found = [(test, evaluate(outcome.check, outcome.substrate, before[test], after[test]))
             for test in common]  # fmt: skip
    named = [
        f"{test} ({o.evidence.why})" for test, o in found if o.status == "failed" and o.evidence
    ]
    prefix = f"{outcome.substrate} {outcome.check.name}"
    if outcome.status == "noise":
        return (
            [f"{prefix}: noise over all tests, but credible in: {'; '.join(named)}"]
            if named
            else []
        )
    if not named:
        return [f"{prefix}: no test carries it on its own rollouts (none crosses credibly)"]
    return [f"{prefix} regressed in: {'; '.join(named)}"]


def notes(baseline: Report, current: Report) -> list[str]:
    """Warnings that make a comparison less like-for-like: another machine, other workloads."""
    lines = []
    before, after = baseline.machine, current.machine
    keys = ("cpu_count", "python", "platform", "hostname_sha256")
    differ = [k for k in keys if k in before and k in after and before[k] != after[k]]
    if differ:
        shown = [
            "hostname" if k == "hostname_sha256" else f"{k} {before[k]} -> {after[k]}"
            for k in differ
        ]
        lines.append(f"note: the baseline ran on another machine ({', '.join(shown)} differ)")
    tests_before, tests_after = _workloads(baseline), _workloads(current)
    if tests_before and tests_after and tests_before != tests_after:
        lines.append(
            f"note: the runs ran different workloads ({len(tests_before - tests_after)} only in "
            f"the baseline, {len(tests_after - tests_before)} only now): phases may differ for "
            "reasons other than the substrate"
        )
    return lines


def _workloads(report: Report) -> set[str]:
    return {
        workload_of(r.get("test", ""), r.get("substrate", ""), r.get("round", 1))
        for r in report.rollouts
    }
