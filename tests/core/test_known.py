"""A dataclass from another version's JSON object."""

from __future__ import annotations

from pytest_rollout_tax.core.known import from_known
from pytest_rollout_tax.report.projection import Scale


def test_a_newer_writers_keys_are_left_out_and_an_older_ones_missing_keys_defaulted():
    scale = from_known(Scale, {"rollouts": 10, "steps": 5, "think_time_s": 0.5, "later": 1})
    assert scale == Scale(rollouts=10, steps=5, think_time_s=0.5)
    assert (scale.rank_by, scale.steps_source) == ("worker_hours", "option")
