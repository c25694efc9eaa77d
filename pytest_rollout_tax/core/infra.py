"""Which failures are the infrastructure's, not the workload's: decided here, once.

A rollout fails for one of two kinds of reason. The workload's own (a failed assertion, a step
past its timeout, a ``prepare`` function that raised) is ``failed`` or ``error``. The
infrastructure's (a sandbox that could not be created or never became ready, one lost or
preempted mid-rollout, a teardown that failed) is ``infra_failed``: counted apart, so a training
run's statistics and a gate on the workload's failures leave it out, as RL teams do with spot
preemptions. A create the provider's limiter refused keeps its own outcome, ``rate_limited``,
and counts among the infrastructure's too.

:func:`cause_of` is the one place an exception becomes a cause, by its type and the phase it
came from; :data:`CAUSES` is its table, most specific type first. A new infrastructure error
(a create or ready budget exceeded) is a subclass of one of the types here, or a row added in
front of the table; nothing else changes.
"""

from __future__ import annotations

from typing import Literal

from ..errors import (
    ConfigError,
    PrepareFailed,
    RateLimited,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SandboxUnbound,
    StepTimeout,
    SubstrateUnavailable,
)
from .record import RATE_LIMITED, Rollout

#: The outcome of a rollout failed by its infrastructure.
INFRA_FAILED = "infra_failed"
#: The outcomes that are the infrastructure's (rate: their share of a substrate's rollouts).
INFRA_OUTCOMES = (INFRA_FAILED, RATE_LIMITED)
#: Where in a rollout's life an error came from.
Phase = Literal["start", "step", "teardown"]

#: (error type, the phases it is the infrastructure's in, its cause), read in order: the first
#: row whose type the error is and whose phases hold its phase (none: every phase) decides; a
#: row without a cause is the workload's.
CAUSES: tuple[tuple[type[BaseException], tuple[Phase, ...], str | None], ...] = (
    (PrepareFailed, (), None),  # the workload's own setup
    (StepTimeout, ("step",), None),  # a step past the workload's budget
    (SandboxUnbound, ("start",), None),  # its own outcome, ``unbound``
    (RateLimited, ("start",), "rate_limited"),
    (SubstrateUnavailable, ("start",), "unavailable"),
    (ConfigError, ("start",), "unavailable"),  # an option the service refuses: no such network
    (SandboxStartError, ("start",), "start"),
    (SandboxError, ("start",), "start"),  # an API that refused the create or the first exec
    (SandboxError, ("step",), "lost"),  # lost, preempted, its API gone mid-rollout
    (RolloutTaxError, ("teardown",), "teardown"),
)


def cause_of(error: BaseException, phase: Phase) -> str | None:
    """The infrastructure cause of ``error`` raised in ``phase`` (``start``: create and ready;
    ``step``; ``teardown``), or None: the workload's."""
    for kind, phases, cause in CAUSES:
        if isinstance(error, kind) and (not phases or phase in phases):
            return cause
    return None


def note(rollout: Rollout, error: BaseException, phase: Phase) -> None:
    """Keep the first infrastructure cause ``error`` gives ``rollout``: if the rollout then
    fails, its outcome is ``infra_failed`` (:func:`settle`)."""
    if rollout.infra_cause is None:
        rollout.infra_cause = cause_of(error, phase)


def settle(rollout: Rollout) -> None:
    """A failed rollout (``failed`` or ``error``) whose infrastructure failed under it is
    ``infra_failed``; any other outcome stays (a test that handled a lost sandbox and passed
    passed)."""
    if rollout.infra_cause is not None and rollout.outcome in ("failed", "error"):
        rollout.outcome = INFRA_FAILED
