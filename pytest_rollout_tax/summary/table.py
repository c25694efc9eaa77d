"""The summary's table: one row per substrate, narrowed to fit the terminal (README, "Reading
the summary": the order in which columns fold or go)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..core.stats import Stats
from ..report.document import SubstrateEntry
from ..text.units import dollars, hours, seconds

#: The columns' separator.
GAP = "  "


@dataclass(frozen=True)
class Column:
    """A column: its two header lines, and its cell for a report entry."""

    key: str
    header: tuple[str, str]
    cell: Callable[[str, SubstrateEntry], str]


def _pair(stats: Stats | None) -> str:
    return f"{seconds(stats.p50)}/{seconds(stats.p95)}" if stats else "-"


def _p50(stats: Stats | None) -> str:
    return seconds(stats.p50) if stats else "-"


def _rollouts_failed(name: str, entry: SubstrateEntry) -> str:
    return f"{entry.rollouts}" + (f" ({entry.failures})" if entry.failures else "")


COLUMNS = (
    Column("substrate", ("substrate", ""), lambda name, entry: name),
    Column("rollouts", ("rollouts", ""), lambda name, entry: str(entry.rollouts)),
    Column("failed", ("failed", ""), lambda name, entry: str(entry.failures)),
    Column("cold_start", ("cold start", "p50/p95"), lambda name, e: _pair(e.cold_start)),
    Column("action", ("action", "p50/p95"), lambda name, e: _pair(e.action)),
    Column("step", ("step", "p50"), lambda name, e: _p50(e.step)),
    Column("teardown", ("teardown", "p50"), lambda name, e: _p50(e.teardown)),
    Column("worker_hours", ("worker", "hours"), lambda name, e: hours(e.worker_hours)),
    Column("tax_hours", ("tax", "hours"), lambda name, e: hours(e.tax_hours)),
)
#: The column a cost-ranked table (``--rollout-rank-by=cost``) leads its figures with.
DOLLARS = Column("dollars", ("dollars", ""), lambda name, e: dollars(e.dollars))


def _fold_failed(columns: list[Column]) -> list[Column]:
    folded = Column("rollouts", ("rollouts", "(failed)"), _rollouts_failed)
    return [folded if c.key == "rollouts" else c for c in columns if c.key != "failed"]


def _drop(key: str) -> Callable[[list[Column]], list[Column]]:
    return lambda columns: [c for c in columns if c.key != key]


def _p50_cell(key: str) -> Callable[[str, SubstrateEntry], str]:
    """The cell of a column of STATS ``key`` (``cold_start``, ``action``): its p50 alone."""

    def cell(name: str, entry: SubstrateEntry) -> str:
        stats: Stats | None = getattr(entry, key)
        return _p50(stats)

    return cell


def _p50_only(key: str) -> Callable[[list[Column]], list[Column]]:
    def narrow(columns: list[Column]) -> list[Column]:
        return [
            replace(c, header=(c.header[0], "p50"), cell=_p50_cell(key)) if c.key == key else c
            for c in columns
        ]

    return narrow


#: How the table narrows, one step at a time, until it fits: failures fold into the rollouts
#: column, teardown goes, then step, then action and cold start keep their p50 alone.
NARROWING = (
    _fold_failed,
    _drop("teardown"),
    _drop("step"),
    _p50_only("action"),
    _p50_only("cold_start"),
)


def table_lines(
    rows: Sequence[tuple[str, SubstrateEntry]], width: int, *, by_cost: bool = False
) -> list[str]:
    """The table of ``rows`` (name, report entry), in their order, no wider than ``width``
    when narrowing can make it so; ``by_cost``: ranked by dollars, which a column shows
    before the worker-hours ("-": no price)."""
    columns = list(COLUMNS)
    if by_cost:
        columns.insert(columns.index(COLUMNS[-2]), DOLLARS)
    lines = _render(columns, rows, width)
    for narrow in NARROWING:
        if max(map(len, lines)) <= width:
            break
        columns = narrow(columns)
        lines = _render(columns, rows, width)
    return lines


#: The columns a row with no valid result keeps; its figures give way to the reason.
KEPT = ("substrate", "rollouts", "failed")


def _render(
    columns: list[Column], rows: Sequence[tuple[str, SubstrateEntry]], width: int
) -> list[str]:
    """The table's lines; a row whose every rollout failed reads ``no valid result`` in place
    of its figures, its reason left to the decision line above the table (said once)."""
    cells = [[c.cell(name, entry) for c in columns] for name, entry in rows]
    valid = [row for row, (_, entry) in zip(cells, rows, strict=True) if not entry.no_valid_result]
    widths = [
        max(len(c.header[0]), len(c.header[1]), *(len(r[i]) for r in cells if c.key in KEPT),
            *(len(r[i]) for r in valid))
        for i, c in enumerate(columns)
    ]  # fmt: skip

    def line(values: list[str]) -> str:
        first = values[0].ljust(widths[0])
        rest = (value.rjust(w) for value, w in zip(values[1:], widths[1:], strict=False))
        return GAP.join([first, *rest]).rstrip()

    def row_line(row: list[str], entry: SubstrateEntry) -> str:
        invalid = entry.no_valid_result
        if not invalid:
            return line(row)
        kept = [value for value, c in zip(row, columns, strict=True) if c.key in KEPT]
        return f"{line(kept)}{GAP}no valid result (why: above)"

    return [
        line([c.header[0] for c in columns]),
        line([c.header[1] for c in columns]),
        GAP.join("-" * w for w in widths),
        *(row_line(row, entry) for row, (_, entry) in zip(cells, rows, strict=True)),
    ]
