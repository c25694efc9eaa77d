"""The page's training section (``--rollout-train``): the summary's training lines beside the
makespan's distribution per substrate, next to the leaderboard."""

from __future__ import annotations

from collections.abc import Mapping

from ..report.document import Report
from ..summary.sections import Summary
from ..summary.training import header_lines
from . import plots
from .markup import e, notes

#: What the makespan plot shows, under it.
CAPTION = (
    "Each training step's makespan, from the measured rollouts resampled whole and scheduled "
    "on the slots: the box holds the middle half of the steps, the line is the median, the "
    "whiskers p5 and p95, the dots the fastest and slowest step simulated."
)


def section(report: Report, summary: Summary, palette: Mapping[str, str]) -> str:
    """The training lines and the makespan plot; empty without a training section."""
    training = report.training
    if training is None:
        return ""
    svg = plots.makespans(
        {name: entry.makespan_quantiles for name, entry in training.substrates.items()},
        palette=palette,
    )
    figure = f"<figure>\n{svg}\n<figcaption>{e(CAPTION)}</figcaption>\n</figure>" if svg else ""
    return f"{notes([*header_lines(report), *summary.training])}\n{figure}"
