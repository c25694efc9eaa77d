"""The leaderboard: ranked by worker-hours (ties by name), one unit per column, best and worst
marked per column, and each figure's change marked as the gate judged it."""

from __future__ import annotations

import re

from support.reports import report, rollouts

from pytest_rollout_tax.page import leaderboard
from pytest_rollout_tax.summary.lines import ranked_names


def three() -> dict:
    return report(
        rollouts("slow", [1.0] * 6), rollouts("fast", [0.001] * 6), rollouts("mid", [0.05] * 6)
    )


def test_rank_is_by_worker_hours_then_name_with_the_unmeasured_last() -> None:
    found = three()
    assert ranked_names(found) == ["fast", "mid", "slow"]
    tied = {"substrates": {"b": {"worker_hours": 1.0}, "a": {"worker_hours": 1.0},
                           "c": {"worker_hours": None}}}  # fmt: skip
    assert ranked_names(tied) == ["a", "b", "c"]


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
