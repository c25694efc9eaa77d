"""What the trainer waits for: each substrate's training step projected from its measured
rollouts, tails included (docs/training.md).

A synchronous step waits for the slowest of its batch; an asynchronous trainer waits when no
finished batch is ready. Both are simulated from whole measured rollouts, resampled
(``resample``) and scheduled on the slots (``schedule``); the substrates are then ranked by
their step's wall-clock, each against the fastest by a bootstrap test at the noise test's
level (``core.noise``)."""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Sequence

from ..core.noise import ALPHA, MIN_SAMPLES, Evidence
from ..core.price import SECONDS_PER_HOUR
from ..core.stats import percentile
from .aggregate import RolloutRows
from .document import Report
from .ranking import RESOLVED, UNTESTED, WITHIN_NOISE
from .resample import CONFIDENCE, STRAGGLER_PARTS, Simulated, replicates, simulate
from .train_model import TrainModel
from .training_doc import ThinkFrom, Training, TrainingEntry, TrainingRanked
from .training_units import Units, measured_units

#: The seed of the bootstrap (each substrate's own, from it and its name), so a report
#: reads the same each time it is made.
SEED = 0
#: The makespan percentiles the section keeps (0, 5, ..., 100).
QUANTILES = tuple(range(0, 101, 5))
#: The step columns the units read (``training_units``).
TRAINING_COLUMNS = ("wall_us", "think_us", "recorded_us")
#: Why a substrate has no training figures.
NO_SUCCESS = "no successful rollout with a cold start and steps to resample"


def with_training(report: Report, model: TrainModel | None) -> Report:
    """``report`` with its ``training`` section under ``model`` (None: as it is); a live
    report's rows are read with the step columns the model needs, whatever the JSON keeps."""
    if model is None:
        return report
    rows = report.rollouts
    source = report
    if isinstance(rows, RolloutRows):
        source = dataclasses.replace(report, rollouts=rows.keeping(TRAINING_COLUMNS))
    return dataclasses.replace(report, training=project_training(source, model))


def training_order(report: Report) -> list[str] | None:
    """With ``--rollout-rank-by=train``, the substrates fastest training step first, then the
    rest in the report's ranking; None otherwise."""
    training = report.training
    if training is None or report.projection.rank_by != "train":
        return None
    first = [item.substrate for item in training.ranking]
    rest = [item.substrate for item in report.ranking if item.substrate not in first]
    return first + rest + [n for n in report.substrates if n not in first and n not in rest]


def training_model(
    asked: TrainModel | None, saved: Report, rank_by: str | None
) -> TrainModel | None:
    """The model a re-projection of ``saved`` projects: the one ``asked``, else the saved
    run's, else the defaults when ranking by the training step (``rank_by``, else the run's
    own); None: no training section."""
    if asked is not None:
        return asked
    if saved.training is not None:
        return saved.training.model
    return TrainModel() if (rank_by or saved.projection.rank_by) == "train" else None


