"""The isolation part and the runtime and snapshot lines, on synthetic runs (the real engine's
runs are in tests/substrates/test_docker_runsc.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from support.reports import report

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.report import isolation
from pytest_rollout_tax.report.document import SubstrateEntry
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.isolation import runtime_lines, snapshot_lines

SCALE = Scale(rollouts=1000, steps=10)


def run(substrate: str, runtime: str, step_s: float, *, kind: str = "docker", **extra) -> list:
    """Two rollouts of two tests, each step ``step_s``, the no-op 10 ms."""
    return [
        Rollout(
            test=f"t.py::{test}[{substrate}-{round_}]",
            substrate=substrate,
            kind=kind,
            transport="exec",
            runtime=runtime,
            round=round_,
            outcome="passed",
            cold_start_s=0.5,
            phases={"create": 0.1, "start": 0.3, "first_exec": 0.1},
            teardown_s=0.1,
            steps=[Step("exec", step_s, 0)] * 4,
            action_probes_s=[0.01, 0.01],
            **extra,
        )
        for test in ("test_a", "test_b")
        for round_ in (1, 2)
    ]


def test_the_excess_command_time_is_the_isolation_part_counted_in_tax_hours():
    built = report(run("docker", "runc", 0.11), run("docker-gvisor", "runsc", 0.31), scale=SCALE)
    gvisor, runc = built.substrates["docker-gvisor"], built.substrates["docker"]
    info = dataclasses.asdict(gvisor.isolation)
    # command = step - min(action, step): 0.30 against 0.10, on both tests
    assert info == {
        "reference": "docker",
        "per_step_s": pytest.approx(0.2),
        "command_ratio": pytest.approx(3.0),
        "tests": 2,
    }
    parts = gvisor.projected.decomposition.to_dict()
    assert parts["isolation"] == pytest.approx(1000 * 10 * 0.2 / 3600)
    assert math.fsum(parts.values()) == pytest.approx(gvisor.worker_hours)
    assert parts["command"] == pytest.approx(1000 * 10 * 0.1 / 3600)  # runc's, no more
    untaxed = parts["cold_start"] + parts["overhead"] + parts["teardown"] + parts["idle"]
    assert gvisor.tax_hours == pytest.approx(untaxed + parts["isolation"])
    assert runc.isolation is None
    assert "isolation" not in runc.projected.decomposition.to_dict()
    [line] = runtime_lines(built.substrates)
    tax = gvisor.tax_hours - runc.tax_hours
    assert line == (
        f"docker-gvisor vs docker: action p50 1x, command 3x, cold start 1x, {tax:+,.0f} tax-hours"
    )


def test_a_runtime_faster_than_runc_costs_no_isolation():
    built = report(run("docker", "runc", 0.31), run("docker-x", "runsc", 0.11), scale=SCALE)
    entry = built.substrates["docker-x"]
    assert entry.isolation.per_step_s == 0 and entry.projected.decomposition.isolation == 0


def test_without_a_reference_the_part_is_unknown_and_said_so():
    built = report(
        run("docker-gvisor", "runsc", 0.31), run("local", None, 0.01, kind="local"), scale=SCALE
    )
    entry = built.substrates["docker-gvisor"]
    assert entry.isolation.reference is None
    assert "isolation" not in entry.projected.decomposition.to_dict()
    assert runtime_lines(built.substrates) == [
        "docker-gvisor: isolation unknown (no runc docker variant on the same transport in the run)"
    ]


def test_the_reference_is_the_same_kind_and_transport_on_runc_the_kinds_name_first():
    substrates = {
        "docker-b": SubstrateEntry(kind="docker", transport="exec", runtime="runc"),
        "docker": SubstrateEntry(kind="docker", transport="exec", runtime="runc"),
        "docker-session": SubstrateEntry(kind="docker", transport="session", runtime="runc"),
        "docker-snap": SubstrateEntry(
            kind="docker", transport="exec", runtime="runsc", snapshot=True
        ),
        "docker-gvisor": SubstrateEntry(kind="docker", transport="exec", runtime="runsc"),
    }
    assert isolation.reference_of("docker-gvisor", substrates) == "docker"
    assert isolation.reference_of("docker-snap", substrates, snapshot=True) == "docker-gvisor"


def test_the_snapshot_line_compares_the_restore_with_preparing():
    snap = run("docker-snap", "runsc", 0.3, snapshot=True)
    snap[0].phases |= {"template": 2.5, "checkpoint": 0.3}
    plain = run("docker-gvisor", "runsc", 0.3)
    for rollout in plain:
        rollout.cold_start_s = 2.5
    built = report(plain, snap, scale=SCALE)
    assert built.substrates["docker-snap"].snapshot is True
    assert snapshot_lines(built.substrates) == [
        "docker-snap vs docker-gvisor: cold start 0.2x (500ms restored vs 2.5s prepared); "
        "once per test and worker: prepare 2.5s + checkpoint 300ms"
    ]
