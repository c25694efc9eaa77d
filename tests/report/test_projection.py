import random

import pytest

from pytest_rollout_tax.core.price import Rate
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.report import projection
from pytest_rollout_tax.report.document import Isolation, SubstrateEntry
from pytest_rollout_tax.report.projection import (
    Decomposition,
    Means,
    Scale,
    added_hours,
    project,
    spread,
    step_overhead,
)
from pytest_rollout_tax.report.records import Burst, Command, Pool


def means(cold_start_s, step_s=None, teardown_s=0.0, action_s=None, **more) -> Means:
    return Means(cold_start_s=cold_start_s, action_s=action_s, step_s=step_s,
                 teardown_s=teardown_s, **more)  # fmt: skip


def worker_hours(scale, **figures):
    return projection.worker_hours(means(**figures), scale)


def tax_hours(scale, **figures):
    return projection.tax_hours(means(**figures), scale)


def decompose(scale, **figures):
    return projection.decompose(means(**figures), scale)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"per_rollout_s": 1.0}, 277.8),
        ({"per_action_s": 0.010}, 416.7),
        ({"per_action_s": 0.100}, 4166.7),
    ],
)
def test_added_hours_reproduces_table_1_of_the_paper(kwargs, expected):
    assert round(added_hours(**kwargs, rollouts=1_000_000, steps=150), 1) == expected


def test_worker_and_tax_hours_follow_the_design_formulas():
    scale = Scale(rollouts=3600, steps=10, think_time_s=0.5)
    assert worker_hours(scale, cold_start_s=2.0, step_s=0.1, teardown_s=1.0) == pytest.approx(
        2.0 + 10 * (0.1 + 0.5) + 1.0
    )
    assert tax_hours(scale, cold_start_s=2.0, action_s=0.05, teardown_s=1.0) == pytest.approx(
        2.0 + 10 * 0.05 + 1.0
    )


def test_a_no_op_probe_slower_than_the_step_is_capped_at_the_step():
    scale = Scale(rollouts=7200, steps=10)
    tax = tax_hours(scale, cold_start_s=2.0, action_s=0.3, teardown_s=1.0, step_s=0.1)
    worker = worker_hours(scale, cold_start_s=2.0, step_s=0.1, teardown_s=1.0)
    assert tax == 7200 * (2.0 + 10 * min(0.3, 0.1) + 1.0) / 3600 == pytest.approx(8.0)
    assert tax <= worker
    assert step_overhead(0.3, 0.1) == 0.1 and step_overhead(0.05, 0.1) == 0.05
    assert step_overhead(0.3) == 0.3  # no steps measured: the probe alone


def test_tax_hours_never_exceed_worker_hours_over_random_inputs():
    """Property: for any measured means and scale, the tax is part of the work."""
    rng = random.Random(20260301)

    def duration() -> float:  # 100 ns .. 1000 s, evenly over the decades, sometimes exactly 0
        return 0.0 if rng.random() < 0.05 else 10 ** rng.uniform(-7, 3)

    for _ in range(5000):
        scale = Scale(
            rollouts=rng.randint(1, 10**12),
            steps=rng.randint(1, 5000),
            think_time_s=rng.choice([0.0, duration()]),
        )
        cold, action, step, teardown = duration(), duration(), duration(), duration()
        tax = tax_hours(scale, cold_start_s=cold, action_s=action, teardown_s=teardown, step_s=step)
        worker = worker_hours(scale, cold_start_s=cold, step_s=step, teardown_s=teardown)
        assert tax <= worker, (scale, cold, action, step, teardown)
        expected = scale.rollouts * (cold + scale.steps * min(action, step) + teardown) / 3600
        assert tax == pytest.approx(expected, rel=1e-12)


def test_the_decomposition_splits_worker_hours_and_its_tax_part_is_tax_hours():
    scale = Scale(rollouts=3600, steps=10, think_time_s=0.5)
    figures = {"cold_start_s": 2.0, "action_s": 0.05, "teardown_s": 1.0}
    parts = decompose(scale, step_s=0.1, idle_s=0.25, **figures)
    assert parts == Decomposition(
        cold_start=2.0, overhead=0.5, command=0.5, think=5.0, teardown=1.0, idle=0.25
    )
    assert parts.worker_hours == pytest.approx(
        worker_hours(scale, cold_start_s=2.0, step_s=0.1, teardown_s=1.0, idle_s=0.25)
    )
    assert parts.tax_hours == pytest.approx(tax_hours(scale, step_s=0.1, idle_s=0.25, **figures))
    assert list(parts.to_dict()) == list(Decomposition.PARTS)
    assert decompose(scale, step_s=0.1, **figures).idle == 0.0  # no pool, no idle time


