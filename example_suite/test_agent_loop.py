"""A 150-step agent loop: the shape of one coding-agent RL trajectory.

Each turn the "agent" inspects the repository, edits a file, runs the code and reads the
output back, as a policy does between model calls. Copy it and replace the tool calls with
your agent's to measure what your substrate costs per step.
"""

import pytest

STEPS = 150
TURNS = 37  # 4 tool calls each, plus one to set up and one to check: 150


@pytest.mark.trajectory(steps=STEPS, rounds=3)
def test_agent_loop(sandbox, rollout):
    """Inspect, edit, run, observe: 4 tool calls per turn, 150 in all."""
    sandbox.write_file("counter.py", "import sys\nprint(int(sys.argv[1]) + 1)\n")
    value = 0
    for turn in range(TURNS):
        listing = sandbox.exec("ls")  # inspect
        assert "counter.py" in listing.stdout
        sandbox.write_file(f"notes/turn_{turn}.txt", f"turn {turn}: value {value}\n")  # edit
        run = sandbox.exec(["python3", "counter.py", str(value)])  # run
        assert run.ok, run.stderr
        value = int(run.stdout)
        assert sandbox.read_file(f"notes/turn_{turn}.txt").endswith(
            f"value {value - 1}\n"
        )  # observe
    assert sandbox.exec("ls notes | wc -l").stdout.strip() == str(TURNS)
    assert value == TURNS
    assert len(rollout.steps) == STEPS
