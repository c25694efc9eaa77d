"""summary/table.py: the table narrowed to fit the terminal, down to its p50-only columns."""

from __future__ import annotations

import pytest
from support.reports import build_report, rollout

from pytest_rollout_tax.core.price import PriceOptions, Resources
from pytest_rollout_tax.core.prices import rate_for
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.table import table_lines
from pytest_rollout_tax.summary.terminal import render_summary
from pytest_rollout_tax.text.units import dollars

LONG = "docker-gvisor-checkpointed-pool-of-eight"  # a pyproject variant's name, 40 characters


def long_named_report():
    rollouts = [rollout("local", 0.002)] * 20 + [rollout(LONG, 0.31, step=0.05)] * 20
    return build_report(rollouts, Scale(), plugin_version="1", machine={}, commit=None)


@pytest.mark.parametrize("width", [60, 80, 132])
def test_the_summary_renders_long_variant_names_at_every_width(width):
    lines = render_summary(long_named_report(), width=width)
    header = next(i for i, line in enumerate(lines) if line.startswith("substrate "))
    table = lines[header : header + 5]
    assert [line.split()[0] for line in table[3:]] == ["local", LONG], "\n".join(lines)
    if width == 132:
        assert max(map(len, table)) <= width and "p50/p95" in table[1], "\n".join(table)
    else:  # narrowed to the p50 of action and cold start: the widest it can go
        assert "p95" not in table[1] and "teardown" not in table[0], "\n".join(table)


def test_the_narrowest_table_keeps_the_p50_of_action_and_cold_start():
    report = long_named_report()
    rows = sorted(report.substrates.items())
    wide = table_lines(rows, 200)
    narrow = table_lines(rows, 60)
    assert "p50/p95" in wide[1] and "p50/p95" not in narrow[1], "\n".join(narrow)
    assert "teardown" not in narrow[0] and "step" not in narrow[0]
    row = next(line for line in narrow if line.startswith(LONG))
    assert "310ms" in row and "310ms/310ms" not in row, "\n".join(narrow)


def test_a_cost_ranked_table_has_a_dollars_column():
    """--rollout-rank-by=cost: each row's dollars, before its worker-hours; none by hours."""
    fast, slow, free = rollout("fast", 0.5), rollout("slow", 1.0), rollout("free", 1.0)
    fast.rate = rate_for("local", Resources(), PriceOptions(instance_hour=4.0)).to_dict()
    slow.rate = rate_for("local", Resources(), PriceOptions(instance_hour=1.0)).to_dict()
    runs = [fast, slow, free]
    by_cost = build_report(runs, Scale(rank_by="cost"), plugin_version="1", machine={}, commit=None)
    by_hours = build_report(runs, Scale(), plugin_version="1", machine={}, commit=None)
    lines = render_summary(by_cost, width=200)
    header = next(line for line in lines if line.startswith("substrate "))
    assert header.split()[-3:] == ["dollars", "worker", "tax"], header
    for name in ("fast", "slow"):
        row = next(line for line in lines if line.startswith(f"{name} "))
        assert dollars(by_cost.substrates[name].dollars) in row.split(), row
    assert next(line for line in lines if line.startswith("free ")).split()[-3] == "-"
    assert "dollars" not in next(
        line for line in render_summary(by_hours, width=200) if line.startswith("substrate ")
    )
