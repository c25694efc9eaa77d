"""pytest in a subprocess, for the leak tests: wait for a condition, then send a real signal."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Poll ``predicate`` until it holds (a synchronization, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def interrupt(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    ready: Callable[[], bool],
    signum: int,
) -> tuple[int, str]:
    """Run ``command``, send it ``signum`` once ``ready()`` holds; its exit status and output."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(lambda: process.poll() is not None or ready(), "the test to be under way")
        assert process.poll() is None, process.communicate()[0]
        process.send_signal(signum)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, output
