"""Issue 42, finding 1, on real runs: a suite of two tests, one slowed (a 300 ms sleep in every
third step), gated on local and on docker-session. Pooled, the slowdown hid as noise and the
run passed; judged like with like it fails naming the slowed test, while the unchanged test,
selected alone, passes against the same baseline. The sleep is long enough to stand out of
the noise of a shared 2-core machine (step CV up to 45 % between runs), which the gate's own
lines state, and the thresholds (100 %) above the drift a loaded machine puts between two runs
of the unchanged test: at 10 % it once failed in CI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SUITE = """
import os

import pytest

SLOW = os.environ.get("GATE_TEST_SLOW") == "1"


@pytest.mark.trajectory(steps=9, rounds=6)
def test_one(sandbox):
    for _ in range(9):
        assert sandbox.exec("true").exit_code == 0


@pytest.mark.trajectory(steps=9, rounds=6)
def test_two(sandbox):
    for index in range(9):
        command = "sleep 0.3" if SLOW and index % 3 == 0 else "true"
        assert sandbox.exec(command).exit_code == 0
"""


def pytest_run(cwd: Path, *args: str, slow: bool = False) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(COLUMNS="400", GATE_TEST_SLOW="1" if slow else "0")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("substrate", ["local", "docker-session"])
def test_one_slowed_test_of_two_fails_the_gate_and_is_named(
    tmp_path: Path, substrate: str, request: pytest.FixtureRequest
) -> None:
    if substrate != "local":
        request.getfixturevalue("sandbox_image")
    (tmp_path / "test_pair.py").write_text(textwrap.dedent(SUITE))
    selected = f"--substrate={substrate}"
    code, output = pytest_run(tmp_path, selected, "--rollout-save=main")
    assert code == 0, output
    # thresholds above the load's drift between two runs (the slowed test adds ~10x its steps)
    gate = ("--rollout-compare=main", "--rollout-compare-fail=step.mean:100%",
            "--rollout-compare-fail=worker_hours:100%")  # fmt: skip

    code, output = pytest_run(tmp_path, selected, *gate, slow=True)
    assert code == 1, output
    lines = output.splitlines()
    failed = [line for line in lines if line.startswith(f"FAILED {substrate} step.mean")]
    assert failed and "permutation test within 2 tests p=" in failed[0], output
    [carried] = [line for line in lines if line.startswith(f"{substrate} step.mean carried by: ")]
    assert "test_pair.py::test_two " in carried and "not alone: test_pair.py::test_one " in carried
    verdict = [line for line in lines if line.startswith("rollout-tax gate: FAILED (exit status 1")]
    assert len(verdict) == 2 and "in test_pair.py::test_two" in verdict[0], output

    code, output = pytest_run(tmp_path, selected, "-k", "test_one", *gate, slow=True)
    assert code == 0, output
    assert "tests kept out of the like-with-like figures (in the baseline only: " in output
    assert "rollout-tax gate: passed (2 check(s): " in output, output
