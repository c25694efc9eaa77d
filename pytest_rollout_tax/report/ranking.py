"""The substrates ranked by projected worker-hours (or dollars, ``--rollout-rank-by=cost``),
cheapest first, each difference from the cheapest put to the gate's own noise test
(``report.noise``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..core.record import step_walls
from .noise import evidence
from .projection import SECONDS_PER_HOUR, Scale, rollout_seconds

#: What the noise test said of a substrate's difference from the cheapest.
RESOLVED = "resolved"  #: credible: p < ALPHA
WITHIN_NOISE = "within noise"  #: the run cannot tell the two apart
UNTESTED = "untested"  #: too few rollouts a side for the test to run


def rollout_units(
    rows: Iterable[tuple[str, float | None, Sequence[float], float | None]], scale: Scale
) -> dict[str, list[float]]:
    """Each substrate's rollouts as the noise test's units: a rollout's projected worker
    seconds (``projection.rollout_seconds`` of its mean step), from (substrate, cold start,
    step walls, teardown) in seconds. Rollouts without a cold start or steps give none."""
    units: dict[str, list[float]] = {}
    for substrate, cold, walls, teardown in rows:
        if cold is None or not walls:
            continue
        step_s = math.fsum(walls) / len(walls)
        seconds = rollout_seconds(scale, cold_start_s=cold, step_s=step_s, teardown_s=teardown or 0)
        units.setdefault(substrate, []).append(seconds)
    return units


def report_units(report: dict, scale: Scale) -> dict[str, list[float]]:
    """:func:`rollout_units` of a whole report's ``rollouts[]`` (a saved run) at ``scale``."""
    rows = (
        (item["substrate"], item.get("cold_start_s"), step_walls(item.get("steps")),
         item.get("teardown_s"))
        for item in report.get("rollouts", ())
    )  # fmt: skip
    return rollout_units(rows, scale)


def rank(substrates: dict[str, dict], units: dict[str, list[float]], scale: Scale) -> list[dict]:
    """The report's ``ranking``: every substrate, the cheapest first by ``scale.rank_by``
    (projected worker-hours, or dollars: substrates without a price then come last).

    Each item: ``substrate``, ``worker_hours``, ``tax_hours``, ``dollars``, ``ratio`` (its
    figure over the cheapest's), ``noise`` (``resolved``, ``within noise``, ``untested``; None
    for the cheapest) and ``why`` (the noise test's own words). The test compares the rollouts'
    worker seconds (in dollars, at each one's rate, when ranking by cost), each substrate's
    shifted so that their mean is its projected rollout (think time, recorded command time and
    pool idle included), with the cheapest's.
    """
    priced = sorted(
        (n for n, e in substrates.items() if _figure(e, scale)),
        key=lambda n: (_figure(substrates[n], scale), n),
    )
    unpriced = sorted(n for n in substrates if n not in priced)
    if not priced:
        return [_item(name, substrates[name], None) for name in unpriced]
    cheapest = priced[0]
    shifted = {name: _shifted(units.get(name, []), substrates[name], scale) for name in priced}
    figure = _figure(substrates[cheapest], scale)
    ranking = [_item(cheapest, substrates[cheapest], 1.0)]
    for name in priced[1:]:
        item = _item(name, substrates[name], _figure(substrates[name], scale) / figure)
        found = evidence(shifted[cheapest], shifted[name])
        if found.p_value is None:
            item["noise"] = UNTESTED
        else:
            item["noise"] = RESOLVED if found.credible else WITHIN_NOISE
        item["why"] = found.why
        ranking.append(item)
    return ranking + [_item(name, substrates[name], None) for name in unpriced]


def _figure(entry: dict, scale: Scale) -> float | None:
    """What the ranking orders by: the entry's worker-hours, or its dollars."""
    if scale.rank_by == "cost":
        return entry.get("cost_usd")
    return entry.get("worker_hours")


def _item(name: str, entry: dict, ratio: float | None) -> dict:
    return {
        "substrate": name,
        "worker_hours": entry.get("worker_hours"),
        "tax_hours": entry.get("tax_hours"),
        "dollars": entry.get("cost_usd"),
        "ratio": ratio,
        "noise": None,
        "why": None,
    }


def _shifted(units: list[float], entry: dict, scale: Scale) -> list[float]:
    """``units`` moved so that their mean is the entry's projected seconds per rollout; in
    dollars at the entry's rate when ranking by cost."""
    if not units or not entry.get("worker_hours"):
        return []
    target = entry["worker_hours"] * SECONDS_PER_HOUR / scale.rollouts
    shift = target - math.fsum(units) / len(units)
    shifted = [unit + shift for unit in units]
    if scale.rank_by != "cost":
        return shifted
    per_second = entry["cost_usd"] / (entry["worker_hours"] * SECONDS_PER_HOUR)
    return [unit * per_second for unit in shifted]
