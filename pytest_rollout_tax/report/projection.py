"""The projection: one door, :func:`project`, from a substrate's :class:`Means` to its
:class:`Projected` hours at a :class:`Scale`, each term one function (docs/measurement.md).

A new term is a function of ``(means, scale)``, a field of ``Projected`` set in
:func:`project`, and its test."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..core.known import from_known
from ..core.price import SECONDS_PER_HOUR, Rate
from .cost import Cost, project_cost

#: Where a projection's think time comes from: ``--rollout-think-time``, the replayed
#: trajectories' recorded think time, the gaps between steps of a recorded live run (record
#: mode), or nowhere (0).
ThinkSource = Literal["option", "recorded", "live", "none"]
#: Where a projection's steps per rollout come from: ``--rollout-project NxS``; not given, so
#: the default 150 (``default``), or the replays' mean recorded length when every rollout
#: replayed a trajectory (``replays``), or the default in a run that mixes replays with other
#: workloads (``mixed``); ``--rollout-project N`` alone, or no option and every rollout's
#: marker declaring ``steps``, the workloads' mean (``workloads``).
StepsSource = Literal["option", "default", "replays", "mixed", "workloads"]
#: The steps per rollout when nothing sets them (the paper's ~150 tool calls).
DEFAULT_STEPS = 150
#: What the ranking orders substrates by (``--rollout-rank-by``); ``train``: the training
#: section's ranking leads, and the report's ``ranking`` stays by worker-hours.
RankBy = Literal["worker_hours", "cost", "train"]
RANK_BY: tuple[RankBy, ...] = ("worker_hours", "cost", "train")


@dataclass(frozen=True)
class Scale:
    """How many rollouts of how many steps to project, and the agent's think time per step."""

    rollouts: int = 1_000_000
    #: None: each workload's declared length (marker ``steps``), else the steps it made.
    steps: int | None = DEFAULT_STEPS
    think_time_s: float = 0.0
    think_time_source: ThinkSource = "option"
    #: Concurrent workers to project wall-clock hours for (``--rollout-fleet``), or None.
    fleet: int | None = None
    #: What the ranking orders by: projected worker-hours or dollars (``--rollout-rank-by``).
    rank_by: RankBy = "worker_hours"
    #: Where ``steps`` came from (the summary's header says it).
    steps_source: StepsSource = "option"

    def to_dict(self) -> dict[str, Any]:
        """The JSON of the projection settings (a report's ``projection``, a shard's
        ``client.projection``): every field, under its own name."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scale:
        """The settings a :meth:`to_dict` of any version wrote: keys an older writer lacked
        take their defaults (``rank_by`` ``worker_hours``, ``steps_source`` ``option``)."""
        return from_known(cls, data)

    @classmethod
    def asked(
        cls, projected: tuple[int, int | None] | None = None, think_time_s: float | None = None
    ) -> Scale:
        """The scale the options ask: ``projected``, ``--rollout-project``'s rollouts and steps
        (``flags.projection``; steps None: the workloads' mean), or None when not given (the
        default, whose steps the replays' mean length may replace, :meth:`with_replay_steps`);
        ``think_time_s`` None: not given, so recorded think time may stand in for it."""
        think = (
            {"think_time_source": "none"}
            if think_time_s is None
            else {"think_time_s": think_time_s}
        )
        if projected is None:
            return cls(steps_source="default", **think)
        rollouts, steps = projected
        return cls(rollouts, steps, steps_source="option" if steps else "workloads", **think)

    def with_replay_steps(self, lengths: Sequence[int], others: int) -> Scale:
        """This scale with the replays' mean recorded length (``lengths``, one per replayed
        rollout) when no option set the steps and no rollout (``others``: how many) ran
        another workload; a mix keeps the default and says so (``mixed``)."""
        if self.steps_source != "default" or not lengths:
            return self
        if others:
            return dataclasses.replace(self, steps_source="mixed")
        mean = max(1, round(sum(lengths) / len(lengths)))
        return dataclasses.replace(self, steps=mean, steps_source="replays")

    def with_recorded_think(self, think_s: float | None) -> Scale:
        """This scale with a recorded mean think time per step, unless an option set one
        (measured live in record mode, whose scale says so from the start)."""
        if self.think_time_source == "option" or think_s is None:
            return self
        source: ThinkSource = "live" if self.think_time_source == "live" else "recorded"
        return dataclasses.replace(self, think_time_s=think_s, think_time_source=source)


@dataclass(frozen=True)
class Means:
    """What a projection starts from: one substrate's means, in seconds.

    Made once per substrate, from its report entry (``document.SubstrateEntry.means``), in a
    live run, a merge and a saved run alike; :func:`project` turns it into hours.
    """

    #: Mean cold start, no-op probe and measured step (None: not measured), mean teardown.
    cold_start_s: float | None
    action_s: float | None
    step_s: float | None
    teardown_s: float = 0.0
    #: A warm pool's idle sandbox-seconds per claimed rollout (0 without a pool).
    idle_s: float = 0.0
    #: A shape replay's recorded command time per step, when it is known apart from the step.
    command_s: float | None = None
    #: A sandbox runtime's excess command time per step over the default runtime's (None:
    #: not measured, the default runtime or no reference in the run).
    isolation_s: float | None = None
    #: The substrate's recorded think time per step (replays), used unless an option set one.
    think_s: float | None = None
    #: The substrate's billing, for substrates that know their price.
    rate: Rate | None = None
    #: Burst levels measured, as (concurrency, mean cold start) pairs; a warm pool's size.
    bursts: tuple[tuple[int, float], ...] = ()
    pool_size: int | None = None

    @property
    def projected_step_s(self) -> float | None:
        """The step time the projection counts: the measured step, or, when the command time
        is known apart, the substrate's part of the step (:func:`step_overhead`) plus it."""
        if self.step_s is None:
            return None
        if self.command_s is None:
            return self.step_s
        if self.action_s is None:  # no probe: the whole measured step is the overhead
            return self.step_s + self.command_s
        return step_overhead(self.action_s, self.step_s) + self.command_s


