"""Bounds and clear lines (README options, docs/cli.md, docs/replay.md): every count has a
ceiling, an input that is not a regular file is refused before it is read, and each bad input
is one line naming the real problem, whichever substrate is selected."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from support.reports import report, rollouts

from pytest_rollout_tax.cli import main

WORKLOAD = """
import pytest

@pytest.mark.trajectory
def test_one(sandbox):
    sandbox.exec("true")
"""


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    """The one error line of a pytest run that must stop before any test (exit 4)."""
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr.str()
    return errors[0]


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), err.getvalue()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--rollout-rounds=10001", "--rollout-rounds='10001': at most 10,000"),
        ("--rollout-rounds=" + "9" * 20, "--rollout-rounds='" + "9" * 20 + "': at most 10,000"),
        ("--rollout-rounds=1e8", "--rollout-rounds='1e8': expected a number"),
        ("--rollout-probes=100000", "--rollout-probes='100000': at most 10,000"),
        ("--rollout-fleet=" + "9" * 20, "at most 10,000,000"),
        ("--rollout-output-cap=17g", "--rollout-output-cap='17g': expected 1 byte to 16g"),
        ("--rollout-output-cap=lots", "--rollout-output-cap='lots': expected a size in bytes"),
    ],
)
def test_a_count_past_its_ceiling_is_a_usage_error_at_once(
    pytester, selected_substrate, option, message
):
    """Finding 10: a 20-digit --rollout-rounds grew memory during collection, or hung."""
    pytester.makepyfile(test_one=WORKLOAD)
    assert message in usage_error(pytester, *selected_substrate.args, option)


def test_a_marker_count_past_its_ceiling_is_a_usage_error(pytester, selected_substrate):
    pytester.makepyfile(test_one=WORKLOAD.replace("trajectory", "trajectory(rounds=10**8)"))
    line = usage_error(pytester, *selected_substrate.args)
    assert "rounds=100000000" in line and "expected an integer from 1 to 10,000" in line


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "deep.traj:1: not valid JSON: nested too deeply"),
        ('{"cmd": "ls\\u0000x"}\n', "deep.traj: deep: step 1: the command contains a NUL byte"),
    ],
    ids=["deep", "nul"],
)
def test_a_bad_replay_file_is_one_line_naming_it(pytester, selected_substrate, content, message):
    """Finding 10: deep nesting gave a RecursionError traceback; a NUL byte in a ``cmd``
    passed loading and failed as a test with a traceback."""
    (pytester.path / "deep.traj").write_text(content)
    assert message in usage_error(pytester, "deep.traj", *selected_substrate.args)


def test_replay_inputs_that_are_not_trajectories_say_so(pytester, selected_substrate):
    """Finding 11: /dev/null gave pytest's "not found"; an empty directory exited 5 silently."""
    line = usage_error(pytester, "--rollout-replay=/dev/null", *selected_substrate.args)
    assert "--rollout-replay=/dev/null: not a regular file (a character device)" in line
    pytester.mkdir("empty")
    line = usage_error(pytester, "--rollout-replay=empty", *selected_substrate.args)
    assert "--rollout-replay=empty: no trajectory file (*.traj, *.json, *.jsonl)" in line


def test_storage_that_is_not_a_directory_says_so(pytester, selected_substrate):
    """Finding 11: --rollout-storage=/dev/null said "File exists"."""
    pytester.makepyfile(test_one=WORKLOAD)
    args = ["--rollout-storage=/dev/null", "--rollout-save=x", *selected_substrate.args]
    assert "storage directory /dev/null/: not a directory" in usage_error(pytester, *args)


def test_a_docker_option_that_is_not_a_number_says_so(pytester, selected_substrate):
    """Finding 11: docker.pids_limit=abc gave Python's int() message."""
    pytester.makepyfile(test_one=WORKLOAD)
    line = usage_error(pytester, "--substrate=docker", "--substrate-opt=docker.pids_limit=abc")
    assert line == "ERROR: docker.pids_limit='abc': expected an integer"


@pytest.fixture
def saved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.json").write_text(
        json.dumps(report(rollouts("local", [0.8, 1.0, 0.9])).to_dict())
    )
    return tmp_path


def test_calibrate_comparisons_have_a_ceiling(saved):
    """Finding 10: ``calibrate --comparisons 100000000`` hung."""
    status, err = cli(
        "calibrate", "good.json", "--fail=cold_start.p50:10%", "--comparisons", "100000000"
    )
    assert status == 4 and "--comparisons=100000000: at most 1,000,000" in err


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_saved_run_that_is_not_a_file_is_refused_before_it_is_read(saved, kind):
    """Finding 10: ``compare good.json FIFO`` hung; finding 11: a directory given as a saved
    run said "no baseline 'adir.json' in .rollout-tax/"."""
    if kind == "fifo":
        os.mkfifo("pipe.json")
        path, named = "pipe.json", "not a regular file (a fifo)"
    elif kind == "device":
        path, named = "/dev/zero", "not a regular file (a character device)"
    else:
        os.mkdir("adir.json")
        path, named = "adir.json", "not a regular file (a directory)"
    # in a subprocess: the bug this guards against is a hang
    done = subprocess.run(
        [sys.executable, "-m", "pytest_rollout_tax", "compare", "good.json", path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4 and f"{path}: {named}" in done.stderr
    assert done.stderr.count("\n") == 1
