"""core/budgets.py: create, ready, each step and teardown each have their own budget and their
own outcome when it runs out; none is charged to another."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_rollout_tax.core.record import PhaseClock, Rollout
from pytest_rollout_tax.core.transport import NOOP, RawResult, Transport
from pytest_rollout_tax.errors import (
    ConfigError,
    CreateTimeout,
    ReadyTimeout,
    StepTimeout,
    TeardownTimeout,
)
from pytest_rollout_tax.substrates.local import LocalHandle, LocalSubstrate


class Slow(LocalSubstrate):
    """A local substrate whose create or delete waits for ``released``, and whose first no-op
    runs ``first`` instead (a slow ready-wait)."""

    def __init__(self, *, slow: str = "", first: list[str] | None = None, **options: Any):
        super().__init__(**options)
        self.slow, self.first = slow, first
        self.released = threading.Event()

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> LocalHandle:
        if self.slow == "create":
            self.released.wait(30)
        return super()._create(labels=labels, clock=clock)

    def destroy(self, handle: LocalHandle) -> None:
        if self.slow == "teardown":
            self.released.wait(30)
        super().destroy(handle)

    def _transport(self, handle: LocalHandle) -> Transport:
        inner = super()._transport(handle)
        if self.first is None:
            return inner
        first, run = self.first, inner.run

        def slow_first(argv: list[str], **kwargs: Any) -> RawResult:
            return run(first if argv == list(NOOP) else argv, **kwargs)

        inner.run = slow_first  # type: ignore[method-assign]
        return inner


@pytest.fixture
def make(tmp_path) -> Iterator[Any]:
    made: list[Slow] = []

    def make(**options: Any) -> Slow:
        substrate = Slow(root=str(tmp_path), **options)
        made.append(substrate)
        return substrate

    yield make
    for substrate in made:
        substrate.released.set()
        assert substrate.late_creates.settle(30)
        substrate.reap(substrate.session_id)


def test_a_slow_create_fails_as_a_create_never_as_a_step(make, tmp_path):
    substrate = make(slow="create", create_timeout=0.2)
    rollout = Rollout(substrate="local")
    with pytest.raises(CreateTimeout, match=r"local: create ran past its 0.2 s budget"):
        substrate.start(rollout, timeout=60)  # the step budget is ample: never the cause
    assert rollout.budget_exceeded == "create"
    assert rollout.steps == [] and rollout.cold_start_s is None
    substrate.released.set()
    assert substrate.late_creates.settle(30)
    assert list(tmp_path.iterdir()) == []  # the late workdir was removed


def test_a_slow_step_is_never_charged_to_the_create_or_ready_budget(make):
    substrate = make(create_timeout=5, ready_timeout=5)
    rollout = Rollout(substrate="local")
    sandbox = substrate.start(rollout, timeout=0.2)
    with sandbox, pytest.raises(StepTimeout, match=r"step ran past its 0.2 s timeout"):
        sandbox.exec(["sleep", "30"])
    assert rollout.budget_exceeded == "step"
    assert rollout.cold_start_s is not None  # the create and the ready-wait ended in time


def test_the_first_no_op_is_bounded_by_the_ready_budget_not_the_steps(make):
    slow_first = ["sleep", "0.5"]
    substrate = make(first=slow_first)
    with substrate.start(Rollout(substrate="local"), timeout=0.1) as sandbox:
        assert sandbox.exec("true").ok  # ready in 0.5 s, past the step's 0.1 s: not a step
    bounded = make(first=["sleep", "30"], ready_timeout=0.2)
    rollout = Rollout(substrate="local")
    with pytest.raises(ReadyTimeout, match=r"not ready within its 0.2 s budget"):
        bounded.start(rollout, timeout=60)
    assert rollout.budget_exceeded == "ready"
    assert rollout.steps == []


def test_a_slow_delete_fails_as_a_teardown(make):
    substrate = make(slow="teardown", teardown_timeout=0.2)
    rollout = Rollout(substrate="local")
    sandbox = substrate.start(rollout, timeout=60)
    assert sandbox.exec("true").ok
    with pytest.raises(TeardownTimeout, match=r"delete ran past its 0.2 s budget"):
        sandbox.close()
    assert rollout.budget_exceeded == "teardown"
    assert [step.exit_code for step in rollout.steps] == [0]


@pytest.mark.parametrize("key", ["create_timeout", "ready_timeout", "teardown_timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_budget_that_is_no_positive_number_is_refused_naming_it(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"local\.{key}="):
        LocalSubstrate(root=str(tmp_path), **{key: value})


def test_the_report_says_which_budget_ran_out(pytester):
    """A run whose create is slower than its budget: the rollout is an error of its create,
    with no step, and the JSON names the budget."""
    pytester.makeconftest(
        """
        import time
        from pytest_rollout_tax.substrates.local import LocalSubstrate

        create = LocalSubstrate._create

        def slow_create(self, *, labels, clock):
            time.sleep(1.5)  # past the 0.2 s budget; deleted when it ends
            return create(self, labels=labels, clock=clock)

        LocalSubstrate._create = slow_create
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.rollout(timeout=60)
        def test_work(sandbox):
            sandbox.exec("true")
        """
    )
    (pytester.path / "sandboxes").mkdir()
    result = pytester.runpytest(
        "--substrate=local",
        "--substrate-opt=local.create_timeout=0.2",
        f"--substrate-opt=local.root={pytester.path / 'sandboxes'}",
        "--rollout-json=out.json",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*local: create ran past its 0.2 s budget*"])
    (rollout,) = json.loads((pytester.path / "out.json").read_text())["rollouts"]
    assert rollout["budget_exceeded"] == "create"
    assert (rollout["outcome"], rollout["infra_cause"]) == ("infra_failed", "start")
    assert rollout["steps"]["kind"] == []
    assert not any((pytester.path / "sandboxes").iterdir())


def test_a_rollout_within_every_budget_names_none(pytester):
    pytester.makepyfile("def test_work(sandbox):\n    sandbox.exec('true')\n")
    pytester.runpytest("--substrate=local", "--rollout-json=out.json").assert_outcomes(passed=1)
    (rollout,) = json.loads((pytester.path / "out.json").read_text())["rollouts"]
    assert "budget_exceeded" not in rollout
