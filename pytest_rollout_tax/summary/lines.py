"""The summary's lines around the table: the decision, what the hours count (think time,
command time), the spread's pairs, divergence, substrates that ran nothing, sample sizes.

Each takes the report (or its ``substrates``) and returns plain strings, for the terminal and
the HTML page alike.
"""

from __future__ import annotations

from ..core.stats import min_samples
from ..report.document import Ranked, Report, SubstrateEntry
from ..report.projection import Scale
from ..report.ranking import RESOLVED, UNTESTED, WITHIN_NOISE
from ..report.training import training_order
from ..text.units import dollars, hours, ratio, seconds, share


def ranked_names(report: Report) -> list[str]:
    """The substrates in the report's ranking order (cheapest worker-hours first); a report
    saved before the ranking was recorded is ordered by its worker-hours; ranked by the
    training step (``--rollout-rank-by=train``), the fastest step first."""
    if (by_step := training_order(report)) is not None:
        return by_step
    if report.ranking:
        return [item.substrate for item in report.ranking]
    substrates = report.substrates

    def key(name: str) -> tuple[bool, float, str]:
        hours = substrates[name].worker_hours
        return (hours is None, hours or 0.0, name)

    return sorted(substrates, key=key)


def decision_lines(report: Report) -> list[str]:
    """The decision: the cheapest substrate that isolates (by worker-hours, or by dollars with
    ``--rollout-rank-by=cost``, the other unit beside it), with the unisolated floor
    (``local``) beside it, by how much it beats the next and whether the run resolves the
    difference (the gate's noise test); the whole ranking when more than two candidates have
    the figure; each substrate with no valid result (every rollout failed), with its reason."""
    by_cost = report.projection.rank_by == "cost"
    key = "dollars" if by_cost else "worker_hours"
    ranking = report.ranking
    valid = [item for item in ranking if getattr(item, key) and not item.no_valid_result]
    floors = [item for item in valid if item.floor]
    candidates = [item for item in valid if not item.floor]
    best = max((item.success or 0.0 for item in valid), default=0.0)
    lines = []
    if candidates:
        first = candidates[0]
        figures = _figures(first, by_cost) + _success(first, best)
        floor = "".join(
            f" (floor: {item.substrate}, {_figures(item, by_cost, tax=False)})"
            for item in floors[:1]
        )
        if len(candidates) == 1:
            lines.append(f"{first.substrate}: {figures}{floor}")
        else:
            cheapest = "cheapest that isolates" if first.isolates else "cheapest here"
            lines.append(
                f"{cheapest}: {first.substrate}, {figures}{floor}; "
                f"next {_versus(candidates[1], first, best, by_cost)}"
            )
        if len(candidates) > 2:
            rest = ", ".join(
                f"{item.substrate} {_times(item.ratio)}{_success(item, best)}" + _noise_tag(item)
                for item in candidates[1:]
            )
            unit = "dollars" if by_cost else "worker-hours"
            lines.append(f"ranking by {unit}: {first.substrate}, then {rest}")
    lines += [
        f"{item.substrate}: {item.no_valid_result}" for item in ranking if item.no_valid_result
    ]
    return lines


def _figures(item: Ranked, by_cost: bool, *, tax: bool = True) -> str:
    """A substrate's figures, the ranking's unit first and the other beside it."""
    worker = f"{hours(item.worker_hours)} worker-hours"
    if by_cost:
        text = f"{dollars(item.dollars)} ({worker})"
    else:
        price = f" ({dollars(item.dollars)})" if item.dollars is not None else ""
        text = f"{worker}{price}"
    return f"{text} and {hours(item.tax_hours)} tax-hours" if tax else text


def _success(item: Ranked, best: float) -> str:
    """`` (75% succeeded, below the others' 100%)`` for a substrate whose rollouts partly
    failed, with the share the infrastructure failed beside it (`` (100% succeeded, 10%
    infra_failed)``); nothing when all succeeded."""
    success, infra = item.success, item.infra_failed
    if not infra and (success is None or success >= 1):
        return ""
    below = f", below the others' {best:.0%}" if success is not None and success < best else ""
    rate = "" if success is None else f"{success:.0%} succeeded{below}"
    beside = f"{share(infra)} infra_failed" if infra else ""
    return f" ({', '.join(part for part in (rate, beside) if part)})"


