"""A sandbox from start to close: a fresh workdir, timed phases, nothing usable after close
(nor after its session's shell died)."""

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
    """One cheap API call is timed; a hosted service (E2B, Daytona, EC2) reached on this machine
    is a stand-in, a real docker engine or API server never is."""
    plane = contract_substrate.control_plane()
    if contract_substrate.kind in ("local", "bwrap"):  # no control plane: this host's processes
        assert plane is None
        return
    assert plane.rtt_s is not None and plane.rtt_s > 0
    assert plane.endpoint and "@" not in plane.endpoint
    live = request.node.callspec.params["contract_substrate"].endswith("-live")
    assert plane.stand_in is (
        contract_substrate.kind
        in ("e2b", "daytona", "modal", "runloop", "coreweave", "prime", "ec2")
        and not live
    )


#: The session's shell is the nearest ancestor run as plain ``sh`` (a step runs as ``sh -c``,
#: under ``timeout`` when it has one); nothing is killed if none is found.
KILL_THE_SHELL = (
    'p=$$; until [ "$p" -le 1 ] || [ "$(tr "\\0" " " </proc/$p/cmdline)" = "sh " ]; do '
    "p=$(cut -d' ' -f4 /proc/$p/stat); done; "
    '[ "$p" -gt 1 ] && { sleep 300 & kill -9 "$p"; }'
)


@pytest.mark.transport("session")
def test_a_session_whose_shell_dies_fails_that_step_and_every_later_one_in_one_line(
    contract_substrate, fresh_box
):
    """The step kills the shell that runs it and leaves a child holding the shell's output
    open for minutes: the stream alone would not end before the child does."""
    name = contract_substrate.name
    assert fresh_box.exec("echo alive").stdout == "alive\n"
    with pytest.raises(SandboxError) as caught:
        fresh_box.exec(KILL_THE_SHELL)
    assert str(caught.value) == f"{name}: session lost: the shell ended"
    later = (
        lambda: fresh_box.exec("true"),
        lambda: fresh_box.read_file("f"),
        lambda: fresh_box.write_file("f", "x"),
    )
    for step in later:
        with pytest.raises(SandboxError, match=rf"^{name}: the session is closed$"):
            step()
