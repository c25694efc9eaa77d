"""The cold-start progress line, driven by a fake clock: when it shows, what it says, erasing it."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from pytest_rollout_tax.plugin.progress import ColdStartProgress, TerminalLine


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A LiveLine that keeps what was drawn: shown texts, and None for each erase."""

    def __init__(self) -> None:
        self.drawn: list[str | None] = []

    def show(self, text: str) -> None:
        self.drawn.append(text)

    def clear(self) -> None:
        self.drawn.append(None)


def progress() -> tuple[ColdStartProgress, FakeClock, Recorder]:
    clock, line = FakeClock(), Recorder()
    return ColdStartProgress(line, clock=clock, after_s=2.0), clock, line


def test_a_quick_cold_start_shows_nothing() -> None:
    tracker, clock, line = progress()
    tracker.expect("docker", 32)
    token = tracker.starting("docker")
    clock.now += 1.9
    tracker.refresh()
    tracker.finished(token, 1.9)
    tracker.refresh()
    assert line.drawn == []


def test_a_long_cold_start_shows_the_counts_and_is_erased_when_ready() -> None:
    tracker, clock, line = progress()
    tracker.expect("docker", 32)
    for cold in [0.2, 0.25, 0.3] * 4:  # 12 ready, p50 250ms
        tracker.finished(tracker.starting("docker"), cold)
    token = tracker.starting("docker")
    clock.now += 2.5
    tracker.refresh()
    clock.now += 0.5
    tracker.refresh()
    tracker.refresh()  # nothing changed: not redrawn
    tracker.finished(token, 3.0)
    assert line.drawn == [
        "docker: 12/32 ready, p50 250ms, 1 starting for 2.5s",
        "docker: 12/32 ready, p50 250ms, 1 starting for 3s",
        None,
    ]
    assert tracker.text() is None


def test_a_burst_counts_every_sandbox_and_the_oldest_pending_one_is_timed() -> None:
    tracker, clock, line = progress()
    tokens = [tracker.starting("e2b") for _ in range(4)]
    clock.now += 3.0
    tracker.finished(tokens[0], 2.9)
    tracker.finished(tokens[1], None)  # failed: not ready, no longer pending
    assert tracker.text() == "e2b: 1 ready, p50 2.9s, 2 starting for 3s"
    tracker.finished(tokens[2], 3.0)
    tracker.finished(tokens[3], 3.0)
    assert line.drawn == [
        "e2b: 1 ready, p50 2.9s, 3 starting for 3s",
        "e2b: 1 ready, p50 2.9s, 2 starting for 3s",
        "e2b: 2 ready, p50 2.95s, 1 starting for 3s",
        None,
    ]


def test_without_a_line_it_only_counts() -> None:
    clock = FakeClock()
    tracker = ColdStartProgress(None, clock=clock)
    token = tracker.starting("docker")
    clock.now += 10
    tracker.refresh()
    assert tracker.text() == "docker: 0 ready, 1 starting for 10s"
    tracker.finished(token, 10.0)
    tracker.close()


def test_close_erases_a_line_still_shown() -> None:
    tracker, clock, line = progress()
    tracker.starting("k8s")
    clock.now += 5
    tracker.refresh()
    tracker.close()
    assert line.drawn == ["k8s: 0 ready, 1 starting for 5s", None]


def test_the_terminal_line_is_drawn_after_the_current_text_and_leaves_it_as_it_was() -> None:
    out = io.StringIO()

    line = TerminalLine(out.write)
    out.write("test_agent_loop.py ..")
    line.show("docker: 2/3 ready")
    line.clear()
    out.write(".")
    assert out.getvalue() == (
        "test_agent_loop.py .."
        "\x1b7\x1b[?7l docker: 2/3 ready\x1b[K\x1b[?7h\x1b8"  # save, no wrap, text, restore
        "\x1b[K."  # erase from the cursor: the dots go on where they were
    )


SLOW_PLUGIN = """
import time

from pytest_rollout_tax import hookimpl
from pytest_rollout_tax.substrates.local import LocalSubstrate


class SlowSubstrate(LocalSubstrate):
    kind = "slow"

    def _create(self, *, labels, clock):
        time.sleep(2.6)  # past AFTER_S: the line comes up (a cold start as slow as a VM's)
        return super()._create(labels=labels, clock=clock)


@hookimpl
def rollout_tax_substrates():
    return {"slow": SlowSubstrate}
"""


def run_in_terminal(directory: Path, *args: str) -> str:
    """Run pytest with a pseudo-terminal as its output; return everything it wrote."""
    main, child = os.openpty()
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--substrate=slow", *args],
        cwd=directory, stdin=child, stdout=child, stderr=child, env=env,
    )  # fmt: skip
    os.close(child)
    output = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert process.wait(timeout=120) == 0, output.decode(errors="replace")
    return output.decode(errors="replace")


def test_a_terminal_shows_the_line_during_a_slow_cold_start_and_not_under_q(tmp_path) -> None:
    (tmp_path / "slow_substrate.py").write_text(SLOW_PLUGIN)
    dist = tmp_path / "slow_substrate-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: slow-substrate\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[rollout_tax]\nslow = slow_substrate\n")
    (tmp_path / "test_w.py").write_text(
        "import pytest\n\n@pytest.mark.trajectory(steps=1)\n"
        "def test_w(sandbox):\n    sandbox.exec('true')\n"
    )
    shown = run_in_terminal(tmp_path)
    assert "\x1b7\x1b[?7l slow: 0/1 ready, 1 starting for 2" in shown
    assert re.search(r"\x1b8\x1b\[K(\x1b\[\d+m)?\.", shown)  # erased, then the test's dot
    assert "1 passed" in shown
    quiet = run_in_terminal(tmp_path, "-q")
    assert "1 passed" in quiet and "\x1b7" not in quiet and "ready" not in quiet
