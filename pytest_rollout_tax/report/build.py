"""Aggregate rollout records into the ``rollout-tax/2`` report (docs/json.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..core.record import FAILED_OUTCOMES, MICROSECONDS, STEP_COLUMNS
from ..core.stats import Stats
from ..fleet import burst
from ..fleet.pool import PoolStats, entry_idle_per_claim
from . import isolation
from .aggregate import GATE_COLUMNS, STEP_CHOICES, Aggregate, RolloutRows, Row, Samples
from .projection import (
    Scale,
    decompose,
    fleet_hours,
    projected_step,
    rollout_seconds,
    spread,
    step_overhead,
    tax_hours,
    worker_hours,
)
from .ranking import rank, rollout_units
from .schema import SCHEMA


@dataclass(frozen=True)
class Fleet:
    """What a session measured beyond its rollouts: bursts and warm pools, by substrate, and
    the fleet size to project for (``--rollout-fleet``)."""

    #: ``burst.BurstLevel.to_dict()`` items, by substrate name.
    bursts: dict[str, list[dict]] = field(default_factory=dict)
    #: Warm pools' stats, by substrate name (xdist: merged over the workers' pools).
    pools: dict[str, PoolStats] = field(default_factory=dict)
    #: Concurrent workers to project wall-clock hours for, or None.
    workers: int | None = None


def summarize_substrate(
    rows: list[Row], samples: Samples, scale: Scale, fleet: Fleet | None = None, name: str = ""
) -> dict:
    """One ``substrates[NAME]`` entry of the report, from its rows in report order."""
    fleet = fleet or Fleet()
    cold = Stats.of(samples.cold_start)
    action = Stats.of(samples.action)
    step = Stats.of(samples.step)
    teardown = Stats.of(samples.teardown)
    think = Stats.of(samples.think)
    scale = scale.with_recorded_think(think.mean if think else None)
    pool = fleet.pools.get(name)
    idle_s = pool.idle_per_claim_s if pool else 0.0  # a warm pool's idle sandbox-s per rollout
    command = recorded_command(samples, action, step)
    command_s = command["mean_s"] if command else None
    step_s = projected_step_of(action, step, command_s)
    hours = project_worker_hours(scale, cold, step, teardown, idle_s=idle_s, step_s=step_s)
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
        "think": _dict(think),
        "phases": {name: _dict(Stats.of(samples.phases[name])) for name in phase_names},
        "worker_hours": hours,
        "tax_hours": project_tax_hours(scale, cold, action, teardown, step=step, idle_s=idle_s),
        "decomposition": project_decomposition(
            scale, cold, action, step, teardown, idle_s=idle_s, command_s=command_s
        ),
    }
    if (runtime := _most_common(r.get("runtime") for r in records)) is not None:
        entry["runtime"] = runtime  # optional keys: substrates with a runtime, snapshots
    if any(r.get("snapshot") for r in records):
        entry["snapshot"] = True
    if command is not None:  # optional: a shape replay's recorded command time
        entry["command"] = command
    if (divergence := divergence_of(samples)) is not None:
        entry["divergence"] = divergence
    if name in fleet.bursts:
        entry["burst"] = fleet.bursts[name]
    if pool is not None:
        entry["pool"] = pool.to_dict()
    if fleet.workers is not None:
        entry["fleet"] = project_fleet(entry, scale, fleet.workers)
    if price is not None:  # optional keys: only substrates that know their price have them
        entry["price_per_hour"] = price
        entry["cost_usd"] = hours * price if hours is not None else None
    return entry


def recorded_command(samples: Samples, action: Stats | None, step: Stats | None) -> dict | None:
    """The ``command`` entry of a substrate whose shape-replayed steps recorded their command
    time: the command time per step the projection counts (recorded where the recording has
    it, else the measured step less its overhead), or None (the measured steps count)."""
    if not samples.recorded or step is None:
        return None
    overhead = step_overhead(action.mean, step.mean) if action else step.mean
    known = len(samples.recorded)
    unknown = math.fsum(samples.step) - math.fsum(samples.recorded_walls)
    rest = max(unknown - (step.n - known) * overhead, 0.0)
    return {
        "source": "recorded",
        "mean_s": (math.fsum(samples.recorded) + rest) / step.n,
        "recorded_steps": known,
        "steps": step.n,
    }


def projected_step_of(
    action: Stats | None, step: Stats | None, command_s: float | None
) -> float | None:
    """The step time projected (``projection.projected_step``), or None without steps."""
    if step is None:
        return None
    if command_s is not None and action is None:
        return step.mean + command_s  # no probe: the whole measured step is the overhead
    return projected_step(action.mean if action else 0.0, step.mean, command_s)


def entry_step_s(entry: dict) -> float | None:
    """A report entry's projected step time (its recorded command time, if it has one)."""
    if not entry.get("step"):
        return None
    command = entry.get("command")
    action = Stats.from_dict(entry["action"]) if entry.get("action") else None
    return projected_step_of(
        action, Stats.from_dict(entry["step"]), command["mean_s"] if command else None
    )


