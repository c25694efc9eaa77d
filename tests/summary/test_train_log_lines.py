"""The training section's lines: what the run's log has, and only that."""

from __future__ import annotations

from pytest_rollout_tax.summary.train_log import training_lines
from pytest_rollout_tax.train_logs.load import TrainLog
from pytest_rollout_tax.train_logs.records import StepRecord
from pytest_rollout_tax.train_logs.section import training
from pytest_rollout_tax.train_logs.stacks import BY_NAME


def log_of(stack: str, records: list[StepRecord]) -> TrainLog:
    return TrainLog(("run.jsonl",), ("jsonl",), BY_NAME[stack], records)


def test_stragglers_are_named_ten_at_most():
    records = [
        StepRecord(i, 10.0, 5.0, 4.0, 5.0, tool_s=1.0, trajectory_generation_s=4.0,
                   slowest_tool_s=3.0 if i % 2 else 1.0, slowest_generation_s=2.0)
        for i in range(1, 31)
    ]  # fmt: skip
    lines = training_lines(training(log_of("verl", records), None))
    assert (
        "straggler steps (slowest trajectory longer in tools than generating): 15 of 30: "
        "1, 3, 5, 7, 9, 11, 13, 15, 17, 19, ..."
    ) in lines


def test_a_run_without_wall_clock_or_tool_time_says_what_it_lacks():
    records = [StepRecord(1, None, 4.0, None, 4.0), StepRecord(2, None, 6.0, None, 6.0)]
    lines = training_lines(training(log_of("ROLL", records), None, gpus=2))
    assert lines == [
        "training log: ROLL, 2 steps, from run.jsonl (jsonl)",
        "trainer wait: 10s (no step wall clock logged)",
        "environment: ROLL logs no tool time per trajectory",
        "idle GPU-hours: 0.0 over this run on 2 GPUs (the trainer's wait)",
        "what another substrate would change: no rollout-tax report to compare with",
    ]
