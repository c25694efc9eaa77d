"""The summary in the terminal: its sections wrapped to ``COLUMNS``, the table narrowed to it."""

from __future__ import annotations

from ..report.document import Report
from ..text.width import terminal_width, wrap
from .lines import not_run_lines
from .sections import Summary, summarize
from .table import table_lines


def render(summary: Summary, width: int | None = None) -> list[str]:
    """The lines of ``summary``: the decision, the projection's terms, one table row per
    substrate (cheapest first), then notes; no line wider than ``width`` (None: the
    terminal's) where the table can narrow to it."""
    width = width or terminal_width()
    lines = [line for note in [*summary.decision, *summary.header] for line in wrap(note, width)]
    lines += table_lines(summary.rows, width, by_cost=summary.by_cost)
    return lines + [line for note in summary.after_table() for line in wrap(note, width)]


def render_nothing_ran(not_run: dict[str, str], width: int | None = None) -> list[str]:
    """The summary of a run where no rollout ran: each selected substrate, with why."""
    width = width or terminal_width()
    notes = ["no rollout ran: nothing measured", *not_run_lines(not_run)]
    return [line for note in notes for line in wrap(note, width)]


def render_summary(report: Report, width: int | None = None) -> list[str]:
    """:func:`render` of the report's summary."""
    return render(summarize(report), width)