def divergence_of(samples: Samples) -> dict | None:
    """The ``divergence`` entry of a substrate that replayed exactly, else None."""
    if not samples.replayed_steps:
        return None
    return {
        "replayed_steps": samples.replayed_steps,
        "divergent_steps": samples.divergent_steps,
        "kinds": {kind: n for kind, n in samples.divergence.most_common() if n},
    }


def project_worker_hours(
    scale: Scale,
    cold: Stats | None,
    step: Stats | None,
    teardown: Stats | None,
    *,
    idle_s: float = 0.0,
    step_s: float | None = None,
) -> float | None:
    """Projected worker-hours from the means (plus a warm pool's idle time per rollout), or
    None without a cold start and steps; ``step_s``: the projected step time, when it is not
    the measured mean (:func:`projected_step_of`)."""
    if cold is None or step is None:
        return None
    return worker_hours(
        scale,
        cold_start_s=cold.mean,
        step_s=step.mean if step_s is None else step_s,
        teardown_s=teardown.mean if teardown else 0.0,
        idle_s=idle_s,
    )


def project_fleet(entry: dict, scale: Scale, workers: int) -> dict | None:
    """The ``fleet`` entry: wall-clock hours and worker-hours of N rollouts on ``workers``
    concurrent workers, from a report entry's means, or None without a cold start and steps.

    The cold start is the claim with a warm pool (whose idle time per rollout adds worker-hours,
    not wall-clock time), else the measured burst level nearest to ``workers``, else the
    rollouts' own.
    """
    if not entry.get("cold_start") or not entry.get("step"):
        return None
    idle = entry_idle_per_claim(entry)
    level = None if entry.get("pool") else burst.nearest(entry.get("burst") or [], workers)
    if entry.get("pool"):
        source = f"warm pool claims (pool={entry['pool']['size']}), with its idle time"
    elif level is not None:
        source = f"burst level {level['concurrency']}"
    else:
        source = "rollouts (no burst measured)"
    cold = (level or entry)["cold_start"]["mean"]
    teardown = entry["teardown"]["mean"] if entry.get("teardown") else 0.0
    per_rollout = rollout_seconds(
        scale, cold_start_s=cold, step_s=entry_step_s(entry), teardown_s=teardown
    )
    wall, hours = fleet_hours(scale, workers, per_rollout, idle)
    return {
        "workers": workers,
        "cold_start_from": source,
        "burst_level": level["concurrency"] if level else None,
        "cold_start_s": cold,
        "idle_s": idle,
        "wall_clock_hours": wall,
        "worker_hours": hours,
    }


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
    command_s: float | None = None,
) -> dict[str, float] | None:
    """The report's ``decomposition`` (hours by part, adding up to the worker-hours), or None
    without a cold start, probes and steps; ``command_s``: a recorded command time per step."""
    if cold is None or action is None or step is None:
        return None
    return decompose(
        scale,
        cold_start_s=cold.mean,
        action_s=action.mean,
        step_s=step.mean,
        teardown_s=teardown.mean if teardown else 0.0,
        idle_s=idle_s,
        command_s=command_s,
    ).to_dict()


