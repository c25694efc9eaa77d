"""One report from the reports of many shards (``python -m pytest_rollout_tax merge``).

Every rollout is kept once, stamped with its shard and client; the report is rebuilt from the
merged raw samples by ``build.summarize`` (percentiles and projections recomputed, never
averaged); burst levels are merged by epoch time (``burst.merge_levels``), so concurrency,
``ready_all_s`` and ``creates_per_s`` are fleet-wide. The result has the same schema as one
run's report, plus ``clients[]`` and ``merge``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.files import write_json
from ..core.pool_stats import PoolStats
from ..errors import MergeRefused
from ..fleet import burst
from ..fleet.burst import BurstLevel
from .aggregate import Aggregate
from .build import Fleet, summarize
from .document import Report
from .machine import CLOCK_NOTE
from .projection import Scale
from .records import Burst


@dataclass(frozen=True)
class Part:
    """One shard's report and how to name it (its file)."""

    label: str
    report: Report

    @property
    def client(self) -> dict[str, Any]:
        return self.report.client or {}

    @property
    def shard(self) -> dict[str, int] | None:
        return self.client.get("shard")

    @property
    def host(self) -> str | None:
        return self.report.machine.get("hostname_sha256")


def merge(
    parts: Sequence[Part], *, force: bool = False, failed: Mapping[int, str] | None = None
) -> Report:
    """The merged report of ``parts``; ``failed``: shards that produced no report (index ->
    error), which make the merge incomplete. Raises MergeRefused."""
    if not parts:
        raise MergeRefused("nothing to merge: no reports")
    failed = dict(failed or {})
    _check_workload(parts)
    count = _shard_count(parts, failed)
    scale = _scale(parts, force)
    aggregate = Aggregate()
    owners: dict[tuple[str, str, int], str] = {}
    for part in parts:
        _check_steps(part)
        index = part.shard["index"] if part.shard else None
        for rollout in part.report.rollouts:
            key = (rollout["substrate"], rollout.get("test", ""), rollout.get("round", 1))
            if key in owners:
                raise MergeRefused(
                    f"{part.label}: rollout {key[1] or key[0]} (round {key[2]}) is also in "
                    f"{owners[key]}: the same rollout twice (a shard given twice, or runs "
                    "that overlap)"
                )
            owners[key] = part.label
            aggregate.add({**rollout, "shard": index, "client": part.host})
    first = parts[0].report
    report = summarize(
        aggregate,
        scale,
        plugin_version=first.plugin_version,
        machine=first.machine,
        commit=first.commit,
        fleet=Fleet(
            bursts=_bursts(parts),
            pools=_pools(parts),
            workers=first.projection.fleet,
        ),
    )
    shards = {part.shard["index"] for part in parts if part.shard}
    missing = sorted(set(range(count)) - shards - set(failed)) if count else []
    aligned = any(part.client.get("start_at") for part in parts) or bool(_bursts(parts))
    report.clients = [client_entry(part) for part in parts]
    report.merge = {
        "parts": len(parts),
        "shards": count,
        "missing": missing,
        "failed": {str(index): error for index, error in sorted(failed.items())},
        "incomplete": bool(missing or failed),
        "forced": force,
        "alignment": CLOCK_NOTE if aligned else None,
    }
    return report


def client_entry(part: Part) -> dict[str, Any]:
    """A ``clients[]`` item: where one shard ran, how busy it was, its control-plane trips."""
    machine = part.report.machine
    return {
        "label": part.label,
        "shard": part.shard["index"] if part.shard else None,
        "host": part.host,
        "cpu_count": machine.get("cpu_count"),
        "ci": machine.get("ci"),
        "rollouts": len(part.report.rollouts),
        "saturation": part.client.get("saturation"),
        "start_at": part.client.get("start_at"),
        "control_plane_rtt_s": {
            name: entry.control_plane.rtt_s
            for name, entry in part.report.substrates.items()
            if entry.control_plane
        },
    }


def _check_workload(parts: Sequence[Part]) -> None:
    """Refuse parts of different workloads (or of unknown workload)."""
    first = None
    for part in parts:
        workload = part.client.get("workload") or {}
        fingerprint = workload.get("fingerprint")
        if fingerprint is None:
            raise MergeRefused(
                f"{part.label}: no workload fingerprint (not written by a run of this "
                "version): cannot tell it ran the same workload"
            )
        if first is None:
            first = (part.label, fingerprint)
        elif fingerprint != first[1]:
            raise MergeRefused(
                f"{part.label}: a different workload than {first[0]} (fingerprint "
                f"{fingerprint[:19]} vs {first[1][:19]}: other tests, marker arguments or "
                "plugin version)"
            )


