"""What the outputs are handed and what each hands back, as typed values: the session's
:class:`SessionOutcome` (the ``outcome`` argument of ``pytest_rollout_tax_report``) and each
output's :class:`OutputResult` (its lines, and whether what was asked of it failed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..gate.compare import Verdict
from ..gate.storage import SavedRun
from ..report.document import Report
from ..summary.sections import Summary

#: How the line of a failed output begins, as the user reads it. A third party's plain list
#: of lines (the hook's older return) says it failed with a line that begins so.
OUTPUT_ERROR = "rollout-tax: error:"


@dataclass(frozen=True)
class SessionOutcome:
    """The end of one session, as every output receives it."""

    report: Report
    #: The report's sections, made once (``summary.terminal.render`` gives its lines).
    summary: Summary
    #: The gate's verdict; without ``--rollout-compare`` it has no outcomes.
    verdict: Verdict
    #: The files the run was saved to (``--rollout-save``, ``--rollout-autosave``), saved
    #: before any output is called; empty when it was not saved.
    saved: tuple[Path, ...] = ()
    #: The session was interrupted (Ctrl-C): a partial run, never saved.
    interrupted: bool = False
    #: The saved run the gate compared with (``--rollout-compare``), when there is one.
    baseline: SavedRun | None = None
    #: Whether ``--rollout-compare`` was given (the verdict is then the comparison's).
    compared: bool = False


@dataclass(frozen=True)
class OutputResult:
    """What one output did: the lines to print under the summary, and whether what was asked
    of it failed (the run's exit status is then non-zero)."""

    lines: tuple[str, ...] = ()
    failed: bool = False

    @classmethod
    def error(cls, message: str) -> OutputResult:
        """A failed output's one line: ``rollout-tax: error: MESSAGE``."""
        return cls((f"{OUTPUT_ERROR} {message}",), failed=True)

    @classmethod
    def of(cls, returned: OutputResult | Sequence[str] | None) -> OutputResult:
        """An implementation's return as a result: a result as it is, nothing as no lines,
        and a plain list of lines (a third party's) failed when a line says so."""
        if isinstance(returned, OutputResult):
            return returned
        lines = tuple(returned or ())
        return cls(lines, failed=any(line.startswith(OUTPUT_ERROR) for line in lines))


#: What an implementation of the hook may return: a result, a plain list of lines, or None.
Returned = OutputResult | Sequence[str] | None
