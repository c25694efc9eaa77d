"""The local substrate, for real: child processes in a fresh temporary directory."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from pytest_rollout_tax import get_substrate
from pytest_rollout_tax.errors import SandboxStartError
from pytest_rollout_tax.substrates.local import Leftovers


@pytest.fixture
def sandbox():
    with get_substrate("local").start() as sb:
        yield sb


def test_a_sandbox_is_a_fresh_directory_on_this_host_with_its_phases(sandbox):
    assert os.path.isabs(sandbox.workdir) and os.listdir(sandbox.workdir) == []
    assert list(sandbox.rollout.phases) == ["create", "first_exec"]
    sandbox.write_file("pkg/mod.py", "x = 1\n")
    assert Path(sandbox.workdir, "pkg/mod.py").read_text() == "x = 1\n"


def test_env_is_clean_and_extendable(sandbox):
    os.environ["ROLLOUT_TAX_SECRET_PROBE"] = "leak"
    try:
        result = sandbox.exec("echo ${ROLLOUT_TAX_SECRET_PROBE:-unset} $FOO", env={"FOO": "bar"})
    finally:
        del os.environ["ROLLOUT_TAX_SECRET_PROBE"]
    assert result.stdout == "unset bar\n"


def test_a_relative_root_still_gives_absolute_workdirs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "root").mkdir()
    with get_substrate("local", root="root").start() as sandbox:
        assert sandbox.workdir.startswith(f"{tmp_path}/root/")


def test_leftovers_are_killed_only_while_their_group_id_is_still_the_steps(tmp_path):
    """A group recorded at a step's end is killed if a member started by then still runs;
    a process that got the id later (the step's group died, the id was reused) is spared."""
    ours = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        leftovers = Leftovers(str(tmp_path))
        leftovers.step_ended(ours.pid)
        leftovers.groups[stranger.pid] = 0  # recorded at boot: before the stranger started
        leftovers.kill()
        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for process in (ours, stranger):
            process.kill()
            process.wait()


def test_close_removes_the_workdir_and_times_teardown():
    sb = get_substrate("local").start()
    workdir = sb.workdir
    sb.close()
    sb.close()
    assert not os.path.exists(workdir)
    assert sb.rollout.teardown_s > 0
    assert sb.rollout.trajectory_s >= sb.rollout.cold_start_s + sb.rollout.teardown_s


def test_a_sandbox_that_cannot_start_is_a_start_error(tmp_path):
    substrate = get_substrate("local", root=str(tmp_path / "missing"))
    with pytest.raises(SandboxStartError, match=r"local: cannot make a workdir in .*/missing"):
        substrate.start()


def test_reap_removes_leftovers_of_dead_sessions_and_spares_live_ones(tmp_path):
    dead_pid = subprocess.Popen(["true"])  # a pid that has exited
    dead_pid.wait()
    dead = tmp_path / f"rollout-tax-aaaa-{dead_pid.pid}-x1"
    live = tmp_path / f"rollout-tax-bbbb-{os.getpid()}-y2"
    unrelated = tmp_path / "rollout-tax-notes"
    for path in (dead, live, unrelated):
        path.mkdir()
    substrate = get_substrate("local", root=str(tmp_path))
    assert substrate.reap(None) == 1
    assert not dead.exists() and live.exists() and unrelated.exists()
    assert substrate.reap("bbbb") == 1
    assert not live.exists() and unrelated.exists()


def test_a_workdir_carries_its_session_and_process(tmp_path):
    substrate = get_substrate("local", root=str(tmp_path))
    with substrate.start() as sandbox:
        assert Path(sandbox.workdir).name.startswith(
            f"rollout-tax-{substrate.session_id}-{os.getpid()}-"
        )
        assert substrate.reap(None) == 0  # its own process is alive
