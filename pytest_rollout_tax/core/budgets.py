"""A rollout's time budgets, kept apart: create, ready, each step, teardown.

Each part of a rollout has its own timeout and its own outcome when it runs out
(``Rollout.budget_exceeded``): a slow create fails as a create and is never charged to a
step, and a step's timeout (the marker's ``timeout``) bounds steps only. The create, the
ready-wait and the teardown are bounded by :func:`.bounded.bounded`, whatever the backend's
SDK does; a step is bounded by its transport, which kills it (``StepTimeout``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import BudgetExceeded, ReadyTimeout, StepTimeout
from .bounded import Overrun, bounded
from .record import PhaseClock, Rollout
from .sandbox import Sandbox

#: The budgets of a rollout, in the order they are spent.
BUDGETS = ("create", "ready", "step", "teardown")
#: The substrate option that sets each budget other than the step's (the marker's ``timeout``).
BUDGET_OPTIONS = {
    "create": "create_timeout",
    "ready": "ready_timeout",
    "teardown": "teardown_timeout",
}


@contextlib.contextmanager
def charged(rollout: Rollout) -> Iterator[None]:
    """Record on ``rollout`` the budget an error raised inside says ran out."""
    try:
        yield
    except BudgetExceeded as exc:
        rollout.budget_exceeded = exc.budget
        raise


def ready_within(
    sandbox: Sandbox, clock: PhaseClock, *, opening: bool, phase: str = "first_exec"
) -> None:
    """Open ``sandbox``'s transport (if ``opening``) and run the no-op that ends its cold
    start, marked as ``phase``, within its substrate's ``ready_timeout``: never the step's
    timeout. The rollout records what serves its steps."""
    name = sandbox.substrate.name
    budget = sandbox.ready_timeout
    forked = clock.fork()  # an abandoned wait's marks are not the rollout's

    def ready() -> None:
        if opening:
            sandbox.transport.open(forked)
        sandbox.rollout.step_path = sandbox.transport.step_path
        sandbox.rollout.relay_reason = sandbox.transport.relay_reason
        sandbox.first_exec(timeout=budget)
        forked.mark(phase)

    try:
        bounded(ready, budget, late=lambda _: None, name=f"rollout-tax-ready-{name}")
    except (Overrun, StepTimeout):
        sandbox.rollout.budget_exceeded = "ready"
        raise ReadyTimeout(
            f"{name}: the sandbox was not ready within its {budget:g} s budget "
            f"({name}.ready_timeout)"
        ) from None
    clock.adopt(forked)
