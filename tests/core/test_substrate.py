"""The lifecycle every backend shares: options, transports, the timed cold start."""

from __future__ import annotations

import time

import pytest
from support.substrates import SESSION_SHELL_PID

from pytest_rollout_tax import ConfigError, SandboxError, SandboxStartError, get_substrate
from pytest_rollout_tax.core.record import EPOCH_MARKS, Rollout


@pytest.mark.parametrize(
    ("kind", "transport", "offers"),
    [("local", "ssh", "exec and session"), ("local", "", "exec and session")],
)
def test_a_transport_the_substrate_does_not_offer_is_a_config_error(kind, transport, offers):
    with pytest.raises(
        ConfigError, match=rf"^{kind}\.transport='{transport}': .* offers {offers}$"
    ):
        get_substrate(kind, transport=transport)


def test_the_session_is_a_phase_of_the_cold_start_and_the_record_names_the_transport():
    with get_substrate("local", transport="session").start() as sandbox:
        rollout = sandbox.rollout
        assert list(rollout.phases) == ["create", "session", "first_exec"]
        assert rollout.cold_start_s == pytest.approx(sum(rollout.phases.values()))
        assert (rollout.kind, rollout.transport) == ("local", "session")
        assert sandbox.transport.name == "session"


def test_a_session_whose_shell_dies_fails_the_step_in_one_line_and_closes():
    with get_substrate("local", transport="session").start() as sandbox:
        with pytest.raises(SandboxError, match=r"^local: session lost: the shell ended$"):
            sandbox.exec(f"kill -9 $({SESSION_SHELL_PID})")
        with pytest.raises(SandboxError, match=r"^local: the session is closed$"):
            sandbox.exec("true")


def test_a_failed_first_no_op_is_a_start_error_and_removes_what_was_made(tmp_path):
    substrate = get_substrate("local", root=str(tmp_path), env={"PATH": "/nonexistent"})
    with pytest.raises(SandboxStartError, match=r"^local: the first no-op exec exited 127: "):
        substrate.start()
    assert list(tmp_path.iterdir()) == []


def test_a_rollout_is_stamped_in_epoch_time_at_create_ready_teardown_and_gone():
    rollout = Rollout(substrate="local")
    before = time.time()
    with get_substrate("local").start(rollout) as sandbox:
        sandbox.exec("true")
    after = time.time()
    stamps = [rollout.epoch[mark] for mark in EPOCH_MARKS]
    assert before <= stamps[0] <= stamps[1] <= stamps[2] <= stamps[3] <= after
    assert rollout.to_dict()["epoch"] == dict(zip(EPOCH_MARKS, stamps, strict=True))
    assert Rollout.from_dict(rollout.to_dict() | {"shard": 1, "client": "ab"}).shard == 1
