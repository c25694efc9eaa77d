"""A session step served by the step helper: what the shell's relay once lost is kept."""

from __future__ import annotations

import pytest
from support.substrates import open_substrate

from pytest_rollout_tax.core.shell import ShellTransport

#: The common "kill my children on exit" idiom: the step's ``kill 0`` once killed the relay's
#: ``cat``s with it, and its output was lost (issue 29, finding 5).
KILL_MY_GROUP = "trap 'kill 0' EXIT; (sleep 30 >/dev/null 2>&1 &); echo hi"


@pytest.mark.parametrize("variant", ["local-session", "docker-session"])
def test_a_step_that_kills_its_own_group_keeps_its_output(variant, request):
    with open_substrate(variant, request) as substrate, substrate.start(timeout=60) as box:
        assert isinstance(box.transport, ShellTransport) and box.transport.helper is not None
        result = box.exec(KILL_MY_GROUP, timeout=30)
        assert result.stdout == "hi\n"
        assert box.exec(["echo", "next"]).stdout == "next\n"  # the session still serves
