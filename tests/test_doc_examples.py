"""Documented example output is output the code prints: the cheap examples (the example suite
on local) are run again, and every documented line must appear in what they print, figures
aside (they are measured, so they differ from run to run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A measured figure, with its unit: ``2.2ms``, ``1,000,000``, ``<0.1%``, ``6.17x``, ``2m05s``.
FIGURE = re.compile(r"[<$]?\d[\d,.]*(?:m\d\ds|us|ms|s|x|%)?")


def block_after(page: str, marker: str) -> list[str]:
    """The lines of the first fenced block after ``marker`` on ``page``."""
    text = (ROOT / page).read_text()
    after = text.split(marker, 1)[1]
    return after.split("```\n", 1)[1].split("```", 1)[0].splitlines()


def table_rows(lines: list[str]) -> tuple[int, int]:
    """Where the summary's table is in ``lines``: its header line, and the line after its last
    row (its columns depend on the width the figures take, so they vary)."""
    head = next(i for i, line in enumerate(lines) if line.startswith("substrate "))
    end = head + 3
    while end < len(lines) and re.match(r"\S+ +\d", lines[end]):
        end += 1
    return head, end


#: The warning that the client was saturated, as :func:`shape` joins it.
SATURATED = re.compile(
    r" ?warning: this client was saturated: .*? spread the run over more machines"
)


def shape(lines: list[str]) -> str:
    """The lines other than the table's as one text with every figure a ``#`` and every run of
    blanks one space; rules (``===``), elisions (``...``) and shell commands (``$ ...``) left
    out, and so is the warning that the client was saturated, which a busy machine adds. The
    table is checked apart (:func:`rows`)."""
    head, end = table_rows(lines)
    lines = lines[:head] + lines[end:]
    kept = [
        line.strip()
        for line in lines
        if line.strip() and not line.lstrip().startswith(("=", "-", "...", "$ "))
    ]
    text = re.sub(r"\s+", " ", FIGURE.sub("#", " ".join(kept)))
    return SATURATED.sub("", text)  # said only when the machine was busy as the run was made


def run(cwd: Path, *command: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["COLUMNS"] = "80"  # the width the examples were printed at
    done = subprocess.run(
        [sys.executable, *command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def rows(lines: list[str]) -> list[str]:
    """The substrates the table's rows name, in order."""
    head, end = table_rows(lines)
    return [line.split()[0] for line in lines[head + 3 : end]]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def test_the_readme_quick_start_prints_what_the_readme_shows(suite):
    output = run(suite, "-m", "pytest", "-p", "no:cacheprovider", "example_suite")
    documented = block_after("README.md", "The first command prints")
    assert documented[1].startswith("local: ")
    assert shape(documented) in shape(output.splitlines()), output
    assert rows(documented) == rows(output.splitlines()) == ["local"]


def test_the_cli_page_s_projection_prints_what_the_page_shows(suite):
    run(suite, "-m", "pytest", "-p", "no:cacheprovider", "example_suite",
        "--rollout-save=main", "--rollout-storage=st")  # fmt: skip
    output = run(suite, "-m", "pytest_rollout_tax", "project", "st/main.json", "--rollouts",
                 "1000000", "--steps", "150", "--think-time", "2")  # fmt: skip
    documented = block_after("docs/cli.md", "For example, with one run saved")
    start = next(i for i, line in enumerate(documented) if " project " in line)
    projected = documented[start + 2 :]  # after the "re-projected" line
    assert shape(projected) in shape(output.splitlines()[1:]), output
    assert rows(projected) == rows(output.splitlines()) == ["local"]
