import json
import math
import random

import pytest
from support.reports import build_report, rollout

from pytest_rollout_tax.core.record import Step
from pytest_rollout_tax.fleet.burst import BurstLevel
from pytest_rollout_tax.fleet.pool import PoolStats
from pytest_rollout_tax.report.build import Fleet
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.schema import SCHEMA
from pytest_rollout_tax.summary.terminal import render_summary

STATS_KEYS = {"n", "min", "mean", "p50", "p90", "p95", "p99", "max"}


HOURLY = Scale(rollouts=3600, steps=10)  # 3600 rollouts: hours equal seconds per rollout


def report(rollouts, scale=HOURLY):
    return build_report(rollouts, scale, plugin_version="1", machine={"cpu_count": 2}, commit=None)


def test_report_has_the_schema_of_the_design():
    data = report([rollout("local", 0.002), rollout("docker", 0.22)]).to_dict()
    assert data["schema"] == SCHEMA == "rollout-tax/2"
    assert set(data) == {
        "schema", "created", "plugin_version", "machine", "commit", "client", "projection",
        "substrates", "spread", "ranking", "not_run", "shared_sandboxes", "rollouts",
    }  # fmt: skip
    assert data["shared_sandboxes"] == []
    local = data["substrates"]["local"]
    assert set(local) == {
        "kind", "transport", "rollouts", "failures", "failure_reasons", "cold_start", "action",
        "step", "teardown", "trajectory", "think", "phases", "worker_hours", "tax_hours",
        "decomposition",
    }  # fmt: skip
    assert set(local["decomposition"]) == {
        "cold_start", "overhead", "command", "think", "teardown", "idle",
    }  # fmt: skip
    for metric in ("cold_start", "action", "step", "teardown", "trajectory"):
        assert set(local[metric]) == STATS_KEYS
    assert set(local["phases"]) == {"create", "first_exec"}
    assert set(data["rollouts"][0]) >= {
        "test", "substrate", "kind", "transport", "round", "sandbox_id", "outcome", "cold_start_s",
        "phases",
        "teardown_s", "steps", "action_probes_s", "error",
    }  # fmt: skip
    json.dumps(data, allow_nan=False)


def test_projection_uses_the_means():
    data = report([rollout("local", 1.0, step=0.1), rollout("local", 3.0, step=0.3)])
    local = data.substrates["local"]
    # N=3600 so hours = seconds per rollout: cold 2.0 + 10 steps * 0.2 + teardown 0.5
    assert local.worker_hours == pytest.approx(2.0 + 10 * 0.2 + 0.5)
    assert local.tax_hours == pytest.approx(2.0 + 10 * 0.1 + 0.5)


def test_spread_compares_substrates():
    data = report([rollout("local", 0.002), rollout("docker", 0.22)])
    assert data.spread.fastest == "local" and data.spread.slowest == "docker"
    assert data.spread.cold_start_p50 == pytest.approx(110)
    assert report([rollout("local", 0.002)]).spread is None


def test_failures_are_counted_with_their_reasons():
    data = report(
        [
            rollout("docker", 0.2),
            rollout("docker", None, outcome="error", error="SandboxStartError: no image"),
            rollout("docker", None, outcome="error", error="SandboxStartError: no image"),
            rollout("docker", 0.2, outcome="failed", error="test failed: AssertionError"),
        ]
    )
    docker = data.substrates["docker"]
    assert (docker.rollouts, docker.failures) == (4, 3)
    assert docker.failure_reasons == {
        "SandboxStartError: no image": 2,
        "test failed: AssertionError": 1,
    }
    assert docker.cold_start.n == 2


def test_a_substrate_that_never_started_has_no_projection():
    data = report([rollout("docker", None, outcome="error", error="x")])
    assert data.substrates["docker"].worker_hours is None
    assert data.substrates["docker"].cold_start is None