def project_training(report: Report, model: TrainModel, seed: int = SEED) -> Training:
    """The ``training`` section of ``report`` under ``model``: per substrate, from its
    ``rollouts[]`` at the report's projection (its steps, its think time)."""
    scale = report.projection
    probes = {n: e.action.mean for n, e in report.substrates.items() if e.action}
    units = measured_units(report.rollouts, scale, probes)
    steps = -(-scale.rollouts // model.batch)
    training = Training(
        model=model,
        seed=seed,
        confidence=CONFIDENCE,
        rollouts=scale.rollouts,
        steps=steps,
        think=_think(units, scale.think_time_source, scale.think_time_s),
    )
    simulated: dict[str, Simulated] = {}
    for name in sorted(units):
        found = simulate(units[name], model, seed + zlib.crc32(name.encode()))
        if found is None:
            training.not_projected[name] = NO_SUCCESS
            continue
        simulated[name] = found
        training.substrates[name] = entry(units[name], found, model, steps)
    isolates = {n: report.substrates[n].isolates(n) for n in simulated if n in report.substrates}
    training.ranking = rank(training.substrates, simulated, units, isolates)
    return training


def _think(units: dict[str, Units], source: str, think_s: float) -> ThinkFrom:
    """Where the rollouts' think time came from: the option (when it set some), each
    replay's recording, or nowhere."""
    if source == "option":
        return "option" if think_s else "none"
    return "recorded" if any(u.think_recorded for u in units.values()) else "none"


def entry(units: Units, found: Simulated, model: TrainModel, steps: int) -> TrainingEntry:
    """One substrate's figures from its bootstrap."""
    phase = found.phase_s
    low, high = found.interval()
    per_phase = steps * model.gpus / SECONDS_PER_HOUR
    step = phase + model.train_s
    ordered = sorted(found.makespans)
    spent = math.fsum(found.straggler.values())
    return TrainingEntry(
        rollouts=len(units.seconds),
        failed=len(units.seconds) - units.succeeded,
        phase_s=phase,
        phase_low_s=low,
        phase_high_s=high,
        step_s=step,
        wait_share=phase / step if step else 0.0,
        idle_gpu_hours=phase * per_phase,
        idle_gpu_hours_low=low * per_phase,
        idle_gpu_hours_high=high * per_phase,
        dollars=None if model.gpu_price is None else phase * per_phase * model.gpu_price,
        makespan_p50_s=percentile(ordered, 50),
        makespan_quantiles=[percentile(ordered, q) for q in QUANTILES],
        straggler={
            part: (found.straggler[part] / spent if spent else 0.0) for part in STRAGGLER_PARTS
        },
        replicates=replicates(model)[0],
    )


def rank(
    entries: dict[str, TrainingEntry],
    simulated: dict[str, Simulated],
    units: dict[str, Units],
    isolates: dict[str, bool],
) -> list[TrainingRanked]:
    """The substrates by their step's wall-clock, fastest first, each against the reference
    (the fastest that isolates, else the fastest) by :func:`evidence`; an unisolated substrate
    faster than an isolating reference is the floor, compared with nothing."""
    order = sorted(entries, key=lambda n: (entries[n].step_s, n))
    if not order:
        return []
    reference = next((n for n in order if isolates.get(n, True)), order[0])
    base = entries[reference].step_s
    ranking = []
    for name in order:
        item = TrainingRanked(
            substrate=name,
            step_s=entries[name].step_s,
            idle_gpu_hours=entries[name].idle_gpu_hours,
            ratio=entries[name].step_s / base if base else 1.0,
            isolates=isolates.get(name, True),
        )
        ranking.append(item)
        if name == reference:
            continue
        if isolates.get(reference, True) and not item.isolates:
            item.floor = True
            continue
        found = evidence(
            simulated[reference].phase_means,
            simulated[name].phase_means,
            (units[reference].succeeded, units[name].succeeded),
        )
        item.why = found.why
        if found.p_value is None:
            item.noise = UNTESTED
        else:
            item.noise = RESOLVED if found.credible else WITHIN_NOISE
    return ranking


def evidence(
    reference: Sequence[float], other: Sequence[float], rollouts: tuple[int, int]
) -> Evidence:
    """Is ``other``'s rollout phase credibly longer than ``reference``'s? The share of paired
    bootstrap replicates (independent resamples of each side's rollouts) where it is not,
    as a one-sided p-value at the noise test's ALPHA; untested below its MIN_SAMPLES
    successful rollouts a side."""
    if min(rollouts) < MIN_SAMPLES:
        return Evidence(
            None,
            f"not tested: {rollouts[0]}/{rollouts[1]} successful rollouts, the noise test "
            f"needs {MIN_SAMPLES} a side",
        )
    pairs = min(len(reference), len(other))
    p = sum(o <= r for r, o in zip(reference, other, strict=False)) / pairs
    p = max(p, 1 / (pairs + 1))  # a bootstrap never resolves below its resolution
    relation = "<" if p < ALPHA else ">="
    n = f"n={rollouts[0]}/{rollouts[1]} rollouts, {pairs} resamples"
    return Evidence(p, f"bootstrap p={p:.2g} {relation} {ALPHA} ({n})")
