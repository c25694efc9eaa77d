"""One run's figures for one substrate (a ``Side`` of a comparison), from a saved report."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.record import step_walls
from ..core.stats import Stats
from ..fleet.pool import entry_idle_per_claim
from .build import (
    entry_step_s,
    project_decomposition,
    project_fleet,
    project_tax_hours,
    project_worker_hours,
    spread_of,
)
from .projection import Scale
from .ranking import rank, report_units
from .schema import SAMPLE_METRICS


@dataclass(frozen=True)
class Side:
    """A substrate's STATS, its worker-hours (at a common scale) and raw samples, in one run."""

    stats: dict[str, dict | None]
    worker_hours: float | None
    #: Each rollout's raw samples, per metric: the noise test's unit is the rollout.
    rollouts: tuple[dict[str, Sequence[float]], ...] = ()
    #: Steps per rollout in the projection: a rollout's worker time for ``worker_hours``.
    steps: int = 0

    def value(self, metric: str, stat: str) -> float | None:
        if metric == "worker_hours":
            return self.worker_hours
        stats = self.stats.get(metric)
        return stats[stat] if stats else None

    def pooled(self, metric: str) -> list[float]:
        """Every raw sample of ``metric``, all rollouts together (what an ECDF draws)."""
        return [value for rollout in self.rollouts for value in rollout.get(metric, ())]

    def units(self, metric: str, stat: str) -> list[float]:
        """The noise test's samples: one figure per rollout that has one.

        A metric measured once per rollout gives that sample; ``action`` and ``step`` give the
        check's STAT over the rollout's own samples (they share a sandbox, so they are not
        independent); ``worker_hours`` gives the rollout's projected worker time.
        """
        figures = []
        for rollout in self.rollouts:
            if metric == "worker_hours":
                cold, steps = rollout.get("cold_start"), rollout.get("step")
                if cold and steps:
                    mean_step = math.fsum(steps) / len(steps)
                    teardown = sum(rollout.get("teardown", ()))
                    figures.append(cold[0] + self.steps * mean_step + teardown)
            elif len(values := rollout.get(metric, ())) > 1:
                figures.append(getattr(Stats.of(values), stat))
            elif values:
                figures.append(values[0])
        return figures

    @classmethod
    def of(cls, rollouts: Sequence[dict[str, Sequence[float]]], scale: Scale) -> Side:
        """The side ``rollouts`` (raw samples per metric) make; worker-hours at ``scale``."""
        stats = {
            metric: Stats.of(v for rollout in rollouts for v in rollout.get(metric, ()))
            for metric in SAMPLE_METRICS
        }
        hours = project_worker_hours(scale, stats["cold_start"], stats["step"], stats["teardown"])
        return cls(
            stats={metric: s.to_dict() if s else None for metric, s in stats.items()},
            worker_hours=hours,
            rollouts=tuple(rollouts),
            steps=scale.steps or 0,
        )


def rollout_samples(item: dict) -> dict[str, tuple[float, ...]]:
    """One ``rollouts[]`` item's raw samples per metric (one-sample metrics only when known)."""
    samples = {
        metric: (item[f"{metric}_s"],)
        for metric in ("cold_start", "teardown", "trajectory")
        if item.get(f"{metric}_s") is not None
    }
    samples["action"] = tuple(item.get("action_probes_s", ()))
    samples["step"] = tuple(step_walls(item.get("steps")))
    return samples


def project_entry(entry: dict, scale: Scale) -> tuple[float | None, float | None]:
    """Worker-hours and tax-hours of a report's ``substrates[NAME]`` entry at ``scale``.

    Projected from the entry's means, as ``summary.summarize_substrate`` does for a live run.
    """
    stats = _entry_stats(entry)
    cold, teardown = stats["cold_start"], stats["teardown"]
    idle_s = entry_idle_per_claim(entry)
    scale = entry_scale(entry, scale)
    return (
        project_worker_hours(
            scale, cold, stats["step"], teardown, idle_s=idle_s, step_s=entry_step_s(entry)
        ),
        project_tax_hours(
            scale, cold, stats["action"], teardown, step=stats["step"], idle_s=idle_s
        ),
    )


def decompose_entry(entry: dict, scale: Scale) -> dict[str, float] | None:
    """The worker-hours decomposition of a report's ``substrates[NAME]`` entry at ``scale``."""
    stats = _entry_stats(entry)
    return project_decomposition(
        entry_scale(entry, scale),
        stats["cold_start"],
        stats["action"],
        stats["step"],
        stats["teardown"],
        idle_s=entry_idle_per_claim(entry),
        command_s=command["mean_s"] if (command := entry.get("command")) else None,
    )


def _entry_stats(entry: dict) -> dict[str, Stats | None]:
    return {
        metric: Stats.from_dict(entry[metric]) if entry.get(metric) else None
        for metric in ("cold_start", "action", "step", "teardown")
    }


def sides(report: dict, scale: Scale) -> dict[str, Side]:
    """Every substrate of ``report``; worker-hours re-projected at ``scale``."""
    rollouts: dict[str, list[dict[str, tuple[float, ...]]]] = {}
    for item in report.get("rollouts", []):
        rollouts.setdefault(item["substrate"], []).append(rollout_samples(item))
    return {
        name: Side(
            stats={metric: entry.get(metric) for metric in SAMPLE_METRICS},
            worker_hours=project_entry(entry, scale)[0],
            rollouts=tuple(rollouts.get(name, ())),
            steps=scale.steps or 0,
        )
        for name, entry in report["substrates"].items()
    }


def entry_scale(entry: dict, scale: Scale) -> Scale:
    """``scale`` for one ``substrates[NAME]`` entry: with its own recorded think time when no
    option set one (a run that replayed trajectories)."""
    think = entry.get("think")
    return scale.with_recorded_think(think["mean"] if think else None)


def scale_of(report: dict) -> Scale:
    projection = report["projection"]
    return Scale(
        projection["rollouts"],
        projection["steps"],
        projection["think_time_s"],
        projection.get("think_time_source", "option"),  # runs saved before it was recorded
    )


def reproject(
    report: dict,
    rollouts: int | None,
    steps: int | None,
    think_time_s: float | None,
    fleet: int | None = None,
) -> dict:
    """A copy of ``report`` with its projection, worker-hours, tax-hours, their decomposition,
    cost, fleet and spread redone (``fleet`` None: the saved run's own fleet, if it had one)."""
    old = scale_of(report)
    scale = Scale(
        rollouts=rollouts if rollouts is not None else old.rollouts,
        steps=steps if steps is not None else old.steps,
        think_time_s=think_time_s if think_time_s is not None else old.think_time_s,
        think_time_source="option" if think_time_s is not None else old.think_time_source,
    )
    result = copy.deepcopy(report)
    workers = fleet if fleet is not None else report["projection"].get("fleet")
    result["projection"] = {
        "rollouts": scale.rollouts,
        "steps": scale.steps,
        "think_time_s": scale.think_time_s,
        "think_time_source": scale.think_time_source,
        "fleet": workers,
    }
    for entry in result["substrates"].values():
        entry["worker_hours"], entry["tax_hours"] = project_entry(entry, scale)
        if workers is not None:
            entry["fleet"] = project_fleet(entry, entry_scale(entry, scale), workers)
        entry["decomposition"] = decompose_entry(entry, scale)
        if entry.get("price_per_hour") is not None:
            hours = entry["worker_hours"]
            entry["cost_usd"] = hours * entry["price_per_hour"] if hours is not None else None
    result["spread"] = spread_of(result["substrates"])
    result["ranking"] = rank(result["substrates"], report_units(result, scale), scale)
    return result
