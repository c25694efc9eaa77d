"""A recording process killed with SIGKILL mid-rollout, on real docker: what it wrote stays
readable, its unfinished rollout reads as interrupted, and --rollout-reap removes its sandbox."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from support.pytest_process import interrupt

from pytest_rollout_tax.core.substrate import SESSION_LABEL
from pytest_rollout_tax.recording import read

pytestmark = pytest.mark.usefixtures("sandbox_image")

#: Records one whole rollout, then starts another and hangs in its step until killed.
RECORDING = """
import sys
from pathlib import Path

from pytest_rollout_tax import record

recorder = record("docker", out=sys.argv[1], probes=1)
with recorder.rollout("finished") as sandbox:
    sandbox.exec("true")
sandbox = recorder.start("killed")
Path(sys.argv[2]).write_text(recorder.session)
sandbox.exec("sleep 300")
"""


def test_a_killed_recording_is_readable_interrupted_and_reaped(tmp_path, docker_client):
    runs, ready = tmp_path / "runs", tmp_path / "session"
    (tmp_path / "record.py").write_text(RECORDING)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    code, output = interrupt(
        [sys.executable, "record.py", str(runs), str(ready)],
        cwd=tmp_path,
        env=env,
        ready=ready.exists,
        signum=signal.SIGKILL,
    )
    assert code == -signal.SIGKILL, output
    recorded = read(runs)
    assert sorted(r["outcome"] for r in recorded.rollouts) == ["interrupted", "passed"]
    assert recorded.interrupted == recorded.unfinished == 1
    label = {"label": f"{SESSION_LABEL}={ready.read_text()}"}
    [left] = docker_client.containers.list(all=True, filters=label)
    assert left.id in {r["sandbox_id"] for r in recorded.rollouts}
    reap = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--substrate=docker"]
    done = subprocess.run(
        [*reap, "--rollout-reap"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert docker_client.containers.list(all=True, filters=label) == []
