"""Which test regressed: each test's side on each substrate (its rollouts alone), and its line
in the comparison; compare.py judges a crossing check again on each test's side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.record import workload_of
from ..report.document import Report
from ..report.projection import Scale
from ..text.units import percent, seconds
from .sides import Samples, Side, rollout_samples

#: The figures of a test's comparison line.
FIGURES = (("cold_start", "p50"), ("step", "p50"))


def rollout_test(item: Mapping[str, Any]) -> str:
    """A rollout's test without its ``<substrate>-<round>`` parameter: ``t.py::test_x``."""
    workload = workload_of(item.get("test", "?"), item.get("substrate", ""), item.get("round", 1))
    return workload.replace("[]", "").replace("-]", "]")


def sides_by_test(report: Report, scale: Scale) -> dict[str, dict[str, Side]]:
    """Per substrate, each test's side (its rollouts alone), tests in the report's order."""
    grouped: dict[str, dict[str, list[Samples]]] = {}
    for item in report.rollouts:
        tests = grouped.setdefault(item["substrate"], {})
        tests.setdefault(rollout_test(item), []).append(rollout_samples(item))
    return {
        substrate: {test: Side.of(rollouts, scale) for test, rollouts in tests.items()}
        for substrate, tests in grouped.items()
    }


def lines_by_test(substrate: str, before: dict[str, Side], after: dict[str, Side]) -> list[str]:
    """One line per test both runs ran on ``substrate``: ``local t.py::test_x: cold_start p50
    1.2ms -> 1.5ms (+25.0%), step p50 ..., 6/6 rollouts``."""
    lines = []
    for test in (name for name in after if name in before):
        then, now = before[test], after[test]
        parts = [
            f"{metric} {stat} {seconds(then.value(metric, stat))} -> "
            f"{seconds(now.value(metric, stat))} "
            f"({percent(then.value(metric, stat), now.value(metric, stat))})"
            for metric, stat in FIGURES
        ]
        counts = f"{len(then.rollouts)}/{len(now.rollouts)} rollouts"
        lines.append(f"{substrate} {test}: {', '.join(parts)}, {counts}")
    return lines