def test_steps_come_from_the_markers_when_the_scale_leaves_them_open():
    data = report(
        [rollout("local", 0.1, planned=150), rollout("local", 0.1, steps=50)],
        Scale(rollouts=10, steps=None),
    )
    assert data.projection.steps == 100


def test_without_an_option_the_markers_steps_replace_the_default():
    """Issue 47, finding 9: the marker's ``steps=`` is the length the test stands for, so the
    default 150 gives way to it when every rollout declared it; a mix keeps the default."""
    declared = [rollout("local", 0.1, planned=20), rollout("local", 0.1, planned=40)]
    data = report(declared, Scale.asked())
    assert (data.projection.steps, data.projection.steps_source) == (30, "workloads")
    mixed = report([*declared, rollout("local", 0.1, steps=5)], Scale.asked())
    assert (mixed.projection.steps, mixed.projection.steps_source) == (150, "default")
    given = report(declared, Scale.asked((1000, 90)))
    assert given.projection.steps == 90


def test_rollouts_that_never_started_do_not_shorten_the_projected_length():
    data = report(
        [rollout("local", 0.1, steps=100), rollout("broken", None, outcome="error", error="x")],
        Scale(rollouts=10, steps=None),
    )
    assert data.projection.steps == 100


def test_a_workload_without_steps_has_no_worker_hours():
    data = report([rollout("local", 0.1, steps=0)])
    assert data.substrates["local"].worker_hours is None
    assert data.substrates["local"].tax_hours is not None


def test_tax_hours_cap_the_per_step_tax_at_the_mean_step():
    slow_probes = [rollout("docker", 0.2, step=0.04), rollout("docker", 0.4, step=0.06)]
    for one in slow_probes:
        one.action_probes_s = [0.052, 0.048, 0.056]  # mean 52ms, slower than the 50ms mean step
    docker = report(slow_probes).substrates["docker"]
    # N=3600: hours = seconds per rollout = cold 0.3 + 10 * min(0.052, 0.05) + teardown 0.5
    assert docker.tax_hours == pytest.approx(0.3 + 10 * 0.05 + 0.5)
    assert docker.tax_hours <= docker.worker_hours == pytest.approx(0.3 + 10 * 0.05 + 0.5)
    fast_probes = report([rollout("local", 1.0, step=0.1)]).substrates["local"]
    assert fast_probes.tax_hours == pytest.approx(1.0 + 10 * 0.05 + 0.5)  # the probes' mean


def test_tax_hours_never_exceed_worker_hours_in_random_reports():
    """Property: whatever the samples, a substrate's tax-hours are at most its worker-hours."""
    rng = random.Random(7)
    for _ in range(300):
        rollouts = []
        for _ in range(rng.randint(1, 4)):
            one = rollout("x", 10 ** rng.uniform(-4, 1), step=10 ** rng.uniform(-5, 0))
            walls = [10 ** rng.uniform(-5, 0) for _ in range(rng.randint(1, 5))]
            one.steps = [Step("exec", wall, 0) for wall in walls]
            one.action_probes_s = [10 ** rng.uniform(-5, 0) for _ in range(rng.randint(1, 5))]
            rollouts.append(one)
        scale = Scale(rollouts=rng.randint(1, 10**7), steps=rng.randint(1, 500))
        entry = report(rollouts, scale).substrates["x"]
        assert entry.tax_hours <= entry.worker_hours, entry


def test_two_rollouts_in_one_sandbox_are_an_error():
    first, second, other = rollout("docker", 0.2), rollout("docker", 0.3), rollout("docker", 0.2)
    first.sandbox_id = second.sandbox_id = "c0ffee"
    second.round, other.round, other.sandbox_id = 2, 3, "other"
    second.test, other.test = "t.py::test[docker-2]", "t.py::test[docker-3]"
    data = report([first, second, other])
    assert data.shared_sandboxes == [
        {
            "substrate": "docker",
            "sandbox_id": "c0ffee",
            "rollouts": ["t.py::test[docker-1]", "t.py::test[docker-2]"],
        }
    ]
    lines = render_summary(data)
    assert any(line.startswith("rollout-tax: error: docker: 2 rollouts got the same sandbox c0ffee")
               for line in lines)  # fmt: skip


