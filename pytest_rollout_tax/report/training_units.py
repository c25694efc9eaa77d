"""The measured rollouts as the training projection's units: each rollout's seconds on its slot
at the projection's steps, and where they go (cold start, per-step tax, command, think,
teardown); a failed rollout's seconds are what it took until it failed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.infra import INFRA_FAILED
from ..core.record import FAILED_OUTCOMES, MICROSECONDS, step_column, step_walls
from .projection import Scale, step_overhead

#: The parts of a successful rollout's slot time, in order (``Units.parts``' columns).
PARTS = ("cold_start", "overhead", "command", "think", "teardown")
#: Outcomes a training run gets a result from.
SUCCEEDED = ("passed",)
#: Outcomes whose time a trainer loses: the workload's failures and the infrastructure's.
WASTED = (*FAILED_OUTCOMES, INFRA_FAILED)


@dataclass
class Units:
    """One substrate's measured rollouts: slot seconds, failed or not, and the parts."""

    seconds: list[float] = field(default_factory=list)
    failed: list[bool] = field(default_factory=list)
    parts: list[tuple[float, ...]] = field(default_factory=list)
    #: Rollouts whose steps recorded think time (a replay's model time).
    think_recorded: int = 0

    def add(self, seconds: float, failed: bool, parts: tuple[float, ...]) -> None:
        self.seconds.append(seconds)
        self.failed.append(failed)
        self.parts.append(parts)

    @property
    def succeeded(self) -> int:
        return self.failed.count(False)


def measured_units(
    rollouts: Iterable[Mapping[str, Any]], scale: Scale, probes: Mapping[str, float]
) -> dict[str, Units]:
    """Each substrate's units from the report's ``rollouts[]`` items at ``scale`` (its steps,
    its think time when an option set it); ``probes``: each substrate's mean no-op probe, for
    rollouts that ran none of their own. Rollouts that neither passed nor failed (skipped,
    interrupted, rate-limited) and passed ones without a cold start or steps give none; one the
    infrastructure failed is, to the trainer, a failed rollout like the workload's."""
    units: dict[str, Units] = {}
    for item in rollouts:
        outcome = item.get("outcome", "passed")
        if outcome not in SUCCEEDED and outcome not in WASTED:
            continue
        name = str(item["substrate"])
        stored = item.get("steps")
        walls = step_walls(stored)
        known = [us / MICROSECONDS for us in step_column(stored, "think_us") if us is not None]
        found = units.setdefault(name, Units())
        found.think_recorded += bool(known)
        if outcome in WASTED:
            spent = _spent(item, walls, known)
            found.add(spent, True, (0.0,) * len(PARTS))
            continue
        cold = item.get("cold_start_s")
        if cold is None or not walls:
            continue
        found.add(*_succeeded(item, cold, walls, known, scale, probes.get(name)))
    return units


def _spent(item: Mapping[str, Any], walls: Sequence[float], think: Sequence[float]) -> float:
    """What a failed rollout took until it failed: its cold start (or the phases it got
    through), its steps and their recorded think time, and its teardown."""
    cold = item.get("cold_start_s")
    if cold is None:
        cold = math.fsum((item.get("phases") or {}).values())
    return cold + math.fsum(walls) + math.fsum(think) + (item.get("teardown_s") or 0.0)


def _succeeded(
    item: Mapping[str, Any],
    cold: float,
    walls: Sequence[float],
    think: Sequence[float],
    scale: Scale,
    probe: float | None,
) -> tuple[float, bool, tuple[float, ...]]:
    """A passed rollout at the projection's steps: its own mean step split into the
    substrate's part (its probes', else the substrate's mean probe) and the command (a shape
    replay's recorded command time where it has one), plus think time per step."""
    steps = scale.steps or len(walls)
    step = math.fsum(walls) / len(walls)
    probes = item.get("action_probes_s") or ()
    action = math.fsum(probes) / len(probes) if probes else probe
    overhead = step_overhead(action, step) if action is not None else 0.0
    command = step - overhead
    if (item.get("replay") or {}).get("mode") == "shape":
        recorded = step_column(item.get("steps"), "recorded_us")
        if any(us is not None for us in recorded):
            command = math.fsum(
                max(wall - overhead, 0.0) if us is None else us / MICROSECONDS
                for us, wall in zip(recorded, walls, strict=False)
            ) / len(walls)
    if scale.think_time_source == "option":
        think_s = scale.think_time_s
    else:
        think_s = math.fsum(think) / len(think) if think else 0.0
    parts = (
        cold,
        steps * overhead,
        steps * command,
        steps * think_s,
        item.get("teardown_s") or 0.0,
    )
    return math.fsum(parts), False, parts