def test_the_decomposition_adds_up_over_random_inputs():
    """Property: the parts sum to the worker-hours, the tax parts to the tax-hours."""
    rng = random.Random(1414)
    for _ in range(2000):
        scale = Scale(
            rng.randint(1, 10**9), rng.randint(1, 1000), rng.choice([0, 10 ** rng.uniform(-3, 2)])
        )
        cold, action, step, teardown = (10 ** rng.uniform(-6, 3) for _ in range(4))
        idle = rng.choice([0.0, 10 ** rng.uniform(-3, 3)])
        isolation = rng.choice([None, 10 ** rng.uniform(-6, 3)])  # at times beyond the command
        parts = decompose(
            scale, cold_start_s=cold, action_s=action, step_s=step, teardown_s=teardown,
            idle_s=idle, isolation_s=isolation,
        )  # fmt: skip
        worker = worker_hours(
            scale, cold_start_s=cold, step_s=step, teardown_s=teardown, idle_s=idle
        )
        tax = tax_hours(
            scale, cold_start_s=cold, action_s=action, teardown_s=teardown, step_s=step,
            idle_s=idle, isolation_s=isolation,
        )  # fmt: skip
        assert parts.worker_hours == pytest.approx(worker, rel=1e-9)
        assert parts.tax_hours == pytest.approx(tax, rel=1e-9)
        assert min(parts.to_dict().values()) >= 0 and parts.tax_hours <= parts.worker_hours


@pytest.mark.parametrize(
    ("projected", "steps_source"),
    [(None, "default"), ((1000, 20), "option"), ((5000, None), "workloads")],
)
def test_the_scale_says_where_its_steps_came_from(projected, steps_source):
    scale = Scale.asked(projected, think_time_s=2)
    rollouts, steps = projected or (1_000_000, 150)
    assert (scale.rollouts, scale.steps, scale.think_time_s) == (rollouts, steps, 2)
    assert (scale.steps_source, scale.think_time_source) == (steps_source, "option")


def test_steps_not_given_may_be_the_replays_mean_length_and_only_then():
    unset = Scale.asked()
    assert (unset.rollouts, unset.steps, unset.steps_source) == (1_000_000, 150, "default")
    replays = unset.with_replay_steps([3, 35, 35], others=0)
    assert (replays.steps, replays.steps_source) == (24, "replays")
    mixed = unset.with_replay_steps([35], others=1)
    assert (mixed.steps, mixed.steps_source) == (150, "mixed")
    assert unset.with_replay_steps([], others=4) == unset  # no replay: the default, unsaid
    given = Scale.asked((1000, 150))
    assert given.steps_source == "option" and given.with_replay_steps([35], 0) == given
    assert Scale.asked((1000, None)).with_replay_steps([35], 0).steps is None


def test_spread_is_slowest_over_fastest():
    result = spread({"local": 0.002, "docker": 0.22, "vm": 0.11}, {"local": 100, "docker": 180})
    assert (result.fastest, result.slowest) == ("local", "docker")
    assert result.cold_start_p50 == pytest.approx(110)
    assert result.worker_hours == pytest.approx(1.8)


def test_no_spread_for_a_single_substrate():
    assert spread({"local": 0.002}, {"local": 100}) is None


def test_recorded_think_time_stands_in_only_when_no_option_set_one():
    given = Scale.asked((10, 10), think_time_s=0.5)
    assert given.think_time_source == "option"
    assert given.with_recorded_think(3.0) == given
    unset = Scale.asked((10, 10))
    assert (unset.think_time_s, unset.think_time_source) == (0.0, "none")
    assert unset.with_recorded_think(None) == unset
    recorded = unset.with_recorded_think(3.0)
    assert (recorded.think_time_s, recorded.think_time_source) == (3.0, "recorded")
    # think is its own term: S * think hours on top of the think-free projection
    free = worker_hours(unset, cold_start_s=1.0, step_s=0.1, teardown_s=0.5)
    with_think = worker_hours(recorded, cold_start_s=1.0, step_s=0.1, teardown_s=0.5)
    assert with_think - free == pytest.approx(10 * 10 * 3.0 / 3600)


def test_a_pools_idle_time_is_its_own_term_of_worker_hours():
    scale = Scale(rollouts=3600, steps=10)
    base = worker_hours(scale, cold_start_s=2.0, step_s=0.1, teardown_s=1.0)
    assert worker_hours(
        scale, cold_start_s=2.0, step_s=0.1, teardown_s=1.0, idle_s=0.25
    ) == pytest.approx(base + 0.25)


def test_a_fleet_runs_in_waves():
    one_hour = means(3600.0, step_s=0.0)
    fleet = projection.fleet_hours(one_hour, Scale(rollouts=10, steps=1, fleet=4))
    # 3 waves of an hour; 10 rollouts of an hour each
    assert (fleet.wall_clock_hours, fleet.worker_hours) == (3.0, 10.0)
    assert fleet.cold_start_from == "rollouts (no burst measured)"
    # a warm pool's idle time costs worker-hours, not wall-clock time
    idle = projection.fleet_hours(means(3600.0, step_s=0.0, idle_s=1800.0, pool_size=2),
                                  Scale(rollouts=10, steps=1, fleet=4))  # fmt: skip
    assert (idle.wall_clock_hours, idle.worker_hours) == (3.0, 15.0)
    assert idle.cold_start_from.startswith("warm pool claims (pool=2)")
    assert projection.fleet_hours(one_hour, Scale(rollouts=10, steps=1)) is None  # no fleet