def pooled(idle_s: float, hits: int = 3, misses: int = 1) -> Fleet:
    stats = PoolStats(size=2, hits=hits, misses=misses, idle_sandbox_s=idle_s, creation_s=[2.0])
    return Fleet(pools={"docker": stats})


def test_a_pools_idle_time_enters_worker_hours_per_claimed_rollout():
    rollouts = [rollout("docker", 0.2, step=0.1) for _ in range(2)]
    without = build_report(rollouts, HOURLY, plugin_version="1", machine={}, commit=None)
    data = build_report(
        rollouts, HOURLY, plugin_version="1", machine={}, commit=None, fleet=pooled(idle_s=8.0)
    )
    docker = data.substrates["docker"]
    assert docker.pool.idle_sandbox_s == 8.0 and docker.pool.creations.n == 1
    # HOURLY: hours equal seconds per rollout; 8 s idle over 4 claims adds 2 s to each
    assert docker.worker_hours == pytest.approx(without.substrates["docker"].worker_hours + 2)
    # the idle sandboxes are the substrate's cost: tax too, and a part of the decomposition
    assert docker.tax_hours == pytest.approx(without.substrates["docker"].tax_hours + 2)
    assert docker.projected.decomposition.idle == pytest.approx(2)


def test_the_fleet_uses_the_nearest_burst_level_and_says_which():
    bursts = {"docker": [
        BurstLevel(1, cold_start_s=[1.0], ready_all_s=1.0),
        BurstLevel(16, cold_start_s=[5.0] * 16, ready_all_s=6.0),
    ]}  # fmt: skip
    rollouts = [rollout("docker", 0.2, step=0.1)]
    scale = Scale(rollouts=3600, steps=10)
    data = build_report(
        rollouts, scale, plugin_version="1", machine={}, commit=None,
        fleet=Fleet(bursts=bursts, workers=12),
    )  # fmt: skip
    fleet = data.substrates["docker"].projected.fleet
    per_rollout = 5.0 + 10 * 0.1 + 0.5  # the level-16 cold start, steps, teardown
    assert (fleet.burst_level, fleet.cold_start_from) == (16, "burst level 16")
    assert fleet.worker_hours == pytest.approx(per_rollout)
    assert fleet.wall_clock_hours == pytest.approx(300 * per_rollout / 3600)  # 300 waves
    assert data.projection.fleet == 12
    lines = render_summary(data)
    assert any(line.startswith("docker fleet of 12 workers: ") for line in lines)
    text = " ".join(line.strip() for line in lines)
    assert (
        "docker burst cold start at 1: p50 1s, 1 creates/s | 16: p50 5s, 2.67 creates/s; "
        "knee at 16 (p50 > 2x the lowest level's)"
    ) in text
    no_burst = (
        build_report(
            rollouts, scale, plugin_version="1", machine={}, commit=None, fleet=Fleet(workers=12)
        )
        .substrates["docker"]
        .projected.fleet
    )
    assert no_burst.cold_start_from == "rollouts (no burst measured)"
    assert no_burst.cold_start_s == pytest.approx(0.2)


