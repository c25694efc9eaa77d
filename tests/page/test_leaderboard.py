"""The leaderboard: ranked by worker-hours (ties by name), one unit per column, best and worst
marked per column, and each figure's change marked as the gate judged it."""

from __future__ import annotations

import dataclasses
import re

from support.reports import report, rollout, rollouts

from pytest_rollout_tax.page import leaderboard
from pytest_rollout_tax.report.document import Report, SubstrateEntry
from pytest_rollout_tax.report.projection import Projected, Scale
from pytest_rollout_tax.summary.lines import ranked_names


def three() -> Report:
    return report(
        rollouts("slow", [1.0] * 6), rollouts("fast", [0.001] * 6), rollouts("mid", [0.05] * 6)
    )


def test_rank_is_by_worker_hours_then_name_with_the_unmeasured_last() -> None:
    found = three()
    assert ranked_names(found) == ["fast", "mid", "slow"]
    substrates = {"b": hours(1.0), "a": hours(1.0), "c": hours(None)}
    tied = Report(Scale(), substrates, [], plugin_version="test", machine={})
    assert ranked_names(tied) == ["a", "b", "c"]


def hours(worker_hours: float | None) -> SubstrateEntry:
    """An entry whose projection has these worker-hours and nothing else."""
    return SubstrateEntry(projected=Projected(worker_hours, tax_hours=None, decomposition=None))


def test_a_time_column_has_one_unit_chosen_by_its_smallest_value() -> None:
    assert leaderboard.unit_for([0.0004, 0.3]) == ("µs", 1e-6)
    assert leaderboard.unit_for([0.002, 0.3]) == ("ms", 1e-3)
    assert leaderboard.unit_for([1.5, 30.0]) == ("s", 1.0)
    assert leaderboard.in_unit(0.3, 1e-6) == "300,000"
    assert leaderboard.in_unit(0.0021, 1e-3) == "2.1"


def test_each_column_marks_its_best_and_worst() -> None:
    found = three()
    page = leaderboard.board(found, ranked_names(found), palette={})
    headers = re.findall(r"<th>([^<]*)</th>", page)
    assert headers[:3] == ["substrate", "worker-hours", "vs cheapest"]
    assert "cold start p50 (ms)" in headers  # the unit once, in the header
    rows = page.split("<tr>")[2:]
    assert [re.search(r"</span>(\w+)</td>", row).group(1) for row in rows] == ["fast", "mid",
                                                                                "slow"]  # fmt: skip
    assert 'data-label="worker-hours" class="best"' in rows[0]
    assert 'data-label="worker-hours" class="worst"' in rows[2]
    assert 'data-label="vs cheapest" class="best">1.00x' in rows[0]
    assert 'data-label="success" class=' not in page  # all 100%: nothing to mark
    assert 'data-label="cold start p50 (ms)" class="best">1</td>' in rows[0]  # 1ms, in ms


def steady(substrate: str, cold: float) -> list:
    """Six rollouts of fixed steps whose cold start is ``cold``: the tax share moves with it."""
    return [rollout(substrate, cold * (1 + i / 100), step=0.01) for i in range(6)]


def cells(page: str, column: str) -> list[str]:
    return re.findall(rf'<td data-label="{re.escape(column)}"[^>]*>(.*?)</td>', page)


def test_a_shares_change_is_in_percentage_points() -> None:
    before, now = report(steady("a", 0.5)), report(steady("a", 2.0))
    page = leaderboard.board(now, ["a"], palette={}, baseline=before)
    shares = [leaderboard._tax_share(r.substrates["a"]) for r in (before, now)]
    points = (shares[1] - shares[0]) * 100
    assert points > 1
    (cell,) = cells(page, "tax share")
    assert cell.endswith(f'<span class="change">+{points:.1f} pp</span>'), cell


def test_no_change_is_shown_where_nothing_changed() -> None:
    found = three()
    page = leaderboard.board(found, ranked_names(found), palette={}, baseline=found)
    assert "change" not in page  # no +0.0% anywhere, success 100% included
    moved = report(steady("a", 0.5)), report(steady("a", 2.0))
    page = leaderboard.board(moved[1], ["a"], palette={}, baseline=moved[0])
    assert cells(page, "success") == ["100%"]  # 100% then and now: nothing to say
    assert '<span class="change">+' in cells(page, "cold start p50 (s)")[0]


def test_figures_that_show_alike_get_the_same_mark() -> None:
    """1.000s and 1.0004s both show as 1 (s) and 1.00x: both are the best, not one of them."""
    found = report(rollouts("a", [1.0] * 6), rollouts("b", [1.0004] * 6),
                   rollouts("c", [2.0] * 6))  # fmt: skip
    page = leaderboard.board(found, ranked_names(found), palette={})
    for column in ("cold start p50 (s)", "cold start p95 (s)", "vs cheapest"):
        marks = re.findall(rf'data-label="{re.escape(column)}"( class="\w+")?>([^<]*)', page)
        assert marks[0] == marks[1] and marks[0][0] == ' class="best"', (column, marks)
        assert marks[2][0] == ' class="worst"', (column, marks)


def _two_tests(factor_x: float) -> Report:
    from support.reports import COLD

    from pytest_rollout_tax.core.record import Rollout

    x = rollouts("local", COLD, factor_x)
    y = [Rollout(**{**r.__dict__, "test": r.test.replace("test_x", "test_y")})
         for r in rollouts("local", COLD)]  # fmt: skip
    return report(x + y)


def test_the_verdict_box_names_the_tests_and_is_never_green_for_what_it_could_not_judge():
    """Issue 42, finding 5: "Gate passed" in green beside a +209 % that no test was named for."""
    from pytest_rollout_tax.gate.checks import Check
    from pytest_rollout_tax.gate.compare import compare_reports

    failed = compare_reports(_two_tests(1), _two_tests(10), [Check.parse("cold_start.p50:15%")])
    text, status = leaderboard.verdict_line(failed.outcomes)
    assert status == "failed" and "(in t.py::test_x)" in text
    assert text.startswith("Gate failed: 1 of 1 check(s) found a credible slowdown")
    skipped = compare_reports(_two_tests(1), _two_tests(1), [Check.parse("action.p50:5%"),
                              Check.parse("cold_start.p50:15%")])  # fmt: skip
    judged = [o for o in skipped.outcomes if o.check.metric == "cold_start"]
    unjudged = [dataclasses.replace(o, status="skipped", why="no action") for o in judged]
    assert leaderboard.verdict_line(judged)[1] == "passed"
    assert leaderboard.verdict_line([*judged, *unjudged])[1] == "partial"
    assert leaderboard.verdict_line(unjudged) == (
        "Gate not applicable: 1 not judged (no figures on both sides): local cold_start.p50.",
        "unjudged",
    )
