"""No orphans on local: real pytest subprocesses and real signals, then a look at the processes.

Every workload writes the pid of a process it started (a step, or a background process of a
step) into ``pids``; afterwards none of them may still run, and no workdir may be left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.pytest_process import interrupt, wait_for

from pytest_rollout_tax.substrates.local import WORKDIR_PREFIX


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet collected, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def gone(pids: list[int]) -> bool:
    """Whether every pid is gone within a few seconds (SIGKILL is not instant)."""
    try:
        wait_for(lambda: not any(alive(pid) for pid in pids), "the processes to die", 10)
    except AssertionError:
        return False
    return True


def write_suite(tmp_path: Path, source: str) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_work.py").write_text(textwrap.dedent(source))
    (tmp_path / "root").mkdir()
    return tmp_path / "pids"


def pytest_command(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--substrate=local",
        "--substrate-opt=local.root=root",
        *args,
    ]


def environment(pids: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"PIDS": str(pids), "PYTHONUNBUFFERED": "1"}


def started(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def workdirs(tmp_path: Path) -> list[str]:
    return [path.name for path in (tmp_path / "root").glob(f"{WORKDIR_PREFIX}*")]


def test_closing_a_sandbox_ends_the_background_processes_of_its_steps(tmp_path):
    pids = write_suite(
        tmp_path,
        """
        import os

        def test_background(sandbox):
            pids = os.environ["PIDS"]
            sandbox.exec(f"sleep 300 > /dev/null 2>&1 & echo $! >> {pids}")
            sandbox.exec(f"setsid sleep 301 > /dev/null 2>&1 & echo $! >> {pids}")
            sandbox.exec(f"(cd /; sleep 302 > /dev/null 2>&1 & echo $! >> {pids})")
            sandbox.exec(f"(cd /; setsid sleep 303 > /dev/null 2>&1 & echo $! >> {pids})")
        """,
    )
    done = subprocess.run(
        pytest_command(), cwd=tmp_path, env=environment(pids), capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stdout.decode()
    assert len(started(pids)) == 4
    # the first and the third stayed in their step's group and session; the second left
    # both (setsid) but stayed in the workdir; the fourth left all three, and still carries
    # the sandbox's ROLLOUT_TAX_SANDBOX
    assert gone(started(pids)), [pid for pid in started(pids) if alive(pid)]
    assert workdirs(tmp_path) == []


@pytest.mark.parametrize(
    ("signum", "where"),
    [(signal.SIGINT, "exec"), (signal.SIGTERM, "exec"), (signal.SIGINT, "python")],
    ids=["sigint-in-exec", "sigterm-in-exec", "sigint-in-python"],
)
def test_an_interrupted_run_kills_the_step_and_its_background_processes(tmp_path, signum, where):
    """A real signal to a running pytest while its test waits in a step or in Python."""
    pids = write_suite(
        tmp_path,
        f"""
        import os
        import time

        def test_interrupted(sandbox):
            pids = os.environ["PIDS"]
            sandbox.exec(f"sleep 300 > /dev/null 2>&1 & echo $! >> {{pids}}")
            if {where!r} == "exec":
                sandbox.exec(f"echo $$ >> {{pids}}; exec sleep 120")
            else:
                with open(pids, "a") as log:
                    log.write("0\\n")
                time.sleep(120)

        def test_never_runs(sandbox):
            pass
        """,
    )
    code, output = interrupt(
        pytest_command("-v"),
        cwd=tmp_path,
        env=environment(pids),
        ready=lambda: len(started(pids)) == 2,
        signum=signum,
    )
    assert code == 2, output  # pytest's "interrupted"
    assert "test_never_runs PASSED" not in output
    running = [pid for pid in started(pids) if pid]
    assert gone(running), [pid for pid in running if alive(pid)]
    assert workdirs(tmp_path) == []