@dataclass(frozen=True)
class FleetHours:
    """N rollouts on W concurrent workers: ``ceil(N / W)`` waves, the cold start from a warm
    pool's claims, else the measured burst level nearest to W, else the rollouts' own."""

    workers: int
    cold_start_from: str
    burst_level: int | None
    cold_start_s: float
    idle_s: float
    wall_clock_hours: float
    worker_hours: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Projected:
    """Every projected figure of one substrate at one scale."""

    worker_hours: float | None
    tax_hours: float | None
    decomposition: Decomposition | None
    fleet: FleetHours | None = None
    cost: Cost | None = None


def project(means: Means, scale: Scale) -> Projected:
    """The one door of the projection: ``means`` at ``scale`` (its think time the substrate's
    recorded one unless an option set it)."""
    scale = scale.with_recorded_think(means.think_s)
    decomposition = decompose(means, scale)
    fleet = fleet_hours(means, scale)
    return Projected(
        worker_hours=worker_hours(means, scale),
        tax_hours=tax_hours(means, scale),
        decomposition=decomposition,
        fleet=fleet,
        cost=cost(means, scale, decomposition, fleet),
    )


def rollout_seconds(
    scale: Scale, *, cold_start_s: float, step_s: float, teardown_s: float, idle_s: float = 0.0
) -> float:
    """Seconds one rollout occupies: ``cold + S * (step + think) + teardown + idle``, the one
    formula of a rollout's worker time (the hours, the noise test's units, the fleet).

    ``idle_s`` is a warm pool's idle sandbox time per claimed rollout (0 without a pool).
    """
    return cold_start_s + (scale.steps or 0) * (step_s + scale.think_time_s) + teardown_s + idle_s


def worker_hours(means: Means, scale: Scale) -> float | None:
    """Hours of worker time for the whole run, ``N * rollout_seconds``, or None without a cold
    start and steps."""
    step_s = means.projected_step_s
    if means.cold_start_s is None or step_s is None:
        return None
    per_rollout = rollout_seconds(
        scale,
        cold_start_s=means.cold_start_s,
        step_s=step_s,
        teardown_s=means.teardown_s,
        idle_s=means.idle_s,
    )
    return scale.rollouts * per_rollout / SECONDS_PER_HOUR


