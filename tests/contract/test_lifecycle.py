"""A sandbox from start to close: a fresh workdir, timed phases, nothing usable after close."""

from __future__ import annotations

import pytest

from pytest_rollout_tax import SandboxError


def test_a_sandbox_starts_with_an_empty_workdir_and_its_cold_start_recorded(fresh_box):
    assert fresh_box.exec("ls -A").stdout == ""
    rollout = fresh_box.rollout
    assert rollout.cold_start_s > 0 and "first_exec" in rollout.phases
    assert rollout.cold_start_s <= sum(rollout.phases.values()) + 1e-9


def test_every_tool_call_is_one_recorded_step_and_probes_are_not(fresh_box):
    fresh_box.probe(3)
    fresh_box.write_file("a", "1")
    fresh_box.read_file("a")
    fresh_box.exec("exit 4")
    steps = fresh_box.rollout.steps
    assert [(step.kind, step.exit_code) for step in steps] == [
        ("write_file", None),
        ("read_file", None),
        ("exec", 4),
    ]
    assert all(step.wall_s > 0 for step in steps)
    assert len(fresh_box.rollout.action_probes_s) == 3


def test_close_is_timed_idempotent_and_final(contract_substrate):
    sandbox = contract_substrate.start()
    sandbox.close()
    sandbox.close()
    assert sandbox.closed and sandbox.rollout.teardown_s > 0
    assert sandbox.rollout.trajectory_s >= sandbox.rollout.teardown_s
    for step in (lambda: sandbox.exec("true"), lambda: sandbox.read_file("f")):
        with pytest.raises(SandboxError, match="closed"):
            step()
    with pytest.raises(SandboxError, match="closed"):
        sandbox.write_file("f", "x")
    assert len(sandbox.rollout.steps) == 0


def test_the_control_plane_answers_and_a_stand_in_says_so(contract_substrate, request):
    """One cheap API call is timed; a hosted service (E2B, EC2) reached on this machine is a
    stand-in, a real docker engine or API server never is."""
    plane = contract_substrate.control_plane()
    if contract_substrate.kind == "local":
        assert plane is None
        return
    assert plane.rtt_s is not None and plane.rtt_s > 0
    assert plane.endpoint and "@" not in plane.endpoint
    live = request.node.callspec.params["contract_substrate"].endswith("-live")
    assert plane.stand_in is (contract_substrate.kind in ("e2b", "ec2") and not live)