def test_the_decomposition_adds_up_to_the_worker_hours():
    slow_probes = rollout("docker", 0.4, step=0.06)
    slow_probes.action_probes_s = [0.09] * 3  # slower than the step: the tax takes it all
    data = report(
        [rollout("local", 1.0, step=0.1), rollout("local", 3.0, step=0.3), slow_probes],
        Scale(rollouts=3600, steps=10, think_time_s=0.5),
    )
    local, docker = data.substrates["local"], data.substrates["docker"]
    # N=3600: hours = seconds per rollout; probes are half the step: 0.1 of the 0.2 s mean step
    assert local.projected.decomposition.to_dict() == pytest.approx(
        {"cold_start": 2.0, "overhead": 10 * 0.1, "command": 10 * 0.1, "think": 10 * 0.5,
         "teardown": 0.5, "idle": 0.0}
    )  # fmt: skip
    assert docker.projected.decomposition.overhead == pytest.approx(10 * 0.06)
    assert docker.projected.decomposition.command == 0.0
    for entry in (local, docker):
        parts = entry.projected.decomposition.to_dict()
        assert math.fsum(parts.values()) == pytest.approx(entry.worker_hours, rel=1e-12)
        tax = parts["cold_start"] + parts["overhead"] + parts["teardown"] + parts["idle"]
        assert tax == pytest.approx(entry.tax_hours, rel=1e-12)


def test_without_steps_or_probes_there_is_no_decomposition():
    no_steps = report([rollout("local", 0.1, steps=0)]).substrates["local"]
    never_started = report([rollout("docker", None, outcome="error", error="x")])
    assert no_steps.projected.decomposition is None
    assert never_started.substrates["docker"].projected.decomposition is None


def test_the_decomposition_adds_up_in_random_reports():
    """Property: parts sum to the worker-hours within 0.1%; none is negative; tax <= work."""
    rng = random.Random(14)
    for _ in range(300):
        rollouts = []
        for _ in range(rng.randint(1, 4)):
            one = rollout("x", 10 ** rng.uniform(-4, 1))
            one.steps = [Step("exec", 10 ** rng.uniform(-5, 0), 0) for _ in range(3)]
            one.action_probes_s = [10 ** rng.uniform(-5, 0) for _ in range(rng.randint(1, 5))]
            rollouts.append(one)
        scale = Scale(rng.randint(1, 10**7), rng.randint(1, 500), rng.choice([0, 2.5]))
        entry = report(rollouts, scale).substrates["x"]
        parts = entry.projected.decomposition.to_dict()
        assert math.fsum(parts.values()) == pytest.approx(entry.worker_hours, rel=1e-3)
        assert min(parts.values()) >= 0 and entry.tax_hours <= entry.worker_hours


def test_infra_failures_are_counted_apart_and_an_old_report_still_loads():
    """Finding 6: the infrastructure's failures have their own entry and rate, outside
    ``failures``; a report from before them (no ``infra_failed``, no ``infra_cause``) loads
    with its failures as they were."""
    lost = rollout("docker", 0.3, outcome="infra_failed", error="SandboxError: docker: gone")
    lost.infra_cause = "lost"
    runs = [rollout("docker", 0.3), lost, rollout("docker", 0.3, outcome="failed", error="x")]
    runs.append(rollout("docker", 0.3, outcome="rate_limited", error="slow down"))
    made = build_report(runs, Scale(), plugin_version="1", machine={}, commit=None)
    data = json.loads(json.dumps(made.to_dict()))
    entry = data["substrates"]["docker"]
    assert (entry["rollouts"], entry["failures"]) == (4, 1)
    assert entry["infra_failed"] == {
        "rollouts": 2,
        "rate": 0.5,
        "causes": {"lost": 1, "rate_limited": 1},
        "reasons": {"SandboxError: docker: gone": 1, "slow down": 1},
    }
    loaded = Report.from_dict(data).substrates["docker"]
    assert loaded.infra_failed == made.substrates["docker"].infra_failed
    assert loaded.success_rate == 0.5  # 1 passed of the 2 the infrastructure ran
    old = json.loads(json.dumps(data))
    del old["substrates"]["docker"]["infra_failed"]
    for item in old["rollouts"]:
        item.pop("infra_cause", None)
    before = Report.from_dict(old).substrates["docker"]
    assert before.infra_failed is None and before.infra_failed_rate == 0.0
    assert before.success_rate == 0.75
