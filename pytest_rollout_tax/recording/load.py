"""A record-mode directory as the usual report: every journal's rollouts aggregated and
summarized as a pytest session's are, think time measured live."""

from __future__ import annotations

import dataclasses
import os

from ..report.aggregate import STEP_CHOICES, Aggregate
from ..report.build import summarize
from ..report.document import Report
from ..report.projection import Scale
from .journal import Recorded, read


def report_of(
    directory: str | os.PathLike[str],
    scale: Scale | None = None,
    *,
    plugin_version: str,
    steps: str = "all",
) -> tuple[Report, Recorded]:
    """The report of the rollouts recorded in ``directory`` at ``scale`` (default: the
    plugin's default projection), and what the journals held; ``steps`` as
    ``--rollout-json-steps``. A UsageError names a bad file."""
    recorded = read(directory)
    aggregate = Aggregate(STEP_CHOICES[steps])
    for rollout in recorded.rollouts:
        aggregate.add(rollout)
    scale = scale or Scale.asked()
    if scale.think_time_source == "none":  # no option: the gaps between steps are the think
        scale = dataclasses.replace(scale, think_time_source="live")
    header = recorded.header
    report = summarize(
        aggregate,
        scale,
        plugin_version=plugin_version,
        machine=header.get("machine") or {},
        commit=header.get("commit"),
        steps=steps,
    )
    return report, recorded


def notes(recorded: Recorded) -> list[str]:
    """What the summary of a record-mode directory adds: its journals, the rollouts that did
    not finish, and lines a dying process cut short."""
    journals = len(recorded.headers)
    lines = [f"recorded: {len(recorded.rollouts)} rollouts from {journals} journal(s)"]
    if recorded.interrupted:
        lines.append(
            f"interrupted: {recorded.interrupted} rollout(s) ended before their agent did"
            + (
                f", {recorded.unfinished} of them never ended (their process died: remove "
                "their sandboxes with pytest --rollout-reap --substrate=NAME)"
                if recorded.unfinished
                else ""
            )
        )
    if recorded.cut_short:
        lines.append(
            f"cut short: the last line of {', '.join(recorded.cut_short)} (its process died "
            "while writing it) is left out"
        )
    return lines
