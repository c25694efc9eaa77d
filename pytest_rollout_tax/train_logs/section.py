"""The training section: a run's log, its own figures and, given a rollout-tax report, what
each measured substrate would change; the JSON report's ``train_log`` key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..report.document import Report
from ..report.projection import DEFAULT_STEPS
from .figures import RunFigures, figures
from .load import TrainLog, load
from .whatif import ASSUMPTIONS, WhatIf, what_ifs


@dataclass(frozen=True)
class Asked:
    """What the options ask: the log files, the GPU count, the substrate the run used, the tool
    calls per trajectory (None: the report's steps per rollout)."""

    paths: tuple[str, ...]
    gpus: int | None = None
    ran_on: str | None = None
    steps: int | None = None

    def read(self) -> TrainLog:
        """The run the files hold (a TrainLogError names the file at fault)."""
        return load([Path(p) for p in self.paths])

    def section(self, log: TrainLog, report: Report | None, label: str | None) -> Training:
        """:func:`training` of ``log`` with these options."""
        return training(
            log, report, report_label=label, gpus=self.gpus, ran_on=self.ran_on, steps=self.steps
        )


@dataclass(frozen=True)
class Training:
    log: TrainLog
    figures: RunFigures
    #: Where the substrates' figures come from (None: no report).
    report_label: str | None = None
    steps: int | None = None
    ran_on: str | None = None
    what_ifs: list[WhatIf] = field(default_factory=list)
    #: Why there is no what-if, when there is none.
    no_what_if: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.log.paths),
            "kinds": list(self.log.kinds),
            "stack": self.log.stack.name,
            "figures": self.figures.to_dict(),
            "what_if": {
                "report": self.report_label,
                "tool_calls_per_trajectory": self.steps,
                "ran_on": self.ran_on,
                "assumptions": list(ASSUMPTIONS) if self.what_ifs else [],
                "substrates": [w.to_dict() for w in self.what_ifs],
                "unavailable": self.no_what_if,
            },
            "steps": [r.to_dict() for r in self.log.records],
        }


def training(
    log: TrainLog,
    report: Report | None,
    *,
    report_label: str | None = None,
    gpus: int | None = None,
    ran_on: str | None = None,
    steps: int | None = None,
    no_report: str = "no rollout-tax report to compare with",
) -> Training:
    """The section of ``log``; with ``report``, each substrate's what-if at ``steps`` tool
    calls per trajectory (None: the report's steps per rollout)."""
    run = figures(log.records, gpus)
    if report is None:
        return Training(log, run, no_what_if=no_report)
    steps = steps or report.projection.steps or DEFAULT_STEPS
    found = what_ifs(log.records, report, steps, ran_on, gpus)
    why = None
    if not found:
        why = (
            f"{log.stack.name} logs no tool time per trajectory: the environment's part of "
            "the run is unknown"
            if run.environment_share is None
            else "the report measured no substrate's cold start and per-step tax"
        )
    return Training(log, run, report_label, steps, ran_on, found, why)
