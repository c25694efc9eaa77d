"""The substrates ranked by projected worker-hours (or dollars, ``--rollout-rank-by=cost``),
cheapest first, each difference from the cheapest put to the gate's own noise test
(``report.noise``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from ..core.noise import evidence
from ..core.price import SECONDS_PER_HOUR
from ..core.record import step_walls
from .document import Ranked, Report, SubstrateEntry
from .projection import Scale, rollout_seconds

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


def report_units(report: Report, scale: Scale) -> dict[str, list[float]]:
    """:func:`rollout_units` of a whole report's ``rollouts[]`` (a saved run) at ``scale``."""
    rows = (
        (item["substrate"], item.get("cold_start_s"), step_walls(item.get("steps")),
         item.get("teardown_s"))
        for item in report.rollouts
    )  # fmt: skip
    return rollout_units(rows, scale)


def rank(
    substrates: dict[str, SubstrateEntry], units: dict[str, list[float]], scale: Scale
) -> list[Ranked]:
    """The report's ``ranking``: every substrate with a valid result, the cheapest first by
    ``scale.rank_by`` (projected worker-hours, or dollars); then those without that figure;
    then those whose every rollout failed.

    Each item's ratio is its figure over the reference's: the cheapest substrate that isolates,
    or the cheapest when none does. The noise test compares the rollouts' worker seconds (in
    dollars at each one's rate, when ranking by cost), each substrate's shifted so that their
    mean is its projected rollout (think time, recorded command time and pool idle included),
    with the reference's.
    """
    figures = {
        n: figure
        for n, e in substrates.items()
        if (figure := _figure(e, scale)) and not e.failed_all
    }
    priced = sorted(figures, key=lambda n: (figures[n], n))
    failed = sorted(n for n, e in substrates.items() if e.failed_all)
    unpriced = sorted(n for n in substrates if n not in priced and n not in failed)
    tail = [_item(name, substrates[name], None) for name in (*unpriced, *failed)]
    if not priced:
        return tail
    reference = next((n for n in priced if substrates[n].isolates(n)), priced[0])
    shifted = {name: _shifted(units.get(name, []), substrates[name], scale) for name in priced}
    base = figures[reference]
    reference_isolates = substrates[reference].isolates(reference)
    ranking = []
    for name in priced:
        item = _item(name, substrates[name], figures[name] / base)
        ranking.append(item)
        if name == reference:
            continue
        if reference_isolates and not substrates[name].isolates(name):
            item.floor = True
            continue
        found = evidence(shifted[reference], shifted[name])
        if found.p_value is None:
            item.noise = UNTESTED
        else:
            item.noise = RESOLVED if found.credible else WITHIN_NOISE
        item.why = found.why
    return ranking + tail


def _figure(entry: SubstrateEntry, scale: Scale) -> float | None:
    """What the ranking orders by: the entry's worker-hours, or its dollars."""
    return entry.dollars if scale.rank_by == "cost" else entry.worker_hours


def _item(name: str, entry: SubstrateEntry, ratio: float | None) -> Ranked:
    invalid = entry.no_valid_result
    return Ranked(
        substrate=name,
        worker_hours=None if invalid else entry.worker_hours,
        tax_hours=None if invalid else entry.tax_hours,
        dollars=None if invalid else entry.dollars,
        ratio=ratio,
        success=entry.success_rate,
        infra_failed=entry.infra_failed_rate or None,
        isolates=entry.isolates(name),
        no_valid_result=invalid,
    )


def _shifted(units: list[float], entry: SubstrateEntry, scale: Scale) -> list[float]:
    """``units`` moved so that their mean is the entry's projected seconds per rollout; in
    dollars at the entry's rate when ranking by cost."""
    hours = entry.worker_hours
    if not units or not hours:
        return []
    target = hours * SECONDS_PER_HOUR / scale.rollouts
    shift = target - math.fsum(units) / len(units)
    shifted = [unit + shift for unit in units]
    if scale.rank_by != "cost" or entry.dollars is None:  # ranked by cost: it has dollars
        return shifted
    per_second = entry.dollars / (hours * SECONDS_PER_HOUR)
    return [unit * per_second for unit in shifted]
