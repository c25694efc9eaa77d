"""Late creates on this host: a local workdir, or a bwrap sandbox with its processes, made by
a create that answered only after its budget, or was cancelled before its answer, is found by
its labels (its directory's name) and removed, its processes killed."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.late_answer import HeldAnswer, keyboard_interrupts

from pytest_rollout_tax.core.processes import process_alive
from pytest_rollout_tax.core.record import PhaseClock, Rollout
from pytest_rollout_tax.core.sandbox import Handle
from pytest_rollout_tax.core.substrate import Substrate
from pytest_rollout_tax.errors import CreateTimeout
from pytest_rollout_tax.substrates.bwrap import BwrapSubstrate
from pytest_rollout_tax.substrates.local import LocalSubstrate


def held_late(base: type[Substrate], held: HeldAnswer) -> type[Substrate]:
    """``base`` whose create makes its sandbox, then holds its answer as ``held`` says."""

    class Held(base):  # type: ignore[misc, valid-type]
        made: ClassVar[list[Handle]] = []

        def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> Handle:
            handle = super()._create(labels=labels, clock=clock)
            self.made.append(handle)
            held.hold_after()
            return handle

    return Held


@pytest.fixture
def held() -> Any:
    answer = HeldAnswer()
    yield answer
    answer.disarm()


def test_a_local_create_answered_after_its_budget_leaves_no_workdir(tmp_path: Path, held):
    substrate = held_late(LocalSubstrate, held)(root=str(tmp_path), create_timeout=0.2)
    held.arm()
    rollout = Rollout(substrate="local")
    with pytest.raises(CreateTimeout):
        substrate.start(rollout)
    assert held.made.wait(30)
    assert rollout.budget_exceeded == "create"
    held.release.set()
    assert substrate.late_creates.settle(30)
    assert list(tmp_path.iterdir()) == []
    assert substrate.late_creates.reaped >= 1


def test_a_local_create_cancelled_before_its_answer_leaves_no_workdir(tmp_path: Path, held):
    substrate = held_late(LocalSubstrate, held)(root=str(tmp_path))
    held.arm(interrupt=True)
    with keyboard_interrupts(), pytest.raises(KeyboardInterrupt):
        substrate.start(Rollout(substrate="local"))
    held.release.set()
    assert substrate.late_creates.settle(30)
    assert list(tmp_path.iterdir()) == []


def test_a_bwrap_create_answered_after_its_budget_leaves_no_sandbox_or_process(
    bwrap_ready, tmp_path: Path, held
):
    substrate = held_late(BwrapSubstrate, held)(
        image=bwrap_ready, cache=str(tmp_path / "cache"), create_timeout=0.5
    )
    substrate._ensure_prepared()  # the image's root exported before any create is timed
    held.arm()
    try:
        with pytest.raises(CreateTimeout):
            substrate.start(Rollout(substrate="bwrap"))
        assert held.made.wait(30)
        (made,) = substrate.made
        held.release.set()
        assert substrate.late_creates.settle(30)
        assert not process_alive(made.init)
        assert list(substrate.sandboxes.iterdir()) == []
    finally:
        held.release.set()
        substrate.reap(substrate.session_id)
        substrate.close()
