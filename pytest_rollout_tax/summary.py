"""Aggregate rollout records into the ``rollout-tax/1`` report (README, "The JSON report")."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Iterable

from .aggregate import GATE_COLUMNS, STEP_CHOICES, Aggregate, RolloutRows, Row, Samples
from .projection import Scale, decompose, spread, tax_hours, worker_hours
from .record import FAILED_OUTCOMES, STEP_COLUMNS, Rollout
from .stats import Stats

SCHEMA = "rollout-tax/1"


def summarize_substrate(rows: list[Row], samples: Samples, scale: Scale) -> dict:
    """One ``substrates[NAME]`` entry of the report, from its rows in report order."""
    cold = Stats.of(samples.cold_start)
    action = Stats.of(samples.action)
    step = Stats.of(samples.step)
    teardown = Stats.of(samples.teardown)
    idle_s = 0.0  # a warm pool's idle sandbox-seconds per rollout: none without a pool
    hours = project_worker_hours(scale, cold, step, teardown, idle_s=idle_s)
    records = [row.fields for row in rows]
    phase_names = dict.fromkeys(name for r in records for name in r["phases"])
    failed = [r for r in records if r["outcome"] in FAILED_OUTCOMES]
    prices = [r["price_per_hour"] for r in records if r["price_per_hour"] is not None]
    price = prices[-1] if prices else None
    entry = {
        "kind": _most_common(r["kind"] for r in records),
        "transport": _most_common(r["transport"] for r in records),
        "rollouts": samples.rollouts,
        "failures": samples.failures,
        "failure_reasons": dict(Counter(r["error"] or r["outcome"] for r in failed).most_common()),
        "cold_start": _dict(cold),
        "action": _dict(action),
        "step": _dict(step),
        "teardown": _dict(teardown),
        "trajectory": _dict(Stats.of(samples.trajectory)),
        "phases": {name: _dict(Stats.of(samples.phases[name])) for name in phase_names},
        "worker_hours": hours,
        "tax_hours": project_tax_hours(scale, cold, action, teardown, step=step, idle_s=idle_s),
        "decomposition": project_decomposition(scale, cold, action, step, teardown, idle_s=idle_s),
    }
    if price is not None:  # optional keys: only substrates that know their price have them
        entry["price_per_hour"] = price
        entry["cost_usd"] = hours * price if hours is not None else None
    return entry


def project_worker_hours(
    scale: Scale,
    cold: Stats | None,
    step: Stats | None,
    teardown: Stats | None,
    *,
    idle_s: float = 0.0,
) -> float | None:
    """Projected worker-hours from the means, or None without a cold start and steps."""
    if cold is None or step is None:
        return None
    return worker_hours(
        scale,
        cold_start_s=cold.mean,
        step_s=step.mean,
        teardown_s=teardown.mean if teardown else 0.0,
        idle_s=idle_s,
    )


def project_tax_hours(
    scale: Scale,
    cold: Stats | None,
    action: Stats | None,
    teardown: Stats | None,
    *,
    step: Stats | None,
    idle_s: float = 0.0,
) -> float | None:
    """Projected tax-hours from the means (the per-step tax capped at the mean step), or None
    without a cold start and probes."""
    if cold is None or action is None:
        return None
    return tax_hours(
        scale,
        cold_start_s=cold.mean,
        action_s=action.mean,
        teardown_s=teardown.mean if teardown else 0.0,
        step_s=step.mean if step else None,
        idle_s=idle_s,
    )


def project_decomposition(
    scale: Scale,
    cold: Stats | None,
    action: Stats | None,
    step: Stats | None,
    teardown: Stats | None,
    *,
    idle_s: float = 0.0,
) -> dict[str, float] | None:
    """The report's ``decomposition`` (hours by part, adding up to the worker-hours), or None
    without a cold start, probes and steps."""
    if cold is None or action is None or step is None:
        return None
    return decompose(
        scale,
        cold_start_s=cold.mean,
        action_s=action.mean,
        step_s=step.mean,
        teardown_s=teardown.mean if teardown else 0.0,
        idle_s=idle_s,
    ).to_dict()


def build_report(
    rollouts: Iterable[Rollout],
    scale: Scale,
    *,
    plugin_version: str,
    machine: dict,
    commit: dict | None,
) -> dict:
    """The whole report of ``rollouts`` as plain JSON values (``rollouts[]`` a list)."""
    report = summarize(
        Aggregate.of(rollouts),
        scale,
        plugin_version=plugin_version,
        machine=machine,
        commit=commit,
    )
    return {**report, "rollouts": list(report["rollouts"])}


def summarize(
    aggregate: Aggregate,
    scale: Scale,
    *,
    plugin_version: str,
    machine: dict,
    commit: dict | None,
    steps: str = "all",
) -> dict:
    """The whole report: per-substrate summaries, the spread, and every rollout's raw samples.

    ``rollouts[]`` is made item by item on demand; ``steps`` (``all`` or ``none``) chooses the
    step columns its items carry.
    """
    recorded = aggregate.sorted_rows()
    scale = resolve_steps(scale, recorded)
    by_substrate: dict[str, list[Row]] = {}
    for row in recorded:
        by_substrate.setdefault(row.fields["substrate"], []).append(row)
    substrates = {
        name: summarize_substrate(group, aggregate.samples[name], scale)
        for name, group in sorted(by_substrate.items())
    }
    return {
        "schema": SCHEMA,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "plugin_version": plugin_version,
        "machine": machine,
        "commit": commit,
        "projection": {
            "rollouts": scale.rollouts,
            "steps": scale.steps,
            "think_time_s": scale.think_time_s,
        },
        "substrates": substrates,
        "spread": spread_of(substrates),
        "rollouts": RolloutRows(recorded, STEP_CHOICES[steps]),
    }


def for_saving(report: dict) -> dict:
    """``report`` as a saved run keeps it: step wall times at least, for the gate's noise test."""
    rows = report["rollouts"]
    columns = dict.fromkeys((*GATE_COLUMNS, *rows.columns))
    return {**report, "rollouts": rows.keeping([c for c in STEP_COLUMNS if c in columns])}


def resolve_steps(scale: Scale, rows: list[Row]) -> Scale:
    """``scale`` with its steps fixed: when unset, the mean declared (or observed) length.

    Rollouts whose sandbox never started made no steps and say nothing about the length.
    """
    if scale.steps is not None:
        return scale
    lengths = [
        r.fields["planned_steps"] or len(r.wall_s)
        for r in rows
        if r.fields["cold_start_s"] is not None
    ]
    steps = max(1, round(sum(lengths) / len(lengths))) if lengths else Scale.steps
    return dataclasses.replace(scale, steps=steps)


def spread_of(substrates: dict[str, dict]) -> dict | None:
    """The report's ``spread`` entry from its ``substrates`` entries."""
    result = spread(
        {n: s["cold_start"]["p50"] for n, s in substrates.items() if s["cold_start"]},
        {n: s["worker_hours"] for n, s in substrates.items() if s["worker_hours"] is not None},
    )
    return result.to_dict() if result else None


def _most_common(values: Iterable[str]) -> str | None:
    """The most common non-empty value (None for records from before it was recorded)."""
    counted = Counter(value for value in values if value)
    return counted.most_common(1)[0][0] if counted else None


def _dict(stats: Stats | None) -> dict | None:
    return stats.to_dict() if stats else None
