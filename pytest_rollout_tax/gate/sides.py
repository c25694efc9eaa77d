"""One run's figures for one substrate (a ``Side`` of a comparison), from a saved report."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.infra import INFRA_OUTCOMES
from ..core.price import SECONDS_PER_HOUR
from ..core.record import step_walls
from ..core.stats import Stats
from ..report.document import Report, SubstrateEntry
from ..report.projection import (
    Means,
    Projected,
    RankBy,
    Scale,
    project,
    rollout_seconds,
    worker_hours,
)
from ..report.ranking import rank, report_units
from ..report.schema import SAMPLE_METRICS

#: One rollout's raw samples, per metric.
Samples = Mapping[str, Sequence[float]]


@dataclass(frozen=True)
class Side:
    """A substrate's STATS, its worker-hours (at a common scale) and raw samples, in one run."""

    stats: dict[str, Stats | None]
    worker_hours: float | None
    #: Each rollout's raw samples, per metric: the noise test's unit is the rollout.
    rollouts: tuple[Samples, ...] = ()
    #: Steps per rollout in the projection: a rollout's worker time for ``worker_hours``.
    steps: int = 0
    #: The projection in dollars (None: no price).
    dollars: float | None = None

    def value(self, metric: str, stat: str) -> float | None:
        if metric == "infra_failed":  # the share of its rollouts the infrastructure failed
            figures = self.units(metric, stat)
            return math.fsum(figures) / len(figures) if figures else None
        if metric == "worker_hours":
            return self.worker_hours
        if metric == "cost":
            return self.dollars
        stats = self.stats.get(metric)
        return getattr(stats, stat) if stats else None

    def pooled(self, metric: str) -> list[float]:
        """Every raw sample of ``metric``, all rollouts together (what an ECDF draws)."""
        return [value for rollout in self.rollouts for value in rollout.get(metric, ())]

    def units(self, metric: str, stat: str) -> list[float]:
        """The noise test's samples: one figure per rollout that has one.

        A metric measured once per rollout gives that sample; ``action`` and ``step`` give the
        check's STAT over the rollout's own samples (they share a sandbox, so they are not
        independent); ``worker_hours`` gives the rollout's projected worker time, ``cost`` that
        time at the side's dollars per worker-second.
        """
        if metric == "cost":
            if not self.dollars or not self.worker_hours:
                return []
            per_second = self.dollars / (self.worker_hours * SECONDS_PER_HOUR)
            return [seconds * per_second for seconds in self.units("worker_hours", stat)]
        figures = []
        for rollout in self.rollouts:
            if metric == "worker_hours":
                cold, steps = rollout.get("cold_start"), rollout.get("step")
                if cold and steps:
                    figures.append(
                        rollout_seconds(
                            Scale(steps=self.steps),  # no think time: the environment's seconds
                            cold_start_s=cold[0],
                            step_s=math.fsum(steps) / len(steps),
                            teardown_s=sum(rollout.get("teardown", ())),
                        )
                    )
            elif len(values := rollout.get(metric, ())) > 1:
                figures.append(getattr(Stats.of(values), stat))
            elif values:
                figures.append(values[0])
        return figures

    @classmethod
    def of(cls, rollouts: Sequence[Samples], scale: Scale) -> Side:
        """The side ``rollouts`` (raw samples per metric) make; worker-hours at ``scale``."""
        stats = {
            metric: Stats.of(v for rollout in rollouts for v in rollout.get(metric, ()))
            for metric in SAMPLE_METRICS
        }
        means = Means(
            cold_start_s=_mean(stats["cold_start"]),
            action_s=_mean(stats["action"]),
            step_s=_mean(stats["step"]),
            teardown_s=_mean(stats["teardown"]) or 0.0,
        )
        hours = worker_hours(means, scale)
        return cls(
            stats=stats,
            worker_hours=hours,
            rollouts=tuple(rollouts),
            steps=scale.steps or 0,
        )


def _mean(stats: Stats | None) -> float | None:
    return stats.mean if stats else None


def rollout_samples(item: Mapping[str, Any]) -> dict[str, tuple[float, ...]]:
    """One ``rollouts[]`` item's raw samples per metric (one-sample metrics only when known);
    ``infra_failed``: 1 when the infrastructure failed it, else 0."""
    samples: dict[str, tuple[float, ...]] = {
        metric: (float(item[f"{metric}_s"]),)
        for metric in ("cold_start", "teardown", "trajectory")
        if item.get(f"{metric}_s") is not None
    }
    samples["action"] = tuple(item.get("action_probes_s", ()))
    samples["step"] = tuple(step_walls(item.get("steps")))
    samples["infra_failed"] = (float(item.get("outcome") in INFRA_OUTCOMES),)
    return samples


def sides(report: Report, scale: Scale) -> dict[str, Side]:
    """Every substrate of ``report``; worker-hours re-projected at ``scale``."""
    rollouts: dict[str, list[dict[str, tuple[float, ...]]]] = {}
    for item in report.rollouts:
        rollouts.setdefault(item["substrate"], []).append(rollout_samples(item))
    return {
        name: _side(entry, project(entry.means(), scale), rollouts.get(name, ()), scale)
        for name, entry in report.substrates.items()
    }


def _side(
    entry: SubstrateEntry, projected: Projected, rollouts: Sequence[Samples], scale: Scale
) -> Side:
    """One substrate's side: its stats, and its hours and dollars from one projection."""
    return Side(
        stats={metric: getattr(entry, metric) for metric in SAMPLE_METRICS},
        worker_hours=projected.worker_hours,
        rollouts=tuple(rollouts),
        steps=scale.steps or 0,
        dollars=None if projected.cost is None else projected.cost.dollars,
    )


def reproject(
    report: Report,
    rollouts: int | None,
    steps: int | None,
    think_time_s: float | None,
    fleet: int | None = None,
    rank_by: RankBy | None = None,
) -> Report:
    """A copy of ``report`` with its projection, worker-hours, tax-hours, their decomposition,
    cost, fleet and spread redone (``fleet`` None: the saved run's own fleet, if it had one)."""
    old = report.projection
    scale = Scale(
        rollouts=rollouts if rollouts is not None else old.rollouts,
        steps=steps if steps is not None else old.steps,
        think_time_s=think_time_s if think_time_s is not None else old.think_time_s,
        think_time_source="option" if think_time_s is not None else old.think_time_source,
        fleet=fleet if fleet is not None else old.fleet,
        rank_by=rank_by if rank_by is not None else old.rank_by,
        steps_source="option" if steps is not None else old.steps_source,
    )
    substrates = {
        name: dataclasses.replace(entry, projected=project(entry.means(), scale))
        for name, entry in report.substrates.items()
    }
    result = dataclasses.replace(report, projection=scale, substrates=substrates)
    result.ranking = rank(substrates, report_units(result, scale), scale)
    return result
