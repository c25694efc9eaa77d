"""The run's own figures from its records: wait share (median, p90), environment share,
stragglers, idle GPU-hours."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.train_logs.figures import figures
from pytest_rollout_tax.train_logs.records import StepRecord


def record(step: int, wall: float, wait: float | None, **kw: float) -> StepRecord:
    return StepRecord(step, wall, generation_s=wait, compute_s=None, wait_s=wait, **kw)


def test_the_wait_share_is_per_step_median_and_p90():
    # shares 0.1 .. 1.0 over ten steps: median 0.55, p90 0.91 (linear interpolation)
    run = figures([record(i, 100.0, 10.0 * i) for i in range(1, 11)], gpus=4)
    assert run.steps == 10
    assert run.wait_share_p50 == pytest.approx(0.55)
    assert run.wait_share_p90 == pytest.approx(0.91)
    assert run.wait_s == 550.0 and run.wall_s == 1000.0
    assert run.idle_gpu_hours == pytest.approx(4 * 550 / 3600)


def test_the_environment_share_and_stragglers_need_tool_time():
    records = [
        record(1, 10.0, 5.0, tool_s=1.0, trajectory_generation_s=3.0,
               slowest_tool_s=4.0, slowest_generation_s=3.0),
        record(2, 10.0, 5.0, tool_s=3.0, trajectory_generation_s=5.0,
               slowest_tool_s=1.0, slowest_generation_s=6.0),
    ]  # fmt: skip
    run = figures(records)
    assert run.environment_share == pytest.approx(4 / 12)
    assert run.stragglers == (1,)
    assert run.idle_gpu_hours is None
    bare = figures([record(1, 10.0, 5.0)])
    assert bare.environment_share is None and bare.stragglers == ()