def _shard_count(parts: Sequence[Part], failed: Mapping[int, str]) -> int | None:
    """The N of the parts' ``K/N`` (all sharded alike, or none), None: unsharded runs."""
    counts = {part.shard["count"] if part.shard else None for part in parts}
    if len(counts) > 1:
        described = ", ".join(
            f"{p.label} ({'shard {index}/{count}'.format(**p.shard) if p.shard else 'unsharded'})"
            for p in parts
        )
        raise MergeRefused(f"different shard counts: {described}")
    count = counts.pop()
    if count is None and failed:
        raise MergeRefused("failed shards given for runs that are not sharded")
    return count


def _scale(parts: Sequence[Part], force: bool) -> Scale:
    """The projection the parts were configured with (the first's when forced): each shard's
    settings as its options asked them (:func:`_configured`)."""
    chosen: tuple[str, Scale] | None = None
    for part in parts:
        scale = _configured(part)
        if chosen is None:
            chosen = (part.label, scale)
        elif scale != chosen[1] and not force:
            first = chosen[1].to_dict()
            differ = ", ".join(k for k, v in scale.to_dict().items() if v != first[k])
            raise MergeRefused(
                f"{part.label}: different projection settings than {chosen[0]} ({differ}); "
                "--force merges them at the first's"
            )
    assert chosen is not None  # merge() refuses no parts
    return chosen[1]


def _configured(part: Part) -> Scale:
    """The projection settings a shard's options asked: its ``client.projection`` (before its
    workloads set the steps), its report's where it has none, and its report's ranking where
    an older shard did not keep it there; the fleet is the first part's (:func:`merge`)."""
    report = part.report.projection
    configured = part.client.get("projection")
    scale = Scale.from_dict({"rank_by": report.rank_by} | configured) if configured else report
    return dataclasses.replace(scale, fleet=None)


def _check_steps(part: Part) -> None:
    """Refuse a report whose rollouts lack the step times its summary counted."""
    counted = sum(entry.step.n for entry in part.report.substrates.values() if entry.step)
    carried = 0
    for rollout in part.report.rollouts:
        steps: object = rollout.get("steps") or {}  # JSON: columns, or an older run's list
        if isinstance(steps, dict):
            steps = steps.get("wall_us", steps.get("wall_s", ()))
        carried += len(steps) if isinstance(steps, Sized) else 0
    if carried < counted:
        raise MergeRefused(
            f"{part.label}: its rollouts carry {carried} of the {counted} step times it "
            "counted (written with --rollout-json-steps none): merge saved runs or full reports"
        )


def _bursts(parts: Sequence[Part]) -> dict[str, list[BurstLevel]]:
    """Every substrate's burst levels, each merged over the parts that ran it."""
    by_name: dict[str, list[tuple[str, list[Burst]]]] = {}
    for part in parts:
        for name, entry in part.report.substrates.items():
            if entry.burst:
                by_name.setdefault(name, []).append((part.label, entry.burst))
    merged = {}
    for name, runs in by_name.items():
        levels = [level.concurrency for level in runs[0][1]]
        for label, run in runs[1:]:
            if [level.concurrency for level in run] != levels:
                raise MergeRefused(
                    f"{label}: {name} burst levels {[lv.concurrency for lv in run]} differ "
                    f"from {runs[0][0]}'s {levels}"
                )
        try:
            merged[name] = [
                burst.merge_levels([run[index].level() for _, run in runs])
                for index in range(len(levels))
            ]
        except ValueError as exc:
            raise MergeRefused(f"{name}: {exc}") from None
    return merged


def _pools(parts: Sequence[Part]) -> dict[str, PoolStats]:
    """Every substrate's warm pools, merged over the parts."""
    records: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        for name, entry in part.report.substrates.items():
            pool = entry.pool
            if pool:
                if pool.creation_s is None:
                    raise MergeRefused(
                        f"{part.label}: {name}'s warm pool has no raw creation times (written "
                        "by an older version)"
                    )
                records.setdefault(name, []).append(pool.to_dict())
    return {name: PoolStats.merge(found) for name, found in records.items()}


def write(
    parts: Sequence[Part],
    path: str,
    *,
    force: bool = False,
    failed: Mapping[int, str] | None = None,
) -> tuple[Report, Path]:
    """Merge ``parts`` and write the report to ``path``; the report and where it went."""
    report = merge(parts, force=force, failed=failed)
    return report, write_json(path, report.to_dict())
