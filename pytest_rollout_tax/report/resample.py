"""The training projection's bootstrap: whole measured rollouts resampled with replacement (a
rollout is the independent unit, not a step), seeded, then batches drawn from each resample
and scheduled on the slots (``schedule``).

Each replicate resamples a substrate's rollouts, then simulates a few training steps from
that resample; the replicates' means give the confidence interval, every simulated step the
makespan's distribution.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.stats import percentile
from .schedule import async_waits, makespan
from .train_model import TrainModel
from .training_units import PARTS, Units

#: Simulated rollouts one substrate's bootstrap may draw, in all: replicates and the steps
#: each simulates shrink to it for big batches (never below the floors below).
BUDGET = 250_000
#: The most and fewest replicates; the most steps one replicate simulates.
MAX_REPLICATES = 200
MIN_REPLICATES = 20
MAX_INNER = 20
#: Steady async steps each replicate averages, after the pipeline has filled.
MIN_STEADY = 2
#: The confidence of the interval.
CONFIDENCE = 0.95
#: The parts a straggler's slot time is split into: its own, and failed tries before it.
STRAGGLER_PARTS = (*PARTS, "retries")


@dataclass(frozen=True)
class Simulated:
    """One substrate's bootstrap: each replicate's mean rollout phase per step (sync: the
    makespan; async: the trainer's steady wait), every simulated makespan, and the
    stragglers' parts summed (seconds, by ``STRAGGLER_PARTS``)."""

    phase_means: list[float]
    makespans: list[float]
    straggler: dict[str, float]

    @property
    def phase_s(self) -> float:
        return math.fsum(self.phase_means) / len(self.phase_means)

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """The percentile interval of the replicates' means."""
        ordered = sorted(self.phase_means)
        tail = (1 - confidence) / 2 * 100
        return percentile(ordered, tail), percentile(ordered, 100 - tail)


def replicates(model: TrainModel) -> tuple[int, int, int]:
    """Replicates, makespans per replicate, and async steps per replicate (0 in sync) within
    :data:`BUDGET` (an async replicate's steps count, and its one makespan)."""
    steps = 0
    per_replicate = model.batch
    if model.mode == "async":
        fill = model.lag + 1
        steady = max(MIN_STEADY, min(MAX_INNER, BUDGET // (MAX_REPLICATES * model.batch) - fill))
        steps = fill + steady
        per_replicate = model.batch * (steps + 1)
    count = max(MIN_REPLICATES, min(MAX_REPLICATES, BUDGET // per_replicate))
    inner = 1 if steps else max(1, min(MAX_INNER, BUDGET // (count * model.batch)))
    return count, inner, steps


def simulate(units: Units, model: TrainModel, seed: int) -> Simulated | None:
    """The bootstrap of one substrate's ``units`` under ``model``, seeded; None without a
    successful rollout."""
    if not units.succeeded:
        return None
    rng = random.Random(seed)
    count, inner, steps = replicates(model)
    slots = model.concurrency
    phase_means, makespans = [], []
    straggler = dict.fromkeys(STRAGGLER_PARTS, 0.0)
    everyone = range(len(units.seconds))
    for _ in range(count):
        pool = _resample(rng, units, everyone)
        spans = []
        for _ in range(inner):
            durations, jobs, retried = _batch(rng, units, pool, model)
            span, last = makespan(durations, slots)
            spans.append(span)
            _attribute(straggler, units, jobs[last], retried[last])
        makespans += spans
        if model.mode == "sync":
            phase_means.append(math.fsum(spans) / len(spans))
            continue
        waits = async_waits(
            _drawer(rng, units, pool, model),
            batch=model.batch,
            slots=slots,
            train_s=model.train_s,
            lag=model.lag,
            steps=steps,
        )
        steady = waits[model.lag + 1 :]
        phase_means.append(math.fsum(steady) / len(steady))
    return Simulated(phase_means, makespans, straggler)


def _resample(rng: random.Random, units: Units, everyone: range) -> list[int]:
    """The indexes of a resample of the units, with at least one that succeeded."""
    while True:
        pool = rng.choices(everyone, k=len(everyone))
        if any(not units.failed[index] for index in pool):
            return pool


def _batch(
    rng: random.Random, units: Units, pool: Sequence[int], model: TrainModel
) -> tuple[list[float], list[int], list[float]]:
    """One step's jobs in order: their slot seconds, the unit each ends with, and the failed
    tries' seconds in it. ``retry``: a failed rollout's slot runs it again (its job is the
    tries together); ``drop``: each failed rollout is a job of its own, and replacements are
    drawn, after the batch, until ``batch`` succeed."""
    seconds, failed = units.seconds, units.failed
    jobs = rng.choices(pool, k=model.batch)
    durations = [seconds[index] for index in jobs]
    retried = [0.0] * len(jobs)
    broken = [position for position, index in enumerate(jobs) if failed[index]]
    if model.failed == "drop":
        for position in broken:
            retried[position] = durations[position]
        wanted = len(broken)
        while wanted:
            index = rng.choice(pool)
            jobs.append(index)
            durations.append(seconds[index])
            retried.append(seconds[index] if failed[index] else 0.0)
            wanted -= not failed[index]
        return durations, jobs, retried
    for position in broken:
        index, tries = jobs[position], 0.0
        while failed[index]:
            tries += seconds[index]
            index = rng.choice(pool)
        jobs[position], durations[position] = index, tries + seconds[index]
        retried[position] = tries
    return durations, jobs, retried


def _drawer(
    rng: random.Random, units: Units, pool: Sequence[int], model: TrainModel
) -> Callable[[], float]:
    """Rollout seconds one at a time from ``pool``; a failed one retried (its tries added) or,
    dropped, counted as one more rollout's slot time before its replacement (the same)."""
    seconds, failed = units.seconds, units.failed

    def draw() -> float:
        spent = 0.0
        index = rng.choice(pool)
        while failed[index]:
            spent += seconds[index]
            index = rng.choice(pool)
        return spent + seconds[index]

    return draw


def _attribute(totals: dict[str, float], units: Units, index: int, retried: float) -> None:
    """Add the straggler's parts: its own (none for a dropped failure) and its failed tries."""
    if not units.failed[index]:
        for part, value in zip(PARTS, units.parts[index], strict=True):
            totals[part] += value
    totals["retries"] += retried
