"""A run's own figures, from its step records alone: the trainer's wait share, the
environment's share of trajectory time, straggler steps, idle GPU-hours."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.price import SECONDS_PER_HOUR
from ..core.stats import percentile
from .records import StepRecord


@dataclass(frozen=True)
class RunFigures:
    steps: int
    #: Sums over the steps that log them (None: not logged).
    wall_s: float | None
    wait_s: float | None
    generation_s: float | None
    compute_s: float | None
    #: The trainer's wait over the step's wall clock, per step: median and p90.
    wait_share_p50: float | None
    wait_share_p90: float | None
    #: Time in tools over time in tools and generation, per trajectory, over the run (None:
    #: the stack logs no tool time).
    environment_share: float | None
    #: Per trajectory, the run's mean time in tools and generating (steps weigh the same).
    tool_s: float | None
    trajectory_generation_s: float | None
    #: Steps whose slowest trajectory spent longer in tools than in generation.
    stragglers: tuple[int, ...]
    #: The trainer's wait in GPU-hours, with ``gpus`` given.
    gpus: int | None
    idle_gpu_hours: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "stragglers": list(self.stragglers)}


def total(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) if present else None


def mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def figures(records: Sequence[StepRecord], gpus: int | None = None) -> RunFigures:
    shares = sorted(r.wait_s / r.wall_s for r in records if r.wait_s is not None and r.wall_s)
    both = [r for r in records if r.tool_s is not None and r.trajectory_generation_s is not None]
    tool, gen = mean([r.tool_s for r in both]), mean([r.trajectory_generation_s for r in both])
    wait = total([r.wait_s for r in records])
    return RunFigures(
        steps=len(records),
        wall_s=total([r.wall_s for r in records]),
        wait_s=wait,
        generation_s=total([r.generation_s for r in records]),
        compute_s=total([r.compute_s for r in records]),
        wait_share_p50=percentile(shares, 50) if shares else None,
        wait_share_p90=percentile(shares, 90) if shares else None,
        environment_share=(
            tool / (tool + gen) if tool is not None and gen is not None and tool + gen > 0 else None
        ),
        tool_s=tool,
        trajectory_generation_s=gen,
        stragglers=tuple(r.step for r in records if r.straggler),
        gpus=gpus,
        idle_gpu_hours=gpus * wait / SECONDS_PER_HOUR if gpus and wait is not None else None,
    )
