"""Dollars: the worker-hours a provider bills, at the rate in force (docs/measurement.md).

A provider bills a sandbox from the create request until the teardown is confirmed, the think
time it is held while the model generates included, at least the launch's minimum, plus a fixed
fee per hour of the fleet's wall clock (a cluster's). So the dollars of a projection are its
hours parts at the sandbox's hourly rate, the minimum's top-up and the fee.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.price import SECONDS_PER_HOUR, Rate

#: Parts of the dollars beyond the hours' parts.
MINIMUM = "minimum"
FIXED = "fixed"
THINK = "think"
IDLE = "idle"


@dataclass(frozen=True)
class Cost:
    """A projection in dollars: with think time held (when known) and environment only."""

    #: Everything billed: the sandbox held through think time too.
    dollars: float
    #: Environment time only: no think time held.
    environment_dollars: float
    #: Dollars by part: the hours' parts, the launch minimum's top-up, the fixed fee.
    parts: dict[str, float] = field(default_factory=dict)
    #: Whether the fleet's wall clock was known to charge the fixed fee on.
    fee_counted: bool = True

    def to_dict(self) -> dict[str, object]:
        return {
            "dollars": self.dollars,
            "environment_dollars": self.environment_dollars,
            "parts": dict(self.parts),
            "fee_counted": self.fee_counted,
        }


def project_cost(
    hours: Mapping[str, float],
    rate: Rate,
    *,
    rollouts: int,
    think_s: float,
    wall_clock_hours: float | None = None,
) -> Cost:
    """Dollars of a projection whose worker-hours split into ``hours`` (its decomposition's
    parts, ``think`` among them), for ``rollouts`` rollouts each holding ``think_s`` of think
    time in all, at ``rate``; the fixed fee over ``wall_clock_hours`` when known."""
    per_hour = rate.sandbox_hour
    parts = {part: value * per_hour for part, value in hours.items()}
    # a sandbox's life, create to teardown: the launch minimum applies to it, not to pool idle
    alive_s = sum(v for k, v in hours.items() if k != IDLE) * SECONDS_PER_HOUR / rollouts
    env_alive_s = alive_s - think_s
    fee = rate.fixed_hour * (wall_clock_hours or 0.0)
    parts[MINIMUM] = _top_up(rate, alive_s, rollouts)
    parts[FIXED] = fee
    environment = sum(v for k, v in parts.items() if k not in (THINK, MINIMUM)) + _top_up(
        rate, env_alive_s, rollouts
    )
    return Cost(
        dollars=sum(parts.values()),
        environment_dollars=environment,
        parts=parts,
        fee_counted=rate.fixed_hour == 0 or wall_clock_hours is not None,
    )


def _top_up(rate: Rate, alive_s: float, rollouts: int) -> float:
    """Dollars the launch minimum adds over ``alive_s`` per rollout."""
    short = rate.billed_s(alive_s) - alive_s
    return rollouts * short / SECONDS_PER_HOUR * rate.sandbox_hour
