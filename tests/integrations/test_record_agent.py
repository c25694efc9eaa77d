"""A real agent loop recorded outside pytest: mini-swe-agent's own DefaultAgent, driven by its
deterministic model (whose delay is the think time), on docker and docker-session; then the
trajectory it saved, replayed by the plugin on the same substrate, to hold the two up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("minisweagent", reason="the [mini] extra is not installed")

from minisweagent.agents.default import DefaultAgent
from minisweagent.models.test_models import DeterministicModel, make_output

from pytest_rollout_tax import record
from pytest_rollout_tax.core.noise import ALPHA, evidence
from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.integrations.mini_swe_agent import SandboxEnvironment
from pytest_rollout_tax.recording import read

pytestmark = pytest.mark.usefixtures("sandbox_image")

COMMANDS = [
    "printf 'fixed\\n' > fix.txt",
    "cat fix.txt",
    "ls -la",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; cat fix.txt",
]
#: The model's delay before each action, as mini-swe-agent's test model makes it.
DELAYS = [0.05, 0.15, 0.1, 0.2]
ROLLOUTS = 5
#: How far a recorded think time may be from the gap the agent itself saw before the step.
THINK_TOLERANCE_S = 0.005
#: The per-step tax of one side may not be credibly past the other's by more than this.
TAX_BAND = 0.5


class TimedModel(DeterministicModel):
    """The deterministic model, stamping its answers as a real model's are and timing each
    query that ends in an action (its delay included)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.query_times: list[float] = []
        self._depth = 0  # the test model asks itself again after a delay

    def query(self, *args, **kwargs):
        started = time.perf_counter()
        self._depth += 1
        try:
            output = super().query(*args, **kwargs)
        finally:
            self._depth -= 1
        if not self._depth:
            self.query_times.append(time.perf_counter() - started)
        output["extra"]["timestamp"] = time.time()
        return output


class TimedEnvironment(SandboxEnvironment):
    """The sandbox environment, noting when the agent called it and when it returned: the
    gap between the two is the agent's time between steps, as the agent saw it."""

    def __init__(self, sandbox, **kwargs):
        super().__init__(sandbox, **kwargs)
        self.calls: list[float] = []
        self.returns: list[float] = []

    def execute(self, *args, **kwargs):
        self.calls.append(time.perf_counter())
        try:
            return super().execute(*args, **kwargs)
        finally:
            self.returns.append(time.perf_counter())

    def gaps(self) -> list[float]:
        """The agent's time before each step but the first (its start is the recorder's)."""
        return [call - done for call, done in zip(self.calls[1:], self.returns, strict=False)]


def outputs() -> list[dict]:
    found = []
    for delay, command in zip(DELAYS, COMMANDS, strict=True):
        found += [make_output("", [{"command": f"/sleep {delay}"}])]
        found += [make_output("Next.", [{"command": command}])]
    return found


def run_agents(substrate: str, runs, trajectory) -> list[tuple[list[float], list[float]]]:
    """ROLLOUTS recorded agent runs; each one's model time per step and the gaps it saw."""
    times = []
    with record(substrate, out=runs, probes=5) as recorder:
        for _ in range(ROLLOUTS):
            model = TimedModel(outputs=outputs())
            with recorder.rollout("fix-the-bug") as sandbox:
                environment = TimedEnvironment(sandbox, env={"TOKEN": "canary-agent-0c1d"})
                agent = DefaultAgent(
                    model,
                    environment,
                    system_template="You fix bugs.",
                    instance_template="{{task}}",
                    cost_limit=0,
                    output_path=trajectory,
                )
                assert agent.run("Fix the bug")["submission"] == "fixed\n"
            times.append((model.query_times, environment.gaps()))
    return times


def replay(tmp_path, substrate: str, trajectory) -> dict:
    """The plugin's replay of the saved trajectory, ROLLOUTS rounds on ``substrate``."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--substrate={substrate}",
            f"--rollout-replay={trajectory}", f"--rollout-rounds={ROLLOUTS}",
            "--rollout-json=replayed.json",
        ],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "replayed.json").read_text())


def tax(rollouts: list[dict]) -> list[float]:
    """Each rollout's per-step tax: the mean of its no-op probes."""
    return [sum(r["action_probes_s"]) / len(r["action_probes_s"]) for r in rollouts]


def within_the_noise(a: list[float], b: list[float]) -> bool:
    """Neither side credibly past the other raised by TAX_BAND (the gate's own test)."""
    return not any(
        evidence([x * (1 + TAX_BAND) for x in base], now).credible for base, now in ((a, b), (b, a))
    )


@pytest.mark.parametrize("substrate", ["docker", "docker-session"])
def test_a_recorded_agent_run_against_its_replay_in_the_plugin(tmp_path, substrate):
    runs, trajectory = tmp_path / "runs", tmp_path / "run.traj.json"
    agents = run_agents(substrate, runs, trajectory)
    recorded = read(runs).rollouts
    assert [r["outcome"] for r in recorded] == ["passed"] * ROLLOUTS
    for rollout, (model_times, gaps) in zip(recorded, agents, strict=True):
        steps = list(steps_of(rollout["steps"]))
        assert [s.kind for s in steps] == ["exec"] * len(COMMANDS)
        assert [s.exit_code for s in steps] == [0, 0, 0, 0]
        thinks = [s.think_s for s in steps]
        # each think time holds the model's whole delay, and is the gap the agent saw
        assert all(t >= m for t, m in zip(thinks, model_times, strict=True)), thinks
        off = [abs(t - g) for t, g in zip(thinks[1:], gaps, strict=True)]
        assert max(off) < THINK_TOLERANCE_S, (thinks, gaps)
        assert rollout["cold_start_s"] > 0 and rollout["teardown_s"] > 0
    assert "canary-agent-0c1d" not in "".join(p.read_text() for p in runs.iterdir())

    replayed = replay(tmp_path, substrate, trajectory)["rollouts"]
    assert len(replayed) == ROLLOUTS
    assert {len(r["steps"]["kind"]) for r in replayed} == {len(COMMANDS)}
    assert within_the_noise(tax(recorded), tax(replayed)), (tax(recorded), tax(replayed))
    assert ALPHA == 0.05  # the band above is tested at the gate's own level