def test_a_fleet_takes_the_cold_start_of_the_nearest_burst_level():
    burst = means(1.0, step_s=0.0, bursts=((1, 1.0), (16, 9.0), (64, 30.0)))
    fleet = projection.fleet_hours(burst, Scale(rollouts=3600, steps=1, fleet=20))
    assert (fleet.burst_level, fleet.cold_start_s) == (16, 9.0)
    assert fleet.worker_hours == pytest.approx(9.0)


def test_project_is_the_one_door_and_gives_every_term():
    scale = Scale(rollouts=3600, steps=10, fleet=100)
    figures = means(2.0, step_s=0.1, teardown_s=1.0, action_s=0.05, rate=Rate(instance_hour=2.0))
    projected = project(figures, scale)
    assert projected.worker_hours == pytest.approx(2.0 + 10 * 0.1 + 1.0)
    assert projected.tax_hours == pytest.approx(2.0 + 10 * 0.05 + 1.0)
    assert projected.decomposition.worker_hours == pytest.approx(projected.worker_hours)
    assert projected.fleet.workers == 100
    assert projected.cost.dollars == pytest.approx(2.0 * projected.worker_hours)
    assert project(means(2.0, step_s=0.1), scale).cost is None  # no price, no cost


def test_a_substrates_recorded_think_time_counts_unless_an_option_set_one():
    recorded = means(1.0, step_s=0.0, think_s=2.0)
    unset = Scale(rollouts=3600, steps=10, think_time_source="none")
    assert project(recorded, unset).worker_hours == pytest.approx(1.0 + 10 * 2.0)
    given = Scale(rollouts=3600, steps=10, think_time_s=0.5)
    assert project(recorded, given).worker_hours == pytest.approx(1.0 + 10 * 0.5)


def test_isolation_never_exceeds_the_command_time_it_is_taken_from():
    """A runtime's probe slower than its mean step leaves no command time to the step: the
    pooled excess over runc's command time cannot make the parts exceed the hours (tax 102%)."""
    scale = Scale(rollouts=3600, steps=10)
    capped = project(means(2.0, step_s=0.098, action_s=0.111, isolation_s=0.01), scale)
    assert capped.decomposition.isolation == 0.0 and capped.decomposition.command == 0.0
    assert capped.tax_hours == pytest.approx(capped.worker_hours)
    partly = project(means(2.0, step_s=0.3, action_s=0.25, isolation_s=0.2), scale)
    assert partly.decomposition.isolation == pytest.approx(10 * 0.05)
    assert partly.decomposition.worker_hours == pytest.approx(partly.worker_hours)


def test_isolation_moves_from_the_command_time_to_the_tax():
    scale = Scale(rollouts=3600, steps=10)
    plain = means(2.0, step_s=0.3, action_s=0.05)
    isolated = means(2.0, step_s=0.3, action_s=0.05, isolation_s=0.1)
    before, after = project(plain, scale), project(isolated, scale)
    assert after.tax_hours - before.tax_hours == pytest.approx(10 * 0.1)
    assert after.worker_hours == before.worker_hours
    assert after.decomposition.isolation == pytest.approx(1.0)
    assert after.decomposition.command == pytest.approx(before.decomposition.command - 1.0)
    assert "isolation" not in before.decomposition.to_dict()


def stats(mean: float) -> Stats:
    return Stats(n=1, min=mean, mean=mean, p50=mean, p90=mean, p95=mean, p99=mean, max=mean)


def test_a_report_entry_gives_the_means_it_was_projected_from():
    entry = SubstrateEntry(
        cold_start=stats(2.0), action=stats(0.05), step=stats(0.1), teardown=stats(1.0),
        think=None, command=Command(mean_s=0.2),
        pool=Pool(size=2, idle_sandbox_s=3.0, hits=2, misses=1),
        isolation=Isolation(reference="docker", per_step_s=0.01), price_per_hour=1.5,
        burst=[Burst(4, cold_start=stats(3.0)), Burst(8)],
    )  # fmt: skip
    assert entry.means() == Means(
        cold_start_s=2.0, action_s=0.05, step_s=0.1, teardown_s=1.0, idle_s=1.0, command_s=0.2,
        isolation_s=0.01, rate=Rate(instance_hour=1.5), bursts=((4, 3.0),), pool_size=2,
    )  # fmt: skip
    assert entry.means().projected_step_s == pytest.approx(0.05 + 0.2)
