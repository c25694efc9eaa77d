"""Worker-hour projection and the spread between substrates (docs/measurement.md)."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from ..core.limits import check

#: Where a projection's think time comes from: ``--rollout-think-time``, the replayed
#: trajectories' recorded think time, or nowhere (0).
ThinkSource = Literal["option", "recorded", "none"]

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Scale:
    """How many rollouts of how many steps to project, and the agent's think time per step."""

    rollouts: int = 1_000_000
    #: None: each workload's declared length (marker ``steps``), else the steps it made.
    steps: int | None = 150
    think_time_s: float = 0.0
    think_time_source: ThinkSource = "option"

    @classmethod
    def parse(
        cls, text: str, think_time_s: float | None = None, option: str = "projection"
    ) -> Scale:
        """Parse ``NxS`` or ``N`` (e.g. ``1000000x150``, ``1e6x150``, ``1_000_000``); an error
        names ``option``.

        ``think_time_s`` None: not given, so recorded think time may stand in for it."""
        match = re.fullmatch(r"\s*([0-9_.eE+]+)\s*(?:[xX]\s*([0-9_]+))?\s*", text)
        try:
            rollouts = float(match.group(1)) if match else -1.0
            steps = int(match.group(2)) if match and match.group(2) else None
        except ValueError:
            rollouts, steps = -1.0, None
        if not 1 <= rollouts < 1e15 or rollouts != int(rollouts) or steps == 0:
            raise ValueError(
                f"{option}={text!r}: expected ROLLOUTSxSTEPS (or ROLLOUTS alone) "
                "with positive integers, e.g. 1000000x150"
            )
        if steps is not None:
            check("--rollout-project steps", steps, f"{option}={text!r}: steps")
        if think_time_s is None:
            return cls(rollouts=int(rollouts), steps=steps, think_time_source="none")
        if not 0 <= think_time_s < float("inf"):
            raise ValueError(f"think time {think_time_s!r}: expected seconds >= 0")
        return cls(rollouts=int(rollouts), steps=steps, think_time_s=think_time_s)

    def with_recorded_think(self, think_s: float | None) -> Scale:
        """This scale with a recorded mean think time per step, unless an option set one."""
        if self.think_time_source == "option" or think_s is None:
            return self
        return dataclasses.replace(self, think_time_s=think_s, think_time_source="recorded")


def rollout_seconds(
    scale: Scale, *, cold_start_s: float, step_s: float, teardown_s: float, idle_s: float = 0.0
) -> float:
    """Seconds one rollout occupies: ``cold + S * (step + think) + teardown + idle``.

    ``idle_s`` is a warm pool's idle sandbox time per claimed rollout (0 without a pool).
    """
    return cold_start_s + scale.steps * (step_s + scale.think_time_s) + teardown_s + idle_s


def worker_hours(
    scale: Scale, *, cold_start_s: float, step_s: float, teardown_s: float, idle_s: float = 0.0
) -> float:
    """Hours of worker time for the whole run: ``N * (cold + S * (step + think) + teardown
    + idle)``, the last term a warm pool's idle sandbox time per rollout."""
    per_rollout = rollout_seconds(
        scale, cold_start_s=cold_start_s, step_s=step_s, teardown_s=teardown_s, idle_s=idle_s
    )
    return scale.rollouts * per_rollout / SECONDS_PER_HOUR


