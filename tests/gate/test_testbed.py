"""Testbeds: recorded in a saved run, a comparison across them warned (or refused with
--rollout-compare-strict), and a run saved before them loaded with its testbed unknown."""

from __future__ import annotations

import dataclasses

from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.gate import testbed as beds
from pytest_rollout_tax.gate.checks import Check
from pytest_rollout_tax.gate.compare import compare_reports
from pytest_rollout_tax.report.document import Report

CHECKS = [Check.parse("cold_start.p50:15%")]


def on(cpus: int) -> Report:
    run = report(rollouts("local", COLD))
    machine = {**run.machine, "cpu_count": cpus, "ci": None, "machine": "x86_64"}
    return beds.stamped(dataclasses.replace(run, machine=machine))


def test_a_saved_run_records_each_substrates_testbed() -> None:
    saved = Report.from_dict(on(4).to_dict())  # through the saved JSON
    bed = beds.testbed_of(saved, "local")
    assert bed is not None and bed.cpus == 4 and bed.host_class == "local x x86_64"
    assert bed.provider == saved.substrates["local"].kind


def test_another_testbed_warns_naming_what_differs_and_strict_refuses() -> None:
    verdict = compare_reports(on(4), on(8), CHECKS)
    assert "warning: local was not measured on the baseline's testbed: cpus 4 -> 8" in (
        unwrapped(verdict.summary)
    )
    assert verdict.state == "passed" and verdict.exit_status == 0
    strict = compare_reports(on(4), on(8), CHECKS, strict=True)
    assert strict.state == "refused" and strict.exit_status == 4
    assert strict.summary == [
        "rollout-tax: --rollout-compare-strict: local was not measured on the baseline's "
        "testbed: cpus 4 -> 8: not compared"
    ]
    assert compare_reports(on(4), on(4), CHECKS, strict=True).state == "passed"


def test_a_run_saved_before_testbeds_loads_and_compares_as_unknown() -> None:
    old = Report.from_dict(report(rollouts("local", COLD)).to_dict())  # rollout-tax/2, none
    assert "testbeds" not in old.machine and beds.testbed_of(old, "local") is None
    verdict = compare_reports(old, on(4), CHECKS, strict=True)  # unknown is not refused
    assert verdict.state == "passed"
    assert (
        "note: local: the baseline's testbed is unknown (saved before testbeds were recorded)"
        in unwrapped(verdict.summary)
    )
