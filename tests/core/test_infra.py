"""Infrastructure failures counted apart (core/infra.py): the table of causes, and real docker
runs where a sandbox is lost mid-rollout beside a workload's own failed assertion."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pytest_rollout_tax.core.infra import INFRA_FAILED, cause_of, note, settle
from pytest_rollout_tax.core.record import FAILED_OUTCOMES, Rollout
from pytest_rollout_tax.errors import (
    ConfigError,
    PrepareFailed,
    RateLimited,
    SandboxError,
    SandboxStartError,
    SandboxUnbound,
    StepTimeout,
    SubstrateUnavailable,
)


@pytest.mark.parametrize(
    ("error", "phase", "cause"),
    [
        (SandboxStartError("create refused"), "start", "start"),
        (SubstrateUnavailable("image missing"), "start", "unavailable"),
        (ConfigError("docker.network='x': no such network"), "start", "unavailable"),
        (RateLimited("429"), "start", "rate_limited"),
        (SandboxError("container gone"), "step", "lost"),
        (SandboxError("exec refused"), "start", "start"),
        (SandboxError("destroy failed"), "teardown", "teardown"),
        (PrepareFailed("prepare=setup failed"), "start", None),  # the workload's own setup
        (StepTimeout("past 5 s"), "step", None),  # the workload's step budget
        (SandboxUnbound("unbound"), "start", None),  # its own outcome
        (AssertionError("2 != 1"), "step", None),
    ],
)
def test_each_error_is_classed_by_its_type_and_phase(error, phase, cause):
    assert cause_of(error, phase) == cause


def test_only_a_failed_rollout_with_an_infrastructure_cause_becomes_infra_failed():
    lost, handled = Rollout(outcome="failed"), Rollout(outcome="passed")
    for rollout in (lost, handled):
        note(rollout, SandboxError("gone"), "step")
        note(rollout, SandboxStartError("later, a consequence"), "start")
        settle(rollout)
    assert lost.outcome == INFRA_FAILED and lost.infra_cause == "lost"
    assert handled.outcome == "passed"  # the test handled it
    assert INFRA_FAILED not in FAILED_OUTCOMES


WORKLOAD = """
import os

import docker
import pytest


@pytest.mark.trajectory(rounds=5)  # the gate's noise test needs 5 rollouts a side
def test_lost(sandbox):
    sandbox.exec("true")
    if os.environ.get("LOSE") == "1":  # the sandbox is lost under the workload
        docker.from_env().containers.get(sandbox.id).kill()
    assert sandbox.exec("true").ok


def test_wrong(sandbox):
    answer = "2" if os.environ.get("WRONG") == "1" else "1"
    assert sandbox.exec("echo 1").stdout.strip() == answer


def test_fine(sandbox):
    assert sandbox.exec("true").ok
"""


def _pytest(cwd, *args, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment |= env | {"COLUMNS": "100"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    done = subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def lost_run(sandbox_image, tmp_path_factory):
    """A baseline where nothing is lost, then a run where test_lost's sandbox is killed in
    each of its 5 rounds and test_wrong's assertion fails, gated on ``infra_failed.rate:10%``."""
    root = tmp_path_factory.mktemp("infra")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test_work.py").write_text(WORKLOAD)
    common = ("--substrate=docker", "--rollout-storage=runs")
    code, output = _pytest(root, *common, "--rollout-save=base")
    assert code == 0, output
    code, output = _pytest(
        root,
        *common,
        "--rollout-compare=base",
        "--rollout-compare-fail=infra_failed.rate:10%",
        "--rollout-json=r.json",
        LOSE="1",
        WRONG="1",
    )
    return code, output, json.loads((root / "r.json").read_text())


def test_a_sandbox_killed_mid_rollout_is_infra_failed_and_an_assertion_stays_failed(lost_run):
    _, output, report = lost_run
    outcomes = {(r["test"].split("::")[1], r["outcome"]) for r in report["rollouts"]}
    assert outcomes == {
        *((f"test_lost[docker-{n}]", "infra_failed") for n in range(1, 6)),
        ("test_wrong[docker-1]", "failed"),
        ("test_fine[docker-1]", "passed"),
    }, output
    lost = [r for r in report["rollouts"] if r["outcome"] == "infra_failed"]
    assert all(r["infra_cause"] in ("lost", "teardown") for r in lost), lost
    entry = report["substrates"]["docker"]
    assert entry["failures"] == 1  # the workload's own: test_wrong, not the lost sandboxes
    assert list(entry["failure_reasons"]) == ["test failed: AssertionError"]
    assert entry["infra_failed"]["rollouts"] == 5
    assert entry["infra_failed"]["rate"] == pytest.approx(5 / 7)
    assert [i["infra_failed"] for i in report["ranking"]] == [pytest.approx(5 / 7)]
    assert [i["success"] for i in report["ranking"]] == [pytest.approx(1 / 2)]


def test_the_summary_states_the_infra_rate_beside_the_success_rate(lost_run):
    _, output, _ = lost_run
    joined = " ".join(output.split())
    assert "(50% succeeded, 71% infra_failed)" in joined, output  # the decision
    assert "docker: 50% of rollouts succeeded; failures: 1x test failed: AssertionError;" in joined
    assert "71% infra_failed (5 of 7: 5 lost; not the workload's failures)" in joined


def test_the_gate_fails_on_a_raised_infra_failed_rate(lost_run):
    code, output, _ = lost_run
    assert code == 1
    joined = " ".join(output.split())
    assert "FAILED docker infra_failed.rate: baseline 0%, now 71% (+71.4 points)" in joined, output
    assert "gate failed" in joined
