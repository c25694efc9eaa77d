"""mini-swe-agent's own agent loop, driven by its deterministic test model, on our substrates."""

import pytest

pytest.importorskip("minisweagent", reason="the [mini] extra is not installed")

from support.workloads import ROOT

from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.gate import storage

AGENT_WORKLOAD = """
import os
import time
from pathlib import Path

import pytest
from minisweagent.agents.default import DefaultAgent
from minisweagent.models.test_models import DeterministicModel, make_output

from pytest_rollout_tax.integrations.mini_swe_agent import SandboxEnvironment
from pytest_rollout_tax.replay import load

OUTPUTS = [
    make_output("Write the fix.", [{"command": "printf 'fixed\\\\n' > fix.txt"}]),
    make_output("Two checks.", [{"command": "cat fix.txt"}, {"command": "ls missing 2>/dev/null"}]),
    make_output("Slow.", [{"command": "sleep 5"}]),
    make_output("Done.", [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat fix.txt"}]),
]



class StampedModel(DeterministicModel):
    # stamps each output when it answers, as a real model's response is: make_output stamps
    # it when it is made, and a replay would read those steps back in time as unknown intervals

    def query(self, *args, **kwargs):
        output = super().query(*args, **kwargs)
        output["extra"]["timestamp"] = time.time()
        return output


@pytest.mark.trajectory(steps=5)
def test_agent_loop(sandbox, tmp_path):
    model = StampedModel(outputs=OUTPUTS)
    env = SandboxEnvironment(sandbox, env={"TOKEN": "s3cret"}, timeout=1)
    saved = tmp_path / "run.traj.json"
    agent = DefaultAgent(model, env, system_template="You fix bugs.",
                         instance_template="{{task}} on {{substrate}}", cost_limit=0,
                         output_path=saved)
    result = agent.run("Fix the bug")
    assert result == {"exit_status": "Submitted", "submission": "fixed\\n"}
    observations = [m["extra"] for m in agent.messages if "raw_output" in m.get("extra", {})]
    assert [(o["raw_output"], o["returncode"]) for o in observations[:3]] == [
        ("", 0), ("fixed\\n", 0), ("", 2),
    ]
    assert observations[3]["returncode"] == -1  # past the 1 s timeout, as mini reports it
    assert "1 s timeout" in observations[3]["exception_info"]
    assert agent.messages[1]["content"] == f"Fix the bug on {sandbox.rollout.substrate}"
    assert "s3cret" not in saved.read_text()
    # the saved trajectory replays: one step per action, the recorded sizes and codes
    [recorded] = load(saved)
    assert [s.command for s in recorded.steps] == [a["command"] for o in OUTPUTS
                                                   for a in o["extra"]["actions"]]
    # the submitting action ends the run before its output is recorded: unknown
    assert [s.exit_code for s in recorded.steps] == [0, 0, 2, -1, None]
    assert [s.output_bytes for s in recorded.steps] == [0, 6, 0, 0, None]
"""


@pytest.mark.parametrize("substrate", ["local", "docker"])
def test_mini_swe_agent_runs_its_agent_loop_on_a_substrate(
    pytester, monkeypatch, request, substrate
):
    if substrate == "docker":
        request.getfixturevalue("sandbox_image")
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    pytester.makepyfile(test_agent=AGENT_WORKLOAD)
    result = pytester.runpytest(f"--substrate={substrate}", "--rollout-json=report.json",
                                "--rollout-probes=1")  # fmt: skip
    result.assert_outcomes(passed=1)
    report = storage.load(pytester.path / "report.json").report
    [rollout] = report.rollouts
    steps = list(steps_of(rollout["steps"]))
    # every action one exec step, the timed-out one included; the last one submitted
    assert [step.kind for step in steps] == ["exec"] * 5
    assert [step.exit_code for step in steps] == [0, 0, 2, None, 0]
    submitted = len("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\nfixed\n")
    assert [step.output_bytes for step in steps] == [0, 6, 0, None, submitted]
    assert rollout["outcome"] == "passed"
    assert report.substrates[substrate].rollouts == 1
    assert "s3cret" not in (pytester.path / "report.json").read_text()


def test_the_documented_agent_workload_passes(pytester, monkeypatch):
    docs = (ROOT / "docs" / "replay.md").read_text()
    section = docs.split("## mini-swe-agent on any substrate", 1)[1]
    monkeypatch.setenv("MSWEA_SILENT_STARTUP", "1")
    pytester.makepyfile(test_documented=section.split("```python\n", 1)[1].split("```", 1)[0])
    pytester.runpytest().assert_outcomes(passed=1)


def test_an_unsupported_mini_swe_agent_is_one_line_naming_both_versions(monkeypatch):
    from pytest_rollout_tax import ConfigError
    from pytest_rollout_tax.integrations import mini_swe_agent, versions

    monkeypatch.setattr(versions.metadata, "version", lambda name: "3.0.0")
    with pytest.raises(ConfigError) as raised:
        versions.require("mini-swe-agent", mini_swe_agent.SUPPORTED, "the mini adapter")
    assert str(raised.value) == (
        "the mini adapter supports mini-swe-agent>=2.4,<3; installed: mini-swe-agent 3.0.0"
    )
