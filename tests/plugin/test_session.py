"""The session's end: what the run says once, whatever the number of its rollouts."""

import json

import pytest

from pytest_rollout_tax.core import stepper

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=10, rounds=2)
def test_a(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"

@pytest.mark.trajectory(steps=10)
def test_b(sandbox):
    assert sandbox.exec("echo hi").stdout == "hi\\n"
"""
VARIANT = """
[tool.rollout-tax.substrates.local-session]
kind = "local"
transport = "session"
"""
RELAYED = "local-session: session steps went through the shell's relay, not the step helper: "


@pytest.fixture
def suite(pytester):
    pytester.makepyprojecttoml(VARIANT)
    pytester.makepyfile(test_workload=WORKLOAD)
    return pytester


def test_a_run_whose_sessions_relay_says_why_once(suite, monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "off")
    result = suite.runpytest("--substrate=local-session", "--rollout-json=report.json")
    result.assert_outcomes(passed=3)
    lines = [line for line in result.outlines if line.startswith(RELAYED)]
    assert lines == [RELAYED + "ROLLOUT_TAX_STEPPER=off"]
    rollouts = json.loads((suite.path / "report.json").read_text())["rollouts"]
    assert {(r["step_path"], r["relay_reason"]) for r in rollouts} == {
        ("relay", "ROLLOUT_TAX_STEPPER=off")
    }


def test_a_run_the_helper_served_says_nothing_of_it_and_records_it(suite, monkeypatch):
    monkeypatch.delenv(stepper.SWITCH, raising=False)
    result = suite.runpytest("--substrate=local-session", "--rollout-json=report.json")
    result.assert_outcomes(passed=3)
    assert "relay" not in result.stdout.str()
    rollouts = json.loads((suite.path / "report.json").read_text())["rollouts"]
    assert [r["step_path"] for r in rollouts] == ["prebuilt"] * 3
    assert not any("relay_reason" in r for r in rollouts)
