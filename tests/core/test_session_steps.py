"""A session step served by the step helper: what the shell's relay once lost is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.substrates import open_substrate

from pytest_rollout_tax.core import shell, stepper
from pytest_rollout_tax.core.shell import ShellTransport

#: The common "kill my children on exit" idiom: the step's ``kill 0`` once killed the relay's
#: ``cat``s with it, and its output was lost (issue 29, finding 5).
KILL_MY_GROUP = "trap 'kill 0' EXIT; (sleep 30 >/dev/null 2>&1 &); echo hi"
#: A program that runs anywhere and never says it is the helper.
FALSE = Path("/bin/false")


@pytest.mark.parametrize("variant", ["local-session", "docker-session"])
def test_a_step_that_kills_its_own_group_keeps_its_output(variant, request):
    with open_substrate(variant, request) as substrate, substrate.start(timeout=60) as box:
        assert isinstance(box.transport, ShellTransport) and box.transport.helper is not None
        result = box.exec(KILL_MY_GROUP, timeout=30)
        assert result.stdout == "hi\n"
        assert box.exec(["echo", "next"]).stdout == "next\n"  # the session still serves


def test_a_docker_session_where_no_compiler_is_is_served_by_the_prebuilt_helper(
    request, monkeypatch, tmp_path
):
    """Slim CI images and macOS (issue 51): no compiler here meant the relay."""
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(stepper.SWITCH, raising=False)
    with open_substrate("docker-session", request) as substrate, substrate.start(timeout=60) as box:
        assert (box.rollout.step_path, box.rollout.relay_reason) == ("prebuilt", None)
        assert box.exec("cat /proc/$PPID/comm").stdout == "rtx-step\n"
        assert box.rollout.to_dict()["step_path"] == "prebuilt"


def test_a_sandbox_whose_machine_has_no_helper_relays_and_records_why(request, monkeypatch):
    monkeypatch.setattr(shell, "MACHINE", "echo riscv64")
    with open_substrate("local-session", request) as substrate, substrate.start(timeout=60) as box:
        assert box.transport.helper is None
        assert box.rollout.step_path == "relay"
        assert box.rollout.relay_reason.startswith("no prebuilt helper for 'riscv64'")
        assert box.exec(["echo", "hi"]).stdout == "hi\n"  # the relay serves
        assert "relay_reason" in box.rollout.to_dict()


def test_a_helper_that_does_not_run_in_the_sandbox_relays_and_says_so(request, monkeypatch):
    """A helper that fails its --check there (a noexec /tmp, a foreign machine)."""
    monkeypatch.setattr(stepper, "for_machine", lambda machine: stepper.Helper(FALSE, "prebuilt"))
    with open_substrate("docker-session", request) as substrate, substrate.start(timeout=60) as box:
        assert box.rollout.step_path == "relay"
        assert box.rollout.relay_reason.startswith("the prebuilt helper for x86_64 did not run")
        assert box.exec(["echo", "hi"]).stdout == "hi\n"


def test_an_exec_transport_records_no_step_path(request):
    with open_substrate("local", request) as substrate, substrate.start(timeout=60) as box:
        assert box.rollout.step_path is None
        assert "step_path" not in box.rollout.to_dict()
