"""Real pytest runs for the summary's tests: pytest in a subprocess, and its rollout-tax
section's lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_pytest(cwd: Path, *args: str, columns: int = 80) -> tuple[int, list[str]]:
    """pytest in a subprocess at ``COLUMNS=columns``, with no Kubernetes configuration; its exit
    code and the lines of its rollout-tax summary."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("KUBECONFIG", None)
    env.update(COLUMNS=str(columns), HOME=str(cwd))  # no ~/.kube/config
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    return done.returncode, summary_of(output)


def summary_of(output: str) -> list[str]:
    """The summary's lines: from the ``rollout tax`` rule to the report's path or the next rule."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if " rollout tax " in line)
    end = next(
        i
        for i, line in enumerate(lines[start + 1 :], start + 1)
        if line.startswith(("report written", "=="))
    )
    return lines[start + 1 : end]


def joined(lines: list[str]) -> str:
    """The summary as one string, its wrapped notes joined back."""
    return " ".join(line.strip() for line in lines)


def unwrapped(lines: list[str]) -> list[str]:
    """Lines with their wrapped continuations (indented four spaces) joined back to them."""
    notes: list[str] = []
    for line in lines:
        if line.startswith("    ") and notes:
            notes[-1] += " " + line.strip()
        else:
            notes.append(line)
    return notes