#: How the decision words the noise test's verdict on a difference from the cheapest.
VERDICTS = {
    RESOLVED: "beyond the noise",
    WITHIN_NOISE: "within the noise, the run cannot tell them apart",
    UNTESTED: "not tested against the noise",
}


def _times(value: float | None) -> str:
    """A ranked item's ratio to the reference; ``-`` for one without (the reference's figure
    ranks every candidate, so only a hand-edited report lacks it)."""
    return "-" if value is None else ratio(value)


def _versus(item: Ranked, cheapest: Ranked, best: float, by_cost: bool = False) -> str:
    """``docker at 5.32x the worker-hours, 31x the tax-hours: beyond the noise (...)``."""
    unit = "dollars" if by_cost else "worker-hours"
    text = f"{item.substrate} at {_times(item.ratio)} the {unit}{_success(item, best)}"
    if item.tax_hours and cheapest.tax_hours:
        text += f", {ratio(item.tax_hours / cheapest.tax_hours)} the tax-hours"
    if item.noise:
        text += f"; {VERDICTS[item.noise]}: {item.why}"
    return text


def _noise_tag(item: Ranked) -> str:
    return " (within the noise)" if item.noise == WITHIN_NOISE else ""


def header_lines(report: Report) -> list[str]:
    """What the hours are: the projection's scale, where think time came from, and (for
    replays) which command time counts."""
    projection = report.projection
    lines = [
        f"projected: {projection.rollouts:,} rollouts x {projection.steps} steps"
        f"{STEPS_FROM.get(projection.steps_source, '')}; tax = substrate overhead only",
        think_line(projection),
    ]
    if (command := command_line(report.substrates)) is not None:
        lines.append(command)
    return lines


#: Where the header says the steps per rollout came from, unless an option or the plain
#: default set them (``projection.steps_source``).
STEPS_FROM = {
    "replays": ", the replays' mean",
    "mixed": ", the default (not every rollout is a replay)",
    "workloads": ", the workloads' mean",
}


#: The header's words for environment-only worker-hours.
NO_MODEL_TIME = "worker-hours are environment time only (no model time)"


def think_line(projection: Scale) -> str:
    """Where the projection's think time came from: option, recorded, or none."""
    think = projection.think_time_s
    source = projection.think_time_source
    if source == "recorded":
        return f"think time: {seconds(think)} per step, recorded in the replayed trajectories"
    if source == "live":
        return f"think time: {seconds(think)} per step, measured live between recorded steps"
    if source == "option" and think:
        return f"think time: {seconds(think)} per step, from --rollout-think-time"
    given = "0, from --rollout-think-time" if source == "option" else "none known"
    return f"think time: {given}: {NO_MODEL_TIME}"


def command_line(substrates: dict[str, SubstrateEntry]) -> str | None:
    """Which command time the projection counts, for replays: recorded or measured."""
    recorded = [e.command for e in substrates.values() if e.command]
    if recorded:
        known = sum(c.recorded_steps for c in recorded)
        steps = sum(c.steps for c in recorded)
        return (
            f"command time: as recorded (shape replay; {known} of {steps} steps recorded it), "
            "the substrate's part of each measured step as overhead"
        )
    if any(e.divergence for e in substrates.values()):
        return "command time: as measured (exact replay)"
    return None


#: How :func:`think_time` names think time that was not given by an option.
THINK_ADJECTIVE = {"recorded": "recorded ", "live": "live "}


def think_time(think: float, source: str) -> str:
    """``2s think time``, or ``2s recorded think time`` when the trajectories recorded it."""
    return f"{seconds(think)} {THINK_ADJECTIVE.get(source, '')}think time"


