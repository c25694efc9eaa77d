"""Comparing two runs: the comparison table of every common substrate (and a line per test),
and the verdict of the checks on it (judge.py judges them like with like, lines.py words them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tabulate import tabulate

from ..core.record import workload_of
from ..report.document import Report
from ..report.schema import SAMPLE_METRICS
from ..text.units import percent, seconds, value
from ..text.width import MIN_WIDTH, terminal_width, wrap
from .by_test import lines_by_test, sides_by_test
from .checks import METRICS, PROJECTED, STATS, Check
from .judge import Outcome, Run, judge
from .latest import Latest
from .lines import Tally, change, gate_lines
from .sides import Side, sides
from .testbed import testbed_notes

__all__ = ["METRICS", "PROJECTED", "SAMPLE_METRICS", "STATS", "Check", "Outcome", "change",
           "percent", "value"]  # fmt: skip

#: What a sample of each metric is: the comparison table's counts say it in place.
SAMPLE_NOUNS = {"cold_start": "rollouts", "action": "probes", "step": "steps",
                "teardown": "rollouts", "trajectory": "rollouts"}  # fmt: skip
#: Rows of the comparison table.
TABLE_ROWS = [(m, s) for m in ("cold_start", "action", "step", "teardown") for s in ("p50", "p95")]
REGRESSION_HEADING = "rollout tax regression"

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 4

# -- formatting ---------------------------------------------------------------------------------


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


#: What a comparison decided: ``compared`` (no check given), ``passed``, ``failed``, ``not
#: applicable`` (checks given, none judged), ``no baseline`` (allowed missing) or ``refused``
#: (``--rollout-compare-strict`` across testbeds, a usage error).
State = Literal["compared", "passed", "failed", "not applicable", "no baseline", "refused"]


@dataclass(frozen=True)
class Verdict:
    """What a comparison found: lines for the summary, the regression section, its state, and
    every figure it compared (``outcomes``), which the page reads rather than projecting
    again."""

    summary: list[str] = field(default_factory=list)
    #: The body of the "rollout tax regression" section; empty unless a check failed.
    regression: list[str] = field(default_factory=list)
    failed: bool = False
    #: Every check's outcome on every common substrate (what the HTML page marks).
    outcomes: tuple[Outcome, ...] = ()
    #: The width the printed lines fit (the terminal's); ``summary`` and ``regression`` keep
    #: each note whole, ``summary_lines``, ``regression_lines`` and ``lines`` fit it.
    width: int = MIN_WIDTH
    state: State = "compared"
    #: The checks given (counted when none was judged: no common substrate, no baseline).
    checks: int = 0
    #: On a gated run: the latest change point of each series in the saved runs' history.
    history: Latest | None = None

    @property
    def tally(self) -> Tally:
        """The outcomes counted once; checks never judged count as skipped."""
        tally = Tally.of(self.outcomes)
        return tally if self.outcomes else Tally(skipped=self.checks)

    @property
    def lines(self) -> list[str]:
        """Every line fitted to the width, the regression section under its own heading."""
        if not self.regression:
            return self.summary_lines
        heading_line = heading(REGRESSION_HEADING, self.width)
        return [*self.summary_lines, heading_line, *self.regression_lines]

    @property
    def summary_lines(self) -> list[str]:
        """The summary's lines as printed, then the history's: each fitted to the width."""
        return fit([*self.summary, *(self.history.lines() if self.history else [])], self.width)

    @property
    def regression_lines(self) -> list[str]:
        """The regression section's lines as printed: each fitted to the width."""
        return fit(self.regression, self.width)

    @property
    def exit_status(self) -> int:
        if self.state == "refused":
            return EXIT_USAGE
        return EXIT_REGRESSION if self.failed else EXIT_OK


def compare_reports(
    baseline: Report,
    current: Report,
    checks: Iterable[Check] = (),
    *,
    baseline_label: str = "?",
    current_label: str = "this run",
    width: int | None = None,
    control: str | None = None,
    strict: bool = False,
) -> Verdict:
    """The comparison table of every common substrate (and a line per test), and the verdict of
    every check on it, like with like (judge.py), the change of ``control`` divided out of the
    others; its printed lines fit ``width`` (None: the terminal's). ``strict``: a common
    substrate measured on another testbed refuses the comparison."""
    width = width or terminal_width()
    checks = list(checks)
    scale = current.projection
    before, after = sides(baseline, scale), sides(current, scale)
    common = [name for name in after if name in before]
    bed_notes = testbed_notes(baseline, current, common)
    refused = [line for line in bed_notes if line.startswith("warning: ")]
    if strict and refused:
        why = "; ".join(line.removeprefix("warning: ") for line in refused)
        line = f"rollout-tax: --rollout-compare-strict: {why}: not compared"
        return Verdict([line], width=width, state="refused", checks=len(checks))
    lines = [
        f"baseline: {baseline_label}",
        f"now:      {current_label}",
        f"both runs' worker-hours projected for {scale.rollouts:,} rollouts x {scale.steps} "
        f"steps"
        + (f", think time {seconds(scale.think_time_s)}/step" if scale.think_time_s else ""),
        *notes(baseline, current),
        *bed_notes,
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
    if not checks:
        return Verdict(lines, width=width)
    runs_before = {n: Run(s, tests_before.get(n, {}), scale) for n, s in before.items()}
    runs_after = {n: Run(s, tests_after.get(n, {}), scale) for n, s in after.items()}
    outcomes = tuple(judge(checks, runs_before, runs_after, control))
    gate = [*control_lines(control, before, after), *gate_lines(outcomes, len(checks))]
    state = Tally.of(outcomes).state if outcomes else "not applicable"
    failed = state == "failed"
    if failed:
        return Verdict(lines, gate, True, outcomes, width, state, len(checks))
    return Verdict(lines + gate, [], False, outcomes, width, state, len(checks))


def control_lines(
    control: str | None, before: dict[str, Side], after: dict[str, Side]
) -> list[str]:
    """What the control is, or why there is none to divide out."""
    if control is None:
        return []
    if control not in before or control not in after:
        side = "baseline" if control not in before else "this run"
        return [f"warning: the control {control} is not in the {side}: nothing divided out"]
    return [f"control: {control}; each check's change on it is divided out of the others'"]


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
    text: str = tabulate(rows, headers=headers, tablefmt="simple", colalign=align)
    return text.splitlines()


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
