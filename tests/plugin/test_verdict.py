"""The session's verdict: why the rollout tax failed a session, what a gated run checked, and
none for a run that neither gated nor failed (the real runs: test_hooks_gating.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.gate.compare import Check, Verdict, compare_reports
from pytest_rollout_tax.gate.storage import SavedRun, Storage
from pytest_rollout_tax.plugin.gating import Gate
from pytest_rollout_tax.plugin.verdict import SessionVerdict, session_verdict

BASELINE = report(rollouts("local", COLD))


def gate(*checks: str) -> Gate:
    saved = SavedRun(Path("main.json"), BASELINE)
    parsed = tuple(Check.parse(text) for text in checks)
    return Gate(Storage.at(None), compare="main", checks=parsed, baseline=saved)


def verdict_of(gate_: Gate, verdict: Verdict, **given) -> SessionVerdict | None:
    flags = {"shared": 0, "history_fail": False, "history_failed": False, "write_failed": False}
    return session_verdict(gate_, verdict, **{**flags, **given})


def test_a_failed_check_is_a_reason_and_the_line_names_the_exit_status() -> None:
    checks = gate("cold_start.p95:15%")
    found = compare_reports(BASELINE, report(rollouts("local", COLD, 10)), checks.checks)
    verdict = verdict_of(checks, found)
    assert verdict.failed
    assert verdict.line(1) == (
        "rollout-tax gate: FAILED (exit status 1; 1 check(s): 1 failed, against main.json): "
        "local cold_start.p95 +900.0% (threshold 15%)"
    )


def test_a_passed_gate_says_what_it_checked() -> None:
    checks = gate("cold_start.p95:15%", "step.p50:15%")
    verdict = verdict_of(checks, compare_reports(BASELINE, BASELINE, checks.checks))
    assert verdict.line(0) == ("rollout-tax gate: passed (2 check(s): 2 passed, against main.json)")


def test_every_other_way_the_rollout_tax_fails_a_session_is_a_reason() -> None:
    verdict = verdict_of(Gate(), Verdict(), shared=2, history_fail=True, history_failed=True,
                         write_failed=True)  # fmt: skip
    assert verdict.reasons == (
        "a new slowdown in the saved runs' history",
        "2 sandbox(es) served more than one rollout",
        "an output asked for was not written",
    )


def test_a_run_neither_gated_nor_failed_has_no_verdict() -> None:
    assert verdict_of(Gate(), Verdict()) is None
    missing = Gate(Storage.at(None), compare="main", checks=(Check.parse("step.p50:1%"),))
    assert verdict_of(missing, Verdict()).line(0) == (
        "rollout-tax gate: no baseline ('main': 1 check(s) not applied, "
        "--rollout-compare-missing=pass)"
    )


@pytest.mark.parametrize(
    ("now", "checks", "state", "tally", "status"),
    [
        (report(rollouts("local", COLD, 10)), ("cold_start.p95:15%", "step.p50:99999%"),
         "failed", "2 check(s): 1 failed, 1 passed", 1),
        (report(rollouts("local", [*COLD[:-1], 1.6])), ("cold_start.p95:15%",), "passed",
         "1 check(s): 1 crossed inside the noise (not failed)", 0),
        (report(rollouts("docker", COLD)), ("cold_start.p95:15%", "step.p50:5%"),
         "not applicable", "2 check(s): 2 not judged", 0),
    ],
)  # fmt: skip
def test_first_line_last_line_counts_and_exit_status_agree(now, checks, state, tally, status):
    """Issue 42, finding 2: "passed 0 of 2 check(s)" sat beside "gate: passed". Now the
    section's last line, the session's verdict line (first and last), the counts and the exit
    status all read one tally."""
    given = gate(*checks)
    found = compare_reports(BASELINE, now, given.checks)
    session = verdict_of(given, found)
    exit_status = session.exit_status(0)
    last = unwrapped(found.regression or found.summary)[-1]
    assert last == f"gate {state}: {tally}"
    assert (found.state, found.exit_status, exit_status) == (state, status, status)
    line = session.line(exit_status)
    if state == "failed":
        assert line.startswith(f"rollout-tax gate: FAILED (exit status 1; {tally}, against ")
    else:
        assert line == f"rollout-tax gate: {state} ({tally}, against main.json)"
