"""Dollars of a projection: the paper's Table 1 and the issue's worked example, exactly."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.core.price import PriceOptions, Rate, Resources, added_dollars
from pytest_rollout_tax.core.prices import rate_for
from pytest_rollout_tax.report.cost import FIXED, MINIMUM, project_cost
from pytest_rollout_tax.report.projection import Means, Scale, added_hours, decompose

E2B_1CPU_2GIB = rate_for("e2b", Resources(vcpus=1, gib=2), PriceOptions())


@pytest.mark.parametrize(
    ("per_rollout_s", "per_action_s", "hours"),
    [(1.0, 0.0, 277.8), (0.0, 0.010, 416.7), (0.0, 0.100, 4166.7)],
)
def test_table_1_in_dollars(per_rollout_s, per_action_s, hours):
    rate = Rate(vcpu_hour=0.05, vcpus=2)  # $0.10 per sandbox-hour
    added = added_hours(per_rollout_s=per_rollout_s, per_action_s=per_action_s)
    assert round(added, 1) == hours
    assert added_dollars(added, rate) == added * 0.10


def _cost(rate: Rate, *, think_s: float = 0.0, cold_s: float = 1.0, wall: float | None = None):
    scale = Scale(rollouts=1_000_000, steps=150, think_time_s=think_s)
    means = Means(cold_start_s=cold_s, action_s=0.01, step_s=0.25, teardown_s=0.0)
    hours = decompose(means, scale)
    return project_cost(
        hours.to_dict(), rate, rollouts=scale.rollouts, think_s=150 * think_s, wall_clock_hours=wall
    )


def test_the_sandbox_held_while_the_model_thinks_dominates_the_bill():
    environment = _cost(E2B_1CPU_2GIB)
    held = _cost(E2B_1CPU_2GIB, think_s=5.0)
    assert environment.dollars == pytest.approx(886, rel=0.01)
    assert held.dollars == pytest.approx(18_136, rel=0.01)
    assert held.environment_dollars == pytest.approx(environment.dollars)
    assert sum(held.parts.values()) == pytest.approx(held.dollars)


def test_the_ec2_launch_minimum_changes_the_dollars():
    rate = rate_for("ec2", Resources(instance_type="c7i.large"), PriceOptions())
    short = _cost(rate, cold_s=1.0)  # 38.5 s alive: billed 60 s
    no_minimum = _cost(Rate(instance_hour=rate.instance_hour))
    assert short.parts[MINIMUM] == pytest.approx(1e6 * 21.5 / 3600 * 0.08925)
    assert short.dollars == pytest.approx(1e6 * 60 / 3600 * 0.08925)
    assert no_minimum.dollars < short.dollars


def test_the_gke_cluster_fee_changes_the_dollars_over_the_fleets_wall_clock():
    rate = rate_for("k8s", Resources(vcpus=1, gib=2), PriceOptions())
    without_fleet = _cost(rate)
    with_fleet = _cost(rate, wall=100.0)
    assert with_fleet.parts[FIXED] == pytest.approx(10.0)  # $0.10 an hour for 100 hours
    assert with_fleet.dollars == pytest.approx(without_fleet.dollars + 10.0)
    assert not without_fleet.fee_counted and with_fleet.fee_counted
