"""The noise verdict of a variant comparison: the gate's own test (``report.noise``) on the two
substrates' rollouts, one figure each (its projected worker seconds), so that no ratio inside
the noise reads as a finding."""

from __future__ import annotations

from collections.abc import Callable

from ..core.noise import evidence
from ..report.document import Report
from ..report.ranking import report_units

#: Judge(variant, reference) -> the clause that follows the comparison's figures.
Judge = Callable[[str, str], str]


def judge_of(report: Report) -> Judge:
    """The judge of ``report``'s comparisons, from its ``rollouts[]`` at its projection."""
    units = report_units(report, report.projection) if report.rollouts else {}

    def judge(name: str, reference: str) -> str:
        mine, theirs = units.get(name, []), units.get(reference, [])
        if not mine or not theirs:
            return "; not tested against the noise (no per-rollout figures)"
        slower = sum(mine) / len(mine) > sum(theirs) / len(theirs)
        found = evidence(theirs, mine) if slower else evidence(mine, theirs)
        if found.p_value is None:
            return f"; not tested against the noise ({found.why})"
        if found.credible:
            return f"; beyond the noise ({found.why})"
        return f"; within the noise, not a finding ({found.why})"

    return judge
