"""The summary's training lines (``--rollout-train``): the model with its defaults, where the
rollouts' think time came from, each substrate's step and stragglers, the ranking by the
step with its noise verdicts, and whether it differs from the worker-hours ranking."""

from __future__ import annotations

from ..report.document import Report
from ..report.train_model import KEYS, TrainModel
from ..report.training_doc import Training, TrainingRanked
from ..text.units import PART_LABELS, dollars, hours, ratio, seconds, share
from .lines import VERDICTS

#: How the header words where the rollouts' think time came from.
THINK = {
    "recorded": "recorded per rollout in the replayed trajectories: their tail is in the step",
    "option": "from --rollout-think-time, the same in every rollout: it lengthens the step, "
    "not its tail",
    "none": "none known: the rollouts' tail is the environment's alone (no model time)",
}


def model_line(training: Training) -> str:
    """The model, every value, and which of them are defaults."""
    model = training.model
    lag = f" (generation up to {model.lag} step{'s' * (model.lag > 1)} ahead)"
    price = f" at ${model.gpu_price:g} per GPU-hour" if model.gpu_price is not None else ""
    defaults = ", ".join(f"{key}={_value(model, key)}" for key in KEYS if key not in model.given)
    return (
        f"training: {model.mode} steps of {model.batch:,} rollouts on {model.concurrency:,} "
        f"slots{lag if model.mode == 'async' else ''}, the trainer's own "
        f"{seconds(model.train_s)} per step, {model.gpus:,} GPUs{price}, failed rollouts "
        f"{'retried' if model.failed == 'retry' else 'dropped'}; {training.steps:,} steps "
        f"for {training.rollouts:,} rollouts" + (f" (defaults: {defaults})" if defaults else "")
    )


def _value(model: TrainModel, key: str) -> str:
    if key == "slots":
        return "batch" if model.slots is None else str(model.slots)
    if key == "gpu_price":
        return "none" if model.gpu_price is None else f"{model.gpu_price:g}"
    if key == "train":
        return f"{model.train_s:g}"
    return str(getattr(model, key))


def header_lines(report: Report) -> list[str]:
    """The model, and the think time in the rollouts' tail."""
    training = report.training
    if training is None:
        return []
    return [model_line(training), f"training think time: {THINK[training.think]}"]


def substrate_lines(report: Report) -> list[str]:
    """Per substrate, fastest step first: the rollout phase with its interval, the step, the
    trainer's wait share, idle GPU-hours (and dollars); then where the stragglers' time went;
    those with nothing to project."""
    training = report.training
    if training is None:
        return []
    async_ = training.model.mode == "async"
    level = f"{training.confidence:.0%}"
    lines = []
    for item in training.ranking:
        entry = training.substrates[item.substrate]
        phase = "the trainer's steady wait" if async_ else "makespan"
        price = f" ({dollars(entry.dollars)})" if entry.dollars is not None else ""
        lines.append(
            f"{item.substrate} training step {seconds(entry.step_s)}: {phase} "
            f"{seconds(entry.phase_s)} per step ({level} CI {seconds(entry.phase_low_s)}-"
            f"{seconds(entry.phase_high_s)}), the trainer waits {share(entry.wait_share)}; "
            f"{hours(entry.idle_gpu_hours)} idle GPU-hours{price}"
        )
        parts = ", ".join(
            f"{PART_LABELS.get(part, part)} {share(value)}"
            for part, value in entry.straggler.items()
        )
        lines.append(f"{item.substrate} stragglers (the rollout that ends the batch): {parts}")
    lines += [f"{name}: no training step: {why}" for name, why in training.not_projected.items()]
    return lines


def ranking_line(report: Report) -> str | None:
    """The substrates by their step, each against the fastest with the noise verdict."""
    ranking = report.training.ranking if report.training else []
    if len(ranking) < 2:
        return None
    rest = "; ".join(_versus(item) for item in ranking[1:])
    return f"ranking by training step: {ranking[0].substrate}, then {rest}"


def _versus(item: TrainingRanked) -> str:
    text = f"{item.substrate} at {ratio(item.ratio)} the step"
    if item.floor:
        return text + " (unisolated floor)"
    if item.noise:
        text += f", {VERDICTS[item.noise]}: {item.why}"
    return text


def decision_line(report: Report) -> str | None:
    """With ``--rollout-rank-by=train``: the fastest training step, first in the summary."""
    training = report.training
    if training is None or report.projection.rank_by != "train" or not training.ranking:
        return None
    first = training.ranking[0]
    entry = training.substrates[first.substrate]
    return (
        f"fastest training step: {first.substrate}, {seconds(first.step_s)} per step, "
        f"{hours(first.idle_gpu_hours)} idle GPU-hours (the trainer waits "
        f"{share(entry.wait_share)})"
    )


def differs_line(report: Report) -> str | None:
    """One line when the training ranking orders two substrates the other way round from the
    worker-hours ranking, with both figures of each; None when they agree."""
    training = report.training
    if training is None:
        return None
    hours_of = {
        item.substrate: item.worker_hours
        for item in report.ranking
        if item.worker_hours is not None and not item.no_valid_result
    }
    by_step = [item.substrate for item in training.ranking if item.substrate in hours_of]
    by_hours = [name for name in hours_of if name in by_step]
    pair = next(((a, b) for a, b in zip(by_step, by_hours, strict=True) if a != b), None)
    if pair is None:
        return None
    fast, cheap = pair
    step = {item.substrate: item.step_s for item in training.ranking}
    return (
        f"the rankings differ: by training step {fast} is ahead ({seconds(step[fast])} vs "
        f"{cheap}'s {seconds(step[cheap])} per step); by worker-hours {cheap} is ahead "
        f"({hours(hours_of[cheap])} vs {fast}'s {hours(hours_of[fast])} worker-hours)"
    )
