"""summary/table.py: the table narrowed to fit the terminal, down to its p50-only columns."""

from __future__ import annotations

import pytest
from support.reports import build_report, rollout

from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.table import table_lines
from pytest_rollout_tax.summary.terminal import render_summary

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
