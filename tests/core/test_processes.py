import os
import subprocess
import sys

from pytest_rollout_tax.core.processes import process_alive


def test_this_process_runs_and_an_ended_one_does_not() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)


def test_a_zombie_is_dead() -> None:
    """A child that exited and was not waited for still answers ``kill(pid, 0)``."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, left unreaped
    try:
        assert not process_alive(child.pid)
    finally:
        child.wait()
