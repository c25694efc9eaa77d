"""Late creates on a real Docker engine: a create answered only after its budget, or
cancelled between its request and its answer, leaves no container behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.late_answer import HeldAnswer, keyboard_interrupts

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.errors import CreateTimeout
from pytest_rollout_tax.substrates.docker import DockerSubstrate

pytestmark = pytest.mark.usefixtures("sandbox_image")


@pytest.fixture
def held() -> Iterator[HeldAnswer]:
    answer = HeldAnswer()
    yield answer
    answer.disarm()


@pytest.fixture
def docker_late(held: HeldAnswer) -> Iterator[DockerSubstrate]:
    """A docker substrate of a session of its own whose engine answers creates as ``held``
    says: the real create, its answer held back (a slow engine, a lost response)."""
    substrate = DockerSubstrate(session_id=new_id(), create_timeout=0.5)
    real: Callable[..., Any] = substrate.api.create_container

    def create_container(*args: Any, **kwargs: Any) -> Any:
        held.hold_before()
        answer = real(*args, **kwargs)
        held.hold_after()
        return answer

    substrate.api.create_container = create_container  # type: ignore[method-assign]
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def left(docker_client, substrate: DockerSubstrate) -> list[str]:
    """The containers of the substrate's session, whatever their state."""
    label = f"{SESSION_LABEL}={substrate.session_id}"
    return [c.id for c in docker_client.containers.list(all=True, filters={"label": label})]


@pytest.mark.parametrize("before", [False, True], ids=["made-then-late", "made-late"])
def test_a_create_answered_after_its_budget_leaves_no_container(
    docker_client, docker_late, held, before
):
    rollout = Rollout(substrate="docker")
    held.arm(before=before)
    with pytest.raises(CreateTimeout, match=r"create ran past its 0.5 s budget"):
        docker_late.start(rollout)
    assert rollout.budget_exceeded == "create"
    assert rollout.steps == []  # nothing charged to a step
    held.release.set()  # the engine answers now, after the client gave up
    assert docker_late.late_creates.settle(60)
    assert held.made.is_set()  # the container really was made
    assert left(docker_client, docker_late) == []
    assert docker_late.late_creates.reaped >= 1


def test_a_create_cancelled_before_its_answer_leaves_no_container(docker_client, docker_late, held):
    docker_late.options.create_timeout = None  # no budget: only the interrupt ends the wait
    held.arm(interrupt=True)
    with keyboard_interrupts(), pytest.raises(KeyboardInterrupt):
        docker_late.start(Rollout(substrate="docker"))
    assert held.made.is_set()
    held.release.set()
    assert docker_late.late_creates.settle(60)
    assert left(docker_client, docker_late) == []
    assert docker_late.late_creates.reaped >= 1