def environment_lines(report: Report) -> list[str]:
    """With think time in the worker-hours, the worker-hours without it (the environment's
    alone, what the paper's worker-hours compare), cheapest first."""
    if not report.projection.think_time_s:
        return []
    substrates = report.substrates
    parts = [
        f"{name} {hours(environment_hours(substrates[name]))}"
        for name in ranked_names(report)
        if environment_hours(substrates[name]) is not None
    ]
    if not parts:
        return []
    return [f"worker-hours without think time (environment only): {', '.join(parts)}"]


def environment_hours(entry: SubstrateEntry) -> float | None:
    """A report entry's worker-hours less their think time."""
    parts = entry.projected.decomposition
    if entry.worker_hours is None or not parts:
        return None
    return entry.worker_hours - parts.think


def spread_line(report: Report) -> str | None:
    """The spread, each ratio with its own pair."""
    spread = report.spread
    if not spread:
        return None
    projection = report.projection
    think = projection.think_time_s
    return (
        f"spread: cold start p50 {ratio(spread.cold_start_p50)} "
        f"({spread.slowest} vs {spread.fastest}); "
        f"worker-hours {ratio(spread.worker_hours)} ({spread.dearest} vs {spread.cheapest})"
        + (f" at {think_time(think, projection.think_time_source)}/step" if think else "")
    )


#: How the summary names the ways an exact replay diverges.
DIVERGENCE_LABELS = {"exit_code": "exit code", "output_size": "output size"}


def divergence_lines(substrates: dict[str, SubstrateEntry]) -> list[str]:
    """Per substrate that replayed exactly: how many replayed steps diverged, and how."""
    lines = []
    for name, entry in substrates.items():
        divergence = entry.divergence
        if not divergence:
            continue
        line = (
            f"{name} exact replay: {divergence.divergent_steps} of "
            f"{divergence.replayed_steps} replayed steps diverged from the recording"
        )
        if divergence.kinds:
            kind, count = next(iter(divergence.kinds.items()))
            line += f", most often in {DIVERGENCE_LABELS.get(kind, kind)} ({count})"
        lines.append(line)
    return lines


def not_run_lines(not_run: dict[str, str]) -> list[str]:
    """Each selected substrate that ran no rollout (the report's ``not_run``), and why."""
    return [f"{name}: ran no rollout: {why}" for name, why in not_run.items()]


#: The percentiles the summary table shows, per metric (the highest first).
SHOWN_PERCENTILES = {
    "cold_start": ("p95", "p50"),
    "action": ("p95", "p50"),
    "step": ("p50",),
    "teardown": ("p50",),
}
#: How the sample-size warning names each metric's samples.
SAMPLE_LABELS = {
    "cold_start": "cold start",
    "action": "probe",
    "step": "step",
    "teardown": "teardown",
}


def few_samples_lines(substrates: dict[str, SubstrateEntry]) -> list[str]:
    """One warning listing each substrate whose shown percentiles come from too few samples,
    and what each lacks; another naming those where every rollout failed (no samples)."""
    short: dict[str, list[str]] = {}  # what is lacking: the substrates that lack it
    failed = []
    for name, entry in substrates.items():
        if not entry.cold_start:
            if entry.rollouts:
                failed.append(name)
            continue
        lacks = []
        for metric, shown in SHOWN_PERCENTILES.items():
            samples = stats.n if (stats := getattr(entry, metric)) else 0
            if not samples:
                continue  # not measured (no probes): shown as "-"
            wanted = next((q for q in shown if samples < min_samples(q)), None)
            if wanted is not None:
                lacks.append(
                    f"{samples} {SAMPLE_LABELS[metric]}{'s' if samples > 1 else ''} "
                    f"(a {wanted} needs {min_samples(wanted)})"
                )
        if lacks:
            short.setdefault(", ".join(lacks), []).append(name)
    lines = []
    if short:
        each = "; ".join(f"{', '.join(names)} {lack}" for lack, names in short.items())
        lines.append(f"warning: too few samples, run more rounds: {each}")
    if failed:
        lines.append(f"warning: every rollout failed on {', '.join(failed)}: nothing measured")
    return lines
