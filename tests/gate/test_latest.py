"""The latest change point on a gated run: per testbed and metric, the newest of a series' change
points with its size (relative, in run-to-run sigmas: beyond the noise or not) and its run and
date; one line when the history is too short or has none."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("ruptures")

from support.reports import COLD, report, rollouts

from pytest_rollout_tax.gate import history, latest
from pytest_rollout_tax.gate import testbed as beds
from pytest_rollout_tax.report.document import Report


def run(level: float, cpus: int, index: int) -> tuple[str, Report]:
    """A saved run on a testbed of ``cpus`` CPUs, its phases at ``level`` (2% jitter)."""
    jitter = 1 + 0.02 * (index % 3)
    made = report(rollouts("local", COLD, factor=level * jitter))
    machine = {"cpu_count": cpus, "platform": "Linux-6", "machine": "x86_64", "ci": None}
    made = dataclasses.replace(made, machine=machine, created=f"2026-12-{index:02d}T00:00:00Z")
    return f"{index:04d}_run", beds.stamped(made)


def test_the_latest_of_two_change_points_is_given_with_its_size_run_and_date() -> None:
    levels = [1.0] * 8 + [2.0] * 8 + [1.5] * 8  # two steps on the 4-CPU testbed
    runs = [run(level, 4, i) for i, level in enumerate(levels, start=1)]
    found = history.analyze(runs)
    now = runs[-1][1]
    said = latest.latest(found, now)
    cold = [c for c in said.points if c.metric == "local.cold_start.p50"]
    assert len(cold) == 1 and cold[0].run == "0017_run"  # the second step, not the first
    assert cold[0].change == pytest.approx(-0.25, abs=0.03) and cold[0].beyond_noise
    assert cold[0].created == "2026-12-17T00:00:00Z"
    line = next(x for x in said.lines() if x.startswith("change point: local cold_start.p50 "))
    bed = history.testbed_key(now, "local")
    assert f"on [{bed}]: " in line and "(-24.8%, " in line
    assert "x the run-to-run noise: beyond it; t-test p=" in line
    assert line.endswith("at 0017_run (2026-12-17T00:00:00Z)")
    assert cold[0].to_dict()["testbed"] == bed and cold[0].to_dict()["beyond_noise"] is True
    assert not [x for x in said.lines() if x.startswith("change points:")]  # every series moved


def test_a_series_without_a_change_point_is_named() -> None:
    """Only the cold start steps up (and the worker-hours it is part of): the testbed's other
    series are named as having none."""
    runs = []
    for name, made in (run(1.0, 4, i) for i in range(1, 13)):
        k = 2.0 if int(name[:4]) > 6 else 1.0
        cold = [dataclasses.replace(r, cold_start_s=c * k)
                for r, c in zip(rollouts("local", COLD), COLD, strict=True)]  # fmt: skip
        runs.append((name, beds.stamped(dataclasses.replace(report(cold), machine=made.machine))))
    said = latest.latest(history.analyze(runs), runs[-1][1])
    assert {c.metric for c in said.points} == {
        "local.cold_start.p50", "local.cold_start.p95", "local.worker_hours.mean"
    }  # fmt: skip
    bed = history.testbed_key(runs[-1][1], "local")
    assert said.notes == (
        f"change points: local on [{bed}]: none in action.p50, action.p95, step.p50, step.p95, "
        "teardown.p50, teardown.p95 over 12 saved run(s)",
    )


def test_only_this_runs_testbed_is_reported() -> None:
    """A step on another testbed (8 CPUs) is not this run's (4 CPUs) latest change point."""
    other = [run(1.0 if i < 8 else 3.0, 8, i) for i in range(1, 15)]
    mine = [run(1.0, 4, i) for i in range(15, 25)]
    said = latest.latest(history.analyze([*other, *mine]), mine[-1][1])
    assert said.points == ()
    bed = history.testbed_key(mine[-1][1], "local")
    assert said.lines() == [f"change points: local on [{bed}]: none over 10 saved run(s)"]


def test_too_little_history_says_so_in_one_line() -> None:
    runs = [run(1.0, 4, 1), run(1.0, 8, 2), run(2.0, 8, 3), run(2.0, 4, 4)]  # 2 on 4 CPUs
    said = latest.latest(history.analyze(runs), runs[-1][1])
    bed = history.testbed_key(runs[-1][1], "local")
    assert said.lines() == [
        f"change points: local on [{bed}]: 2 saved run(s) on this testbed, 3 needed: "
        "none looked for"
    ]


def test_a_history_that_cannot_be_read_says_why() -> None:
    assert latest.unavailable("needs ruptures").lines() == [
        "change points: not looked for: needs ruptures"
    ]