def fleet_hours(
    scale: Scale, workers: int, rollout_s: float, idle_s: float = 0.0
) -> tuple[float, float]:
    """Wall-clock hours and worker-hours of N rollouts of ``rollout_s`` each on ``workers``
    concurrent workers: ``ceil(N / W)`` waves one after another. A warm pool's idle time per
    rollout (``idle_s``) costs worker-hours but no wall-clock time: it passes in the background.
    """
    waves = -(-scale.rollouts // workers)
    wall = waves * rollout_s / SECONDS_PER_HOUR
    return wall, scale.rollouts * (rollout_s + idle_s) / SECONDS_PER_HOUR


def step_overhead(action_s: float, step_s: float | None = None) -> float:
    """The substrate's part of one step: the no-op probe's time, never more than the step's."""
    return action_s if step_s is None else min(action_s, step_s)


def projected_step(action_s: float, step_s: float, command_s: float | None = None) -> float:
    """The step time the projection counts: the measured step, or, when the command time is
    known apart (a shape replay's recorded command time), the substrate's part of the measured
    step (:func:`step_overhead`) plus that command time."""
    return step_s if command_s is None else step_overhead(action_s, step_s) + command_s


def tax_hours(
    scale: Scale,
    *,
    cold_start_s: float,
    action_s: float,
    teardown_s: float,
    step_s: float | None = None,
    idle_s: float = 0.0,
) -> float:
    """Hours the substrate alone costs: ``N * (cold + S * min(action, step) + teardown + idle)``.

    Without a step time (no steps measured) the per-step part is the no-op probe's alone.
    """
    overhead = scale.steps * step_overhead(action_s, step_s)
    return scale.rollouts * (cold_start_s + overhead + teardown_s + idle_s) / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Decomposition:
    """Projected worker-hours split by where they go; the parts add up to the worker-hours."""

    cold_start: float
    #: The per-step transport tax: ``S * min(action, step)`` per rollout.
    overhead: float
    #: The commands' own time: the rest of each step.
    command: float
    think: float
    teardown: float
    #: A warm pool's idle sandboxes; 0 without a pool.
    idle: float = 0.0

    PARTS: ClassVar[tuple[str, ...]] = (
        "cold_start", "overhead", "command", "think", "teardown", "idle",
    )  # fmt: skip
    #: The parts the substrate alone costs (tax-hours).
    TAX: ClassVar[tuple[str, ...]] = ("cold_start", "overhead", "teardown", "idle")

    @property
    def worker_hours(self) -> float:
        return math.fsum(getattr(self, part) for part in self.PARTS)

    @property
    def tax_hours(self) -> float:
        return math.fsum(getattr(self, part) for part in self.TAX)

    def to_dict(self) -> dict[str, float]:
        return {part: getattr(self, part) for part in self.PARTS}


def decompose(
    scale: Scale,
    *,
    cold_start_s: float,
    action_s: float,
    step_s: float,
    teardown_s: float,
    idle_s: float = 0.0,
    command_s: float | None = None,
) -> Decomposition:
    """Split :func:`worker_hours` into its parts, the per-step tax as :func:`tax_hours` counts it.

    ``idle_s``: a warm pool's idle sandbox-seconds per rollout (0 without a pool).
    ``command_s``: the command time per step when it is not the measured step's rest (a shape
    replay's recorded command time, :func:`projected_step`); ``step_s`` is the measured step.
    """
    per_hour = scale.rollouts / SECONDS_PER_HOUR
    overhead = step_overhead(action_s, step_s)
    command = step_s - overhead if command_s is None else command_s
    return Decomposition(
        cold_start=cold_start_s * per_hour,
        overhead=scale.steps * overhead * per_hour,
        command=scale.steps * command * per_hour,
        think=scale.steps * scale.think_time_s * per_hour,
        teardown=teardown_s * per_hour,
        idle=idle_s * per_hour,
    )


def added_hours(
    per_rollout_s: float = 0.0,
    per_action_s: float = 0.0,
    rollouts: int = 1_000_000,
    steps: int = 150,
) -> float:
    """Worker-hours added by an extra overhead per rollout and per action (the paper's Table 1)."""
    return rollouts * (per_rollout_s + steps * per_action_s) / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Spread:
    """Two pairs, each named: the slowest substrate's cold-start p50 over the fastest's, and the
    dearest substrate's projected worker-hours over the cheapest's."""

    cold_start_p50: float
    fastest: str
    slowest: str
    worker_hours: float
    cheapest: str
    dearest: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def spread(cold_start_p50: dict[str, float], hours: dict[str, float]) -> Spread | None:
    """The spread between substrates, or None with fewer than two that have both figures."""
    names = [name for name in cold_start_p50 if cold_start_p50[name] > 0 and hours.get(name, 0) > 0]
    if len(names) < 2:
        return None
    fastest = min(names, key=lambda name: cold_start_p50[name])
    slowest = max(names, key=lambda name: cold_start_p50[name])
    cheapest = min(names, key=lambda name: hours[name])
    dearest = max(names, key=lambda name: hours[name])
    return Spread(
        cold_start_p50=cold_start_p50[slowest] / cold_start_p50[fastest],
        fastest=fastest,
        slowest=slowest,
        worker_hours=hours[dearest] / hours[cheapest],
        cheapest=cheapest,
        dearest=dearest,
    )
