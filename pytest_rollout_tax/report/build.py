"""Aggregate rollout records into the ``rollout-tax/2`` report (docs/json.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.control_plane import ControlPlane
from ..core.infra import INFRA_OUTCOMES
from ..core.pool_stats import PoolStats
from ..core.price import Rate
from ..core.record import FAILED_OUTCOMES, STEP_COLUMNS, UNBOUND
from ..core.stats import Stats
from ..core.substrate import RESET_PHASE
from ..fleet.burst import BurstLevel
from . import isolation
from .aggregate import GATE_COLUMNS, STEP_CHOICES, Aggregate, RolloutRows, Row, Samples
from .document import Report, SubstrateEntry
from .projection import Scale, project, step_overhead
from .ranking import rank, rollout_units
from .records import Burst, Command, Divergence, InfraFailed, LaunchType, Pool, RateLimited


@dataclass(frozen=True)
class Fleet:
    """What a session measured beyond its rollouts: bursts and warm pools, by substrate, and
    the fleet size to project for (``--rollout-fleet``)."""

    #: Burst levels, by substrate name.
    bursts: dict[str, list[BurstLevel]] = field(default_factory=dict)
    #: Warm pools' stats, by substrate name (xdist: merged over the workers' pools).
    pools: dict[str, PoolStats] = field(default_factory=dict)
    #: Concurrent workers to project wall-clock hours for, or None.
    workers: int | None = None


def summarize_substrate(
    rows: list[Row], samples: Samples, fleet: Fleet | None = None, name: str = ""
) -> SubstrateEntry:
    """One substrate's entry of the report, from its rows in report order: what was measured,
    not yet projected (:func:`summarize` projects it)."""
    fleet = fleet or Fleet()
    action = Stats.of(samples.action)
    step = Stats.of(samples.step)
    records = [row.fields for row in rows]
    phase_names = dict.fromkeys(name for r in records for name in r["phases"])
    failed = [r for r in records if r["outcome"] in FAILED_OUTCOMES]
    prices = [r["price_per_hour"] for r in records if r["price_per_hour"] is not None]
    rates = [Rate.from_dict(r["rate"]) for r in records if r.get("rate")]
    limited = [r for r in records if r["outcome"] == "rate_limited"]
    return SubstrateEntry(
        kind=_most_common(r["kind"] for r in records),
        transport=_most_common(r["transport"] for r in records),
        rollouts=samples.rollouts,
        failures=samples.failures,
        failure_reasons=dict(Counter(r["error"] or r["outcome"] for r in failed).most_common()),
        cold_start=Stats.of(samples.cold_start),
        action=action,
        step=step,
        teardown=Stats.of(samples.teardown),
        trajectory=Stats.of(samples.trajectory),
        think=Stats.of(samples.think),
        phases={name: Stats.of(samples.phases[name]) for name in phase_names},
        unbound=sum(r["outcome"] == UNBOUND for r in records) or None,  # k8s claims
        runtime=_most_common(r.get("runtime") for r in records),  # gVisor: release, platform
        runtime_release=_most_common(r.get("runtime_release") for r in records),
        runtime_platform=_most_common(r.get("runtime_platform") for r in records),
        snapshot=any(r.get("snapshot") for r in records),
        launch_types=launch_types(records) or None,  # k8s claims, warm or cold
        command=recorded_command(samples, action, step),  # a shape replay's command time
        divergence=divergence_of(samples),
        # creates the provider's limiter refused, not failures
        rate_limited=RateLimited(
            rollouts=len(limited),
            messages=dict(Counter(r["error"] or "HTTP 429" for r in limited)),
        )
        if limited
        else None,
        burst=[Burst.of(level) for level in fleet.bursts[name]] if fleet.bursts.get(name) else None,
        pool=Pool.of(fleet.pools[name]) if name in fleet.pools else None,
        price_per_hour=prices[-1] if prices else None,
        rate=rates[-1] if rates else None,
        infra_failed=infra_failed(records, samples.rollouts),
    )


def infra_failed(records: list[dict[str, Any]], rollouts: int) -> InfraFailed | None:
    """The ``infra_failed`` entry: the rollouts the infrastructure failed, by cause and reason
    (a rate-limited create's cause is ``rate_limited``); None when it failed none."""
    failed = [r for r in records if r["outcome"] in INFRA_OUTCOMES]
    if not failed:
        return None
    causes = Counter(r.get("infra_cause") or r["outcome"] for r in failed)
    reasons = Counter(r["error"] or r["outcome"] for r in failed)
    return InfraFailed(
        rollouts=len(failed),
        rate=len(failed) / rollouts if rollouts else 0.0,
        causes=dict(causes.most_common()),
        reasons=dict(reasons.most_common()),
    )


def launch_types(records: list[dict[str, Any]]) -> dict[str, LaunchType]:
    """The cold start of claimed sandboxes by the launch type their controller reported:
    each type's rollouts, share of the typed rollouts and cold-start stats."""
    typed: dict[str, list[float]] = {}
    for record in records:
        if record.get("launch_type") and record["cold_start_s"] is not None:
            typed.setdefault(record["launch_type"], []).append(record["cold_start_s"])
    total = sum(len(times) for times in typed.values())
    return {
        kind: LaunchType(rollouts=len(times), share=len(times) / total, cold_start=Stats.of(times))
        for kind, times in sorted(typed.items(), key=lambda item: item[0] != "warm")
    }


def recorded_command(samples: Samples, action: Stats | None, step: Stats | None) -> Command | None:
    """The ``command`` entry of a substrate whose shape-replayed steps recorded their command
    time: the command time per step the projection counts (recorded where the recording has
    it, else the measured step less its overhead), or None (the measured steps count)."""
    if not samples.recorded or step is None:
        return None
    overhead = step_overhead(action.mean, step.mean) if action else step.mean
    known = len(samples.recorded)
    unknown = math.fsum(samples.step) - math.fsum(samples.recorded_walls)
    rest = max(unknown - (step.n - known) * overhead, 0.0)
    return Command(
        mean_s=(math.fsum(samples.recorded) + rest) / step.n, recorded_steps=known, steps=step.n
    )


def divergence_of(samples: Samples) -> Divergence | None:
    """The ``divergence`` entry of a substrate that replayed exactly, else None."""
    if not samples.replayed_steps:
        return None
    return Divergence(
        replayed_steps=samples.replayed_steps,
        divergent_steps=samples.divergent_steps,
        kinds={kind: n for kind, n in samples.divergence.most_common() if n},
    )


def summarize(
    aggregate: Aggregate,
    scale: Scale,
    *,
    plugin_version: str,
    machine: dict[str, Any],
    commit: dict[str, Any] | None,
    steps: str = "all",
    fleet: Fleet | None = None,
    control_planes: dict[str, ControlPlane] | None = None,
    client: dict[str, Any] | None = None,
    not_run: dict[str, str] | None = None,
) -> Report:
    """The whole report: per-substrate summaries, the spread, the ranking, and every rollout's
    raw samples.

    ``rollouts[]`` is made item by item on demand; ``steps`` (``all`` or ``none``) chooses the
    step columns its items carry. ``control_planes`` (per substrate) go
    into the substrates' entries; ``client`` (shard, workload, saturation) is the report's
    ``client``; ``not_run``: selected substrates that ran no rollout, and why.
    """
    recorded = aggregate.sorted_rows()
    scale = dataclasses.replace(
        resolve_steps(scale, recorded), fleet=fleet.workers if fleet else None
    )
    by_substrate: dict[str, list[Row]] = {}
    for row in recorded:
        by_substrate.setdefault(row.fields["substrate"], []).append(row)
    substrates = {
        name: summarize_substrate(group, aggregate.samples[name], fleet, name)
        for name, group in sorted(by_substrate.items())
    }
    isolation.measure(substrates, by_substrate)
    for entry in substrates.values():
        entry.projected = project(entry.means(), scale)
    think = Stats.of([value for s in aggregate.samples.values() for value in s.think])
    scale = scale.with_recorded_think(think.mean if think else None)
    for name, plane in (control_planes or {}).items():
        if name in substrates:
            substrates[name].control_plane = plane
    return Report(
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        plugin_version=plugin_version,
        machine=machine,
        commit=commit,
        client=client,
        projection=scale,
        substrates=substrates,
        ranking=rank(substrates, rollout_units(_unit_rows(recorded), scale), scale),
        not_run=dict(not_run or {}),
        shared_sandboxes=shared_sandboxes(recorded),
        rollouts=RolloutRows(recorded, STEP_CHOICES[steps]),
    )


def for_saving(report: Report) -> Report:
    """``report`` as a saved run keeps it: step wall times at least, for the gate's noise test."""
    rows = report.rollouts
    if not isinstance(rows, RolloutRows):  # a report read back from JSON keeps what it has
        return report
    columns = dict.fromkeys((*GATE_COLUMNS, *rows.columns))
    kept = rows.keeping([c for c in STEP_COLUMNS if c in columns])
    return dataclasses.replace(report, rollouts=kept)


def resolve_steps(scale: Scale, rows: list[Row]) -> Scale:
    """``scale`` with its steps fixed: when unset, the mean declared (or observed) length; when
    not given, the replays' mean recorded length if every rollout replayed a trajectory, or the
    markers' mean ``steps`` if every rollout's marker declared them.

    Rollouts whose sandbox never started made no steps and say nothing about the length; a
    replay's recorded length is known whether or not its sandbox started.
    """
    replays = [r.fields["replay"]["recorded_steps"] for r in rows if r.fields.get("replay")]
    scale = scale.with_replay_steps(replays, len(rows) - len(replays))
    declared = [r.fields["planned_steps"] for r in rows]
    if scale.steps_source == "default" and rows and not replays and None not in declared:
        # no option set the steps, and every rollout's marker declared the length it stands for
        steps = max(1, round(sum(declared) / len(declared)))
        return dataclasses.replace(scale, steps=steps, steps_source="workloads")
    if scale.steps is not None:
        return scale
    lengths = [
        r.fields["planned_steps"] or len(r.wall_us)
        for r in rows
        if r.fields["cold_start_s"] is not None
    ]
    steps = max(1, round(sum(lengths) / len(lengths))) if lengths else Scale.steps
    return dataclasses.replace(scale, steps=steps)


def _unit_rows(rows: list[Row]) -> Iterable[tuple[str, float | None, list[float], float | None]]:
    """Each row as ``ranking.rollout_units`` takes it: substrate, cold start, step walls (s),
    teardown."""
    for row in rows:
        fields = row.fields
        yield fields["substrate"], fields["cold_start_s"], row.walls_s, fields["teardown_s"]


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


def shared_sandboxes(rows: list[Row]) -> list[dict[str, Any]]:
    """Every sandbox more than one rollout got (an error: a sandbox serves one rollout, but
    for those it served after a reset, ``reuse="reset"``)."""
    users: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        sandbox_id = row.fields.get("sandbox_id")
        if sandbox_id and RESET_PHASE not in (row.fields.get("phases") or {}):
            name = row.fields["test"]  # the test id already names its substrate and round
            users.setdefault((row.fields["substrate"], sandbox_id), []).append(name)
    return [
        {"substrate": substrate, "sandbox_id": sandbox_id, "rollouts": names}
        for (substrate, sandbox_id), names in users.items()
        if len(names) > 1
    ]


def _most_common(values: Iterable[str | None]) -> str | None:
    """The most common non-empty value (None for records from before it was recorded)."""
    counted = Counter(value for value in values if value)
    return counted.most_common(1)[0][0] if counted else None