def fleet_hours(means: Means, scale: Scale) -> FleetHours | None:
    """Wall-clock hours and worker-hours on ``scale.fleet`` workers, or None without a fleet,
    a cold start or steps. A warm pool's idle time costs worker-hours but no wall-clock time:
    it passes in the background."""
    workers, step_s = scale.fleet, means.projected_step_s
    if workers is None or means.cold_start_s is None or step_s is None:
        return None
    level, cold = None, means.cold_start_s
    if means.pool_size is not None:
        source = f"warm pool claims (pool={means.pool_size}), with its idle time"
    elif means.bursts:
        level, cold = min(means.bursts, key=lambda lv: (abs(lv[0] - workers), -lv[0]))
        source = f"burst level {level}"
    else:
        source = "rollouts (no burst measured)"
    per_rollout = rollout_seconds(
        scale, cold_start_s=cold, step_s=step_s, teardown_s=means.teardown_s
    )
    waves = -(-scale.rollouts // workers)
    return FleetHours(
        workers=workers,
        cold_start_from=source,
        burst_level=level,
        cold_start_s=cold,
        idle_s=means.idle_s,
        wall_clock_hours=waves * per_rollout / SECONDS_PER_HOUR,
        worker_hours=scale.rollouts * (per_rollout + means.idle_s) / SECONDS_PER_HOUR,
    )


def cost(
    means: Means, scale: Scale, decomposition: Decomposition | None, fleet: FleetHours | None
) -> Cost | None:
    """The projection in dollars at the substrate's rate: its hours' parts billed, the launch
    minimum and the fixed fee over the fleet's wall clock (``report/cost.py``); None without a
    rate or hours."""
    if means.rate is None or decomposition is None:
        return None
    return project_cost(
        decomposition.to_dict(),
        means.rate,
        rollouts=scale.rollouts,
        think_s=(scale.steps or 0) * scale.think_time_s,
        wall_clock_hours=fleet.wall_clock_hours if fleet else None,
    )


def step_overhead(action_s: float, step_s: float | None = None) -> float:
    """The substrate's part of one step: the no-op probe's time, never more than the step's."""
    return action_s if step_s is None else min(action_s, step_s)


def isolation_per_step(means: Means) -> float:
    """A sandbox runtime's excess command time per step, never more than the command time it
    is taken from (the step's rest, ``step - min(action, step)``): the parts stay the hours."""
    if not means.isolation_s:
        return 0.0
    if means.action_s is None or means.step_s is None:
        return means.isolation_s
    return min(means.isolation_s, means.step_s - step_overhead(means.action_s, means.step_s))


def isolation_hours(means: Means, scale: Scale) -> float:
    """Hours a sandbox runtime adds to the commands: ``N * S * isolation``."""
    return scale.rollouts * (scale.steps or 0) * isolation_per_step(means) / SECONDS_PER_HOUR


def tax_hours(means: Means, scale: Scale) -> float | None:
    """Hours the substrate alone costs: ``N * (cold + S * min(action, step) + teardown + idle)``
    plus its runtime's isolation, or None without a cold start and probes.

    Without a step time (no steps measured) the per-step part is the no-op probe's alone.
    """
    if means.cold_start_s is None or means.action_s is None:
        return None
    overhead = (scale.steps or 0) * step_overhead(means.action_s, means.step_s)
    per_rollout = means.cold_start_s + overhead + means.teardown_s + means.idle_s
    return scale.rollouts * per_rollout / SECONDS_PER_HOUR + isolation_hours(means, scale)


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
    #: A sandbox runtime's excess command time (``isolation``); None: no other runtime.
    isolation: float | None = None

    PARTS: ClassVar[tuple[str, ...]] = (
        "cold_start", "overhead", "command", "think", "teardown", "idle",
    )  # fmt: skip
    #: The parts the substrate alone costs (tax-hours).
    TAX: ClassVar[tuple[str, ...]] = ("cold_start", "overhead", "teardown", "idle")

    @property
    def worker_hours(self) -> float:
        return math.fsum(getattr(self, part) for part in self.PARTS) + (self.isolation or 0.0)

    @property
    def tax_hours(self) -> float:
        return math.fsum(getattr(self, part) for part in self.TAX) + (self.isolation or 0.0)

    def to_dict(self) -> dict[str, float]:
        parts = {part: getattr(self, part) for part in self.PARTS}
        return parts if self.isolation is None else {**parts, "isolation": self.isolation}


def decompose(means: Means, scale: Scale) -> Decomposition | None:
    """Split :func:`worker_hours` into its parts, the per-step tax as :func:`tax_hours` counts
    it, or None without a cold start, probes and steps. The command part is the recorded
    command time where a shape replay has it, else the measured step's rest; a runtime's
    isolation moves from it to a part of its own."""
    if means.cold_start_s is None or means.action_s is None or means.step_s is None:
        return None
    per_hour = scale.rollouts / SECONDS_PER_HOUR
    steps = scale.steps or 0
    overhead = step_overhead(means.action_s, means.step_s)
    command = means.step_s - overhead if means.command_s is None else means.command_s
    isolation = None if means.isolation_s is None else isolation_hours(means, scale)
    return Decomposition(
        cold_start=means.cold_start_s * per_hour,
        overhead=steps * overhead * per_hour,
        command=max(steps * command * per_hour - (isolation or 0.0), 0.0),
        think=steps * scale.think_time_s * per_hour,
        teardown=means.teardown_s * per_hour,
        idle=means.idle_s * per_hour,
        isolation=isolation,
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

    def to_dict(self) -> dict[str, Any]:
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
