"""One rollout as pytest sees it: its target, its record in the item's stash, its failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import pytest

from ..core import infra
from ..core.record import UNBOUND, Rollout, rollout_param, workload_of
from ..core.sandbox import Sandbox
from ..errors import (
    CredentialsMissing,
    RolloutTaxError,
    SandboxUnbound,
    SubstrateUnavailable,
    reason_of,
)
from .identity import identity_of
from .marker import Trajectory
from .order import Slot

#: The record of the rollout an item runs, from its ``sandbox`` fixture to its teardown report.
rollout_key = pytest.StashKey[Rollout]()
#: The parameter every rollout test is parametrized with (a :class:`Target`).
TARGET_PARAM = "_rollout_target"


@dataclass(frozen=True)
class Target:
    """What one parametrized test instance runs on."""

    substrate: str
    round: int
    trajectory: Trajectory

    @property
    def id(self) -> str:
        return rollout_param(self.substrate, self.round)


def target_of(item: pytest.Item) -> Target | None:
    """The target an item was parametrized with, or None (not a rollout test)."""
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get(TARGET_PARAM) if callspec else None
    return target if isinstance(target, Target) else None


def slot(item: pytest.Item) -> Slot | None:
    """An item's place in the round-robin: (round, workload, substrate), or None."""
    target = target_of(item)
    if target is None:
        return None
    workload = workload_of(identity_of(item), target.substrate, target.round)
    return target.round, workload, target.substrate


def close_quietly(sandbox: Sandbox) -> RolloutTaxError | None:
    """Close ``sandbox``; return (not raise) a RolloutTaxError, so it reports as one line."""
    try:
        sandbox.close()
    except RolloutTaxError as exc:
        return exc
    return None


def skip_or_fail(error: RolloutTaxError, message: str | None = None) -> NoReturn:
    """Skip a rollout for missing credentials; fail it with a one-line reason otherwise
    (``message``, else the error's)."""
    if isinstance(error, CredentialsMissing):
        pytest.skip(str(error))
    pytest.fail(message or str(error), pytrace=False)


class SaidOnce:
    """A substrate-wide cause (``SubstrateUnavailable``: a missing image, an unreachable
    engine) in full at the first rollout it fails; each later rollout it fails refers to that
    one in a short line, so one cause reads once, not once per rollout. The rollout's own
    record keeps the whole reason, which the summary counts."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], str] = {}

    def message(self, error: RolloutTaxError, substrate: str, nodeid: str) -> str:
        text = str(error)
        if not isinstance(error, SubstrateUnavailable):
            return text
        first = self.first.setdefault((substrate, text), nodeid)
        if first == nodeid:
            return text
        return f"{substrate}: unavailable, for the reason given at {first}"


def start_failed(rollout: Rollout, error: RolloutTaxError) -> None:
    """Record why ``rollout``'s sandbox did not start; a sandbox its service's controller
    never bound makes the outcome ``unbound`` (a failure, kept whatever pytest calls it); an
    infrastructure cause (``core/infra.py``) is kept for the outcome ``infra_failed``."""
    rollout.fail(failure_reason(error))
    infra.note(rollout, error, "start")
    if isinstance(error, SandboxUnbound):
        rollout.outcome = UNBOUND


def failure_reason(exc: BaseException) -> str:
    """A short, countable reason: the message of our errors (sandbox ids as ``<id>``, as
    bursts and pools count them), the type of a workload's."""
    if isinstance(exc, RolloutTaxError):
        return reason_of(exc, limit=None)  # Rollout.fail redacts it whole, then cuts it
    if isinstance(exc, pytest.fail.Exception):
        return str(exc).splitlines()[0] if str(exc) else "failed"
    return f"test failed: {type(exc).__name__}"
