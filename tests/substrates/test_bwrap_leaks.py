"""No leaks on bwrap: real pytest subprocesses, then a look at this host. No sandbox directory,
process or mount of the session outlives it: on a clean exit, on SIGINT mid-step, and after
SIGKILL (the sandboxes end with the session's pipe; ``--rollout-reap`` removes their layers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.pytest_process import interrupt, wait_for

pytestmark = pytest.mark.usefixtures("bwrap_ready")

WORKLOAD = """
import pytest

@pytest.mark.trajectory(rounds=2)
def test_leaves_a_process(sandbox):
    sandbox.exec("(setsid sleep {token} >/dev/null 2>&1 &); echo left > /tmp/left")
    {hang}
"""
HANG = 'sandbox.exec("sleep 600")'


def sandbox_processes(token: str) -> list[int]:
    """This host's processes running ``sleep TOKEN`` (the workload's, from inside a sandbox)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                    if cmdline.read() == f"sleep\0{token}\0".encode():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def mounts_of(cache: Path) -> list[int]:
    """Processes of this host that see a mount under ``cache`` (a sandbox's overlay)."""
    seen = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/mountinfo") as mountinfo:
                    if str(cache) in mountinfo.read():
                        seen.append(int(entry.name))
            except OSError:
                continue
    return seen


def command(cache: Path, transport: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--substrate=bwrap",
        f"--substrate-opt=bwrap.cache={cache}", f"--substrate-opt=bwrap.transport={transport}",
        *args,
    ]  # fmt: skip


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, Path, str]:
    token = str(900000 + uuid.uuid4().int % 99999)
    return tmp_path, tmp_path / "cache", token


def assert_nothing_left(cache: Path, token: str) -> None:
    wait_for(lambda: not sandbox_processes(token), "the sandbox's processes to end", 30)
    assert list((cache / "sandboxes").iterdir()) == []
    assert mounts_of(cache) == []


@pytest.mark.parametrize("transport", ["exec", "session"])
def test_a_clean_run_leaves_nothing(suite, transport):
    root, cache, token = suite
    (root / "test_work.py").write_text(WORKLOAD.format(token=token, hang=""))
    done = subprocess.run(
        command(cache, transport), cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert_nothing_left(cache, token)


@pytest.mark.parametrize("transport", ["exec", "session"])
def test_sigint_mid_step_leaves_nothing(suite, transport):
    root, cache, token = suite
    (root / "test_work.py").write_text(WORKLOAD.format(token=token, hang=HANG))
    code, output = interrupt(
        command(cache, transport),
        cwd=root,
        env=dict(os.environ),
        ready=lambda: bool(sandbox_processes(token)),
        signum=signal.SIGINT,
    )
    assert code != 0, output
    assert_nothing_left(cache, token)


@pytest.mark.parametrize("transport", ["exec", "session"])
def test_sigkill_ends_the_sandboxes_and_reap_removes_their_layers(suite, transport):
    root, cache, token = suite
    (root / "test_work.py").write_text(WORKLOAD.format(token=token, hang=HANG))
    interrupt(
        command(cache, transport),
        cwd=root,
        env=dict(os.environ),
        ready=lambda: bool(sandbox_processes(token)),
        signum=signal.SIGKILL,
    )
    # the session's pipe closed with it: the kernel ended every process of the sandbox
    wait_for(lambda: not sandbox_processes(token), "the sandbox's processes to end", 30)
    assert mounts_of(cache) == []
    assert len(list((cache / "sandboxes").iterdir())) == 1  # its layer, for the reaper
    reaped = subprocess.run(
        command(cache, transport, "--rollout-reap"),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    assert "removed 1 leftover sandbox(es)" in reaped.stdout
    assert_nothing_left(cache, token)
