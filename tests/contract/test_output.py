"""Bounded output, the same on every substrate (docs/api.md, "Output cap"): past the cap a
step's output is counted and discarded, its timeout still holds, memory stays bounded."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pytest_rollout_tax import StepTimeout

FLOOD_CAP = 16 << 20
FLOOD = """
import pytest
from pytest_rollout_tax import StepTimeout

@pytest.mark.trajectory
def test_flood(sandbox):
    result = sandbox.exec("timeout 2 yes; echo err >&2")
    assert result.truncated and len(result.stdout) == {cap} and result.stderr == "err\\n"
    assert result.output_bytes > {cap}
"""
#: Runs a command and prints the peak RSS of its process (the largest child's, in KiB).
PEAK_RSS = (
    "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)"
)


@pytest.fixture
def capped_box(contract_substrate, monkeypatch):
    """A sandbox whose steps keep 1000 bytes of each stream."""
    monkeypatch.setattr(contract_substrate, "output_cap", 1000)
    with contract_substrate.start(timeout=60) as sandbox:
        yield sandbox


def test_output_past_the_cap_is_counted_and_discarded(capped_box):
    """Finding 6: output was buffered without a bound."""
    result = capped_box.exec("head -c 5000 /dev/zero | tr '\\0' o; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "o" * 1000, "err\n")
    assert (result.truncated, result.output_bytes) == (True, 5004)
    assert capped_box.rollout.steps[-1].output_bytes == 5004
    whole = capped_box.exec("printf 'all of it'")
    assert (whole.stdout, whole.truncated, whole.output_bytes) == ("all of it", False, 9)


def test_files_are_not_cut_by_the_output_cap(capped_box):
    capped_box.write_file("big", b"x" * 5000)
    assert capped_box.read_file("big", binary=True) == b"x" * 5000


#: The slack past a 2 s deadline a flooded step may take: the stand-ins of hosted services
#: serve the flood from threads of this very process, which share its interpreter lock.
SLACK_S = {"local": 1.5, "docker": 1.5, "bwrap": 1.5, "k8s": 1.5, "ec2": 1.5}


def test_a_step_timeout_holds_while_its_output_floods(capped_box):
    """Finding 6: a 2 s timeout during heavy output overran to 3.9-8.7 s on local exec."""
    slack = SLACK_S.get(capped_box.rollout.substrate.split("-")[0], 2.5)
    started = time.perf_counter()
    with pytest.raises(StepTimeout):
        capped_box.exec("yes", timeout=2)
    assert time.perf_counter() - started < 2 + slack  # the deadline, not the flood's end
    assert capped_box.exec("echo alive").stdout == "alive\n"


def test_a_flood_keeps_the_pytest_process_under_the_cap_plus_100_mb(pytester, selected_substrate):
    """Finding 6: 2 s of ``yes`` cost 0.4-1.6 GB. Peak RSS of the whole pytest process."""
    if selected_substrate.name not in ("local", "docker", "bwrap"):
        pytest.skip("the flood test runs on every local, docker and bwrap variant")
    pytester.makepyfile(test_flood=FLOOD.format(cap=FLOOD_CAP))
    command = [sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "pytest"]
    args = [*selected_substrate.args, f"--rollout-output-cap={FLOOD_CAP}", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, *args], cwd=pytester.path, capture_output=True, text=True, timeout=300
    )
    peak_kib, code = map(int, done.stdout.split()[-2:])
    assert code == 0, done.stdout
    assert peak_kib * 1024 < FLOOD_CAP + 100e6


@pytest.mark.parametrize("cap", ["1k", "1024"])
def test_replay_refuses_a_recorded_size_the_cap_would_cut(pytester, selected_substrate, cap):
    """Finding 6: a replayed size under the 2^40 replay bound was buffered whole."""
    (pytester.path / "big.traj").write_text('{"cmd": "ls"}\n{"cmd": "x", "output_bytes": 1025}\n')
    result = pytester.runpytest("big.traj", *selected_substrate.args, f"--rollout-output-cap={cap}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {pytester.path}/big.traj: *: step 2: output_bytes=1025: over the output cap*"]
    )
