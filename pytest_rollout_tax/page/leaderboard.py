"""The HTML page's leaderboard and verdict: substrates ranked by projected worker-hours, each
figure in one unit per column with the best and worst marked, and, against a baseline, each
figure's change marked where the gate judged it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..gate.judge import Outcome
from ..gate.lines import Tally, outcome_line
from ..report.document import Report, SubstrateEntry
from ..report.projection import Scale, project
from ..text.units import dollars, hours, percent, ratio, share
from .markup import e, table


@dataclass(frozen=True)
class Column:
    """One figure of the leaderboard."""

    header: str
    #: The figure of one ``substrates[NAME]`` entry (``None``: not measured).
    figure: Callable[[SubstrateEntry], float | None]
    #: "time" (one unit per column, chosen from its values), "hours", "dollars", "share" or
    #: "ratio". A "dollars" column is shown only when a substrate has a price.
    kind: str
    lower_is_better: bool = True
    #: The gate's (metric, stat) that judges this figure's change, if any.
    check: tuple[str, str] | None = None
    #: The baseline entry's figure at this run's scale, when it is projected (else ``figure``).
    rescaled: Callable[[SubstrateEntry, Scale], float | None] | None = None


def _stat(metric: str, stat: str) -> Callable[[SubstrateEntry], float | None]:
    return lambda entry: getattr(stats, stat) if (stats := getattr(entry, metric)) else None


def _tax_share(entry: SubstrateEntry) -> float | None:
    return _share(entry.worker_hours, entry.tax_hours)


def _share(worker: float | None, tax: float | None) -> float | None:
    return tax / worker if worker and tax is not None else None


def _hours_at(figure: str) -> Callable[[SubstrateEntry, Scale], float | None]:
    """The baseline's ``worker_hours`` or ``tax_hours`` at this run's scale, as the gate has."""
    return lambda old, scale: getattr(project(old.means(), scale), figure)


def _tax_share_at(old: SubstrateEntry, scale: Scale) -> float | None:
    projected = project(old.means(), scale)
    return _share(projected.worker_hours, projected.tax_hours)


def _dollars_at(old: SubstrateEntry, scale: Scale) -> float | None:
    """The baseline's dollars at this run's scale, as the gate has them."""
    cost = project(old.means(), scale).cost
    return None if cost is None else cost.dollars


def _success(entry: SubstrateEntry) -> float | None:
    return entry.success_rate


COLUMNS = (
    Column("worker-hours", lambda e: e.worker_hours, "hours",
           check=("worker_hours", "mean"), rescaled=_hours_at("worker_hours")),
    Column("vs cheapest", lambda e: e.worker_hours, "ratio"),
    Column("dollars", lambda e: e.dollars, "dollars",
           check=("cost", "mean"), rescaled=_dollars_at),
    Column("tax-hours", lambda e: e.tax_hours, "hours", rescaled=_hours_at("tax_hours")),
    Column("tax share", _tax_share, "share", rescaled=_tax_share_at),
    Column("cold start p50", _stat("cold_start", "p50"), "time", check=("cold_start", "p50")),
    Column("cold start p95", _stat("cold_start", "p95"), "time", check=("cold_start", "p95")),
    Column("action p50", _stat("action", "p50"), "time", check=("action", "p50")),
    Column("success", _success, "share", lower_is_better=False),
    Column("infra failed", lambda e: e.infra_failed_rate, "share"),
)  # fmt: skip

#: Time units: (name, seconds per unit), the largest first.
UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))


def unit_for(values: Sequence[float]) -> tuple[str, float]:
    """The one unit a time column is shown in: the one that reads best for its smallest value."""
    smallest = min((v for v in values if v > 0), default=1.0)
    return next(((n, f) for n, f in UNITS if smallest >= f * 0.9995), UNITS[-1])


def in_unit(value: float, factor: float) -> str:
    scaled = value / factor
    return f"{scaled:,.0f}" if scaled >= 100 else f"{scaled:.3g}"


def board(
    report: Report,
    ranked: Sequence[str],
    *,
    palette: Mapping[str, str],
    baseline: Report | None = None,
    outcomes: Sequence[Outcome] = (),
) -> str:
    """The leaderboard table: one row per substrate in ``ranked`` order."""
    entries = report.substrates
    scale = report.projection
    valid = [n for n in ranked if not entries[n].no_valid_result]
    cheapest = next((entries[n].worker_hours for n in valid if entries[n].worker_hours),
                    None)  # fmt: skip
    judged = {(o.substrate, o.check.metric, o.check.stat): o for o in outcomes}
    headers = ["substrate"]
    columns = []
    for column in COLUMNS:
        values = [v for n in valid if (v := column.figure(entries[n])) is not None]
        if column.kind == "dollars" and not values:
            continue
        unit = unit_for(values) if column.kind == "time" else None
        headers.append(f"{column.header} ({unit[0]})" if unit else column.header)
        columns.append((column, values, unit))
    rows = []
    for place, name in enumerate(ranked, start=1):
        entry = entries[name]
        old = baseline.substrates.get(name) if baseline else None
        swatch = f'<span class="swatch" style="background:{palette.get(name, "#000")}"></span>'
        row = [(f'<span class="place">{place}</span>{swatch}{e(name)}', "name")]
        if invalid := entry.no_valid_result:
            rows.append([*row, (e(invalid), "worst"), *[("-", "")] * (len(columns) - 1)])
            continue
        for column, values, unit in columns:
            value = column.figure(entry)
            text = _show(column, value, unit, cheapest)
            mark = _mark(column, value, values, unit, cheapest)
            if baseline is not None and column.kind != "ratio":
                text += _change(column, name, value, old, scale, judged)
            row.append((text, mark))
        rows.append(row)
    return table(headers, rows, css="cards board", raw=True)


def _show(
    column: Column, value: float | None, unit: tuple[str, float] | None, cheapest: float | None
) -> str:
    if value is None:
        return "-"
    if column.kind == "time" and unit:
        return in_unit(value, unit[1])
    if column.kind == "hours":
        return hours(value)
    if column.kind == "dollars":
        return dollars(value)
    if column.kind == "ratio":
        return ratio(value / cheapest) if cheapest else "-"
    return share(value) if column.lower_is_better else f"{value:.0%}"


def _mark(
    column: Column,
    value: float | None,
    values: Sequence[float],
    unit: tuple[str, float] | None,
    cheapest: float | None,
) -> str:
    """``best`` or ``worst``, by the figure as shown: every value that shows as the best (or
    worst) gets its mark, and a column whose values all show alike marks nothing."""
    if value is None or not values:
        return ""
    best, worst = (min(values), max(values)) if column.lower_is_better else (
        max(values), min(values))  # fmt: skip
    shown, best_shown, worst_shown = (
        _show(column, v, unit, cheapest) for v in (value, best, worst)
    )
    if best_shown == worst_shown:
        return ""
    return "best" if shown == best_shown else "worst" if shown == worst_shown else ""


def _change(
    column: Column,
    name: str,
    value: float | None,
    old: SubstrateEntry | None,
    scale: Scale,
    judged: Mapping[tuple[str, str, str], Outcome],
) -> str:
    """The figure's change against the baseline (a share's in percentage points), marked only
    where a check found it a credible slowdown; nothing where nothing changed as shown."""
    if old is None:
        return '<span class="change">no baseline</span>'
    before = column.rescaled(old, scale) if column.rescaled else column.figure(old)
    outcome = judged.get((name, *column.check)) if column.check else None
    text = points(before, value) if column.kind == "share" else percent(before, value)
    if outcome is not None and outcome.status == "failed":
        title = e(outcome_line(outcome))
        return f'<span class="change credible" title="{title}">{text} credible</span>'
    if text.lstrip("+-") in ("0.0%", "0.0 pp"):
        return ""
    return f'<span class="change">{text}</span>'


def points(before: float | None, after: float | None) -> str:
    """The change of a share in percentage points: ``+8.9 pp``."""
    if before is None or after is None:
        return "-"
    return f"{(after - before) * 100:+.1f} pp"


def verdict_line(outcomes: Sequence[Outcome]) -> tuple[str, str]:
    """The gate's verdict in one sentence, and its box's class: which checks failed (a
    credible slowdown beyond the threshold) and the tests that carry each, which only crossed
    it inside the noise, which it could not judge. ``passed`` (green) only when every check
    was judged and passed; ``partial`` when some crossed inside the noise or were not judged;
    ``failed``; ``unjudged`` when none was judged."""
    tally = Tally.of(outcomes)

    def named(found: list[Outcome]) -> str:
        return ", ".join(
            f"{o.substrate} {o.check.name} {percent(o.baseline, o.now)}"
            + (f" (in {', '.join(t.test for t in o.carriers)})" if len(o.tests) > 1 and
               o.carriers else "")
            for o in found
        )  # fmt: skip

    def of(status: str) -> list[Outcome]:
        return [o for o in outcomes if o.status == status]

    parts = []
    if tally.failed:
        parts.append(f"{tally.failed} of {tally.total} check(s) found a credible slowdown "
                     f"beyond the threshold: {named(of('failed'))}")  # fmt: skip
    if tally.noise:
        parts.append(f"{tally.noise} crossed the threshold by a change inside the noise, "
                     f"not a failure: {named(of('noise'))}")  # fmt: skip
    if tally.passed:
        parts.append(f"{tally.passed} stayed within the threshold")
    if tally.skipped:
        parts.append(
            f"{tally.skipped} not judged (no figures on both sides): "
            + ", ".join(f"{o.substrate} {o.check.name}" for o in of("skipped"))
        )
    head = f"Gate {tally.state}"
    status = {"failed": "failed", "not applicable": "unjudged"}.get(tally.state, "passed")
    if status == "passed" and (tally.noise or tally.skipped):
        status = "partial"
    return f"{head}: " + "; ".join(parts) + ".", status