def summarize(
    aggregate: Aggregate,
    scale: Scale,
    *,
    plugin_version: str,
    machine: dict,
    commit: dict | None,
    steps: str = "all",
    fleet: Fleet | None = None,
    control_planes: dict[str, dict] | None = None,
    client: dict | None = None,
    not_run: dict[str, str] | None = None,
) -> dict:
    """The whole report: per-substrate summaries, the spread, the ranking, and every rollout's
    raw samples.

    ``rollouts[]`` is made item by item on demand; ``steps`` (``all`` or ``none``) chooses the
    step columns its items carry. ``control_planes`` (per substrate, ``ControlPlane.to_dict()``)
    go into the substrates' entries; ``client`` (shard, workload, saturation) is the report's
    ``client``; ``not_run``: selected substrates that ran no rollout, and why.
    """
    recorded = aggregate.sorted_rows()
    scale = resolve_steps(scale, recorded)
    by_substrate: dict[str, list[Row]] = {}
    for row in recorded:
        by_substrate.setdefault(row.fields["substrate"], []).append(row)
    substrates = {
        name: summarize_substrate(group, aggregate.samples[name], scale, fleet, name)
        for name, group in sorted(by_substrate.items())
    }
    isolation.apply(substrates, by_substrate, scale)
    think = Stats.of([value for s in aggregate.samples.values() for value in s.think])
    scale = scale.with_recorded_think(think.mean if think else None)
    for name, plane in (control_planes or {}).items():
        if name in substrates:
            substrates[name]["control_plane"] = plane
    return {
        "schema": SCHEMA,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "plugin_version": plugin_version,
        "machine": machine,
        "commit": commit,
        "client": client,
        "projection": {
            "rollouts": scale.rollouts,
            "steps": scale.steps,
            "think_time_s": scale.think_time_s,
            "think_time_source": scale.think_time_source,
            "fleet": fleet.workers if fleet else None,
        },
        "substrates": substrates,
        "spread": spread_of(substrates),
        "ranking": rank(substrates, rollout_units(_unit_rows(recorded), scale), scale),
        "not_run": dict(not_run or {}),
        "shared_sandboxes": shared_sandboxes(recorded),
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
        r.fields["planned_steps"] or len(r.wall_us)
        for r in rows
        if r.fields["cold_start_s"] is not None
    ]
    steps = max(1, round(sum(lengths) / len(lengths))) if lengths else Scale.steps
    return dataclasses.replace(scale, steps=steps)


def spread_of(substrates: dict[str, dict]) -> dict | None:
    """The report's ``spread`` entry from its ``substrates`` entries: the cold-start pair
    (``fastest``, ``slowest``) and the worker-hours pair (``cheapest``, ``dearest``)."""
    result = spread(
        {n: s["cold_start"]["p50"] for n, s in substrates.items() if s["cold_start"]},
        {n: s["worker_hours"] for n, s in substrates.items() if s["worker_hours"] is not None},
    )
    return result.to_dict() if result else None


def _unit_rows(rows: list[Row]) -> Iterable[tuple[str, float | None, list[float], float | None]]:
    """Each row as ``ranking.rollout_units`` takes it: substrate, cold start, step walls (s),
    teardown."""
    for row in rows:
        fields = row.fields
        walls = [wall / MICROSECONDS for wall in row.wall_us]
        yield fields["substrate"], fields["cold_start_s"], walls, fields["teardown_s"]


def absent(
    selected: Iterable[str], measured: Iterable[str], why: Callable[[str], str | None]
) -> dict[str, str]:
    """The report's ``not_run``: each selected substrate with no rollout, and why (``why``'s
    answer, else that no collected test ran on it)."""
    ran = set(measured)
    return {name: why(name) or NO_TEST_REASON for name in selected if name not in ran}


#: Why a selected substrate that could start sandboxes ran none.
NO_TEST_REASON = (
    "no rollout ran on it (no selected test runs there: the trajectory marker's substrates=, "
    "-k or --deselect)"
)


def shared_sandboxes(rows: list[Row]) -> list[dict]:
    """Every sandbox more than one rollout got (an error: a sandbox serves one rollout)."""
    users: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        sandbox_id = row.fields.get("sandbox_id")
        if sandbox_id:
            name = row.fields["test"]  # the test id already names its substrate and round
            users.setdefault((row.fields["substrate"], sandbox_id), []).append(name)
    return [
        {"substrate": substrate, "sandbox_id": sandbox_id, "rollouts": names}
        for (substrate, sandbox_id), names in users.items()
        if len(names) > 1
    ]


def _most_common(values: Iterable[str]) -> str | None:
    """The most common non-empty value (None for records from before it was recorded)."""
    counted = Counter(value for value in values if value)
    return counted.most_common(1)[0][0] if counted else None


def _dict(stats: Stats | None) -> dict | None:
    return stats.to_dict() if stats else None
