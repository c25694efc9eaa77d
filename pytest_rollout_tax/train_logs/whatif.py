"""What another substrate would change: the run's environment part re-projected onto each
substrate a rollout-tax report measured, its generation unchanged.

The model, stated in the output (:data:`ASSUMPTIONS`): each trajectory's time in tools moves by
the difference in sandbox tax per trajectory between the substrate and the one the run used,
a tax being ``cold start + teardown + S x per-step tax`` (the report's means, S tool calls per
trajectory); trajectories run side by side, so each step's rollout, and the trainer's wait on
it, moves by that one difference (never below zero). Kept apart from the training-step
makespan model, which can later take its per-trajectory change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.price import SECONDS_PER_HOUR
from ..errors import TrainLogError
from ..report.document import Report, SubstrateEntry
from ..report.projection import step_overhead
from .records import StepRecord

ASSUMPTIONS = (
    "generation unchanged",
    "each trajectory's tool time moves by the substrate's sandbox tax per trajectory "
    "(cold start + teardown + S x per-step tax, the report's means) less the run's own",
    "trajectories run side by side: each step's rollout and the trainer's wait move by that "
    "difference, never below zero",
)


@dataclass(frozen=True)
class WhatIf:
    """The run on one substrate."""

    substrate: str
    #: Its sandbox tax per trajectory, and the change from the run's own (seconds).
    tax_s: float
    change_s: float
    #: The environment's share of trajectory time there.
    environment_share: float
    #: The trainer's total wait there, and how much less than the run's (a fraction; < 0: more).
    wait_s: float
    wait_less: float | None
    #: GPU-hours the trainer would idle less over the run (< 0: more), with the GPU count.
    gpu_hours_saved: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tax_per_trajectory(entry: SubstrateEntry, steps: int) -> float | None:
    """``cold start + teardown + S x min(action, step)`` from the entry's means, None when it
    measured no cold start or probe."""
    means = entry.means()
    if means.cold_start_s is None or means.action_s is None or entry.failed_all:
        return None
    per_step = step_overhead(means.action_s, means.step_s)
    return means.cold_start_s + means.teardown_s + steps * per_step


def taxes(report: Report, steps: int) -> dict[str, float]:
    """Each measured substrate's tax per trajectory, in the report's order."""
    found = {name: tax_per_trajectory(entry, steps) for name, entry in report.substrates.items()}
    return {name: tax for name, tax in found.items() if tax is not None}


def what_ifs(
    records: Sequence[StepRecord],
    report: Report,
    steps: int,
    ran_on: str | None = None,
    gpus: int | None = None,
) -> list[WhatIf]:
    """The run on every substrate of ``report`` with a tax; ``ran_on`` names the substrate the
    run's environment used (None: its tool time is taken as free of sandbox tax). Needs the
    run's tool time (verl's agent loop logs it)."""
    measured = taxes(report, steps)
    if ran_on is not None and ran_on not in measured:
        raise TrainLogError(
            f"ran on {ran_on!r}: not a substrate the report measured "
            f"({', '.join(measured) or 'none'})"
        )
    own = measured[ran_on] if ran_on else 0.0
    timed = [r for r in records if r.tool_s is not None and r.trajectory_generation_s is not None]
    if not timed:
        return []
    gen = math.fsum(r.trajectory_generation_s or 0.0 for r in timed)
    wait_before = math.fsum(r.wait_s for r in records if r.wait_s is not None)
    found = []
    for name, tax in measured.items():
        change = tax - own
        moved = {r.step: max(0.0, (r.tool_s or 0.0) + change) - (r.tool_s or 0.0) for r in timed}
        tool = math.fsum((r.tool_s or 0.0) + moved[r.step] for r in timed)
        wait = math.fsum(
            max(0.0, r.wait_s + moved.get(r.step, 0.0)) for r in records if r.wait_s is not None
        )
        found.append(
            WhatIf(
                substrate=name,
                tax_s=tax,
                change_s=change,
                environment_share=tool / (tool + gen) if tool + gen > 0 else 0.0,
                wait_s=wait,
                wait_less=1 - wait / wait_before if wait_before > 0 else None,
                gpu_hours_saved=gpus * (wait_before - wait) / SECONDS_PER_HOUR if gpus else None,
            )
        )
    return found
