"""A requested output is checked before the run (by trying, so root and read-only filesystems
are judged right), and a write that fails at the end makes the exit status non-zero."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.core.writable import check_writable_directory, check_writable_file

WORKLOAD = "def test_x(sandbox):\n    sandbox.exec('true')\n"


def test_a_read_only_filesystem_is_not_writable():
    assert check_writable_file("/proc/version") is not None
    assert check_writable_directory("/proc") is not None


def test_a_writable_place_is_left_as_it_was(tmp_path):
    existing = tmp_path / "report.json"
    existing.write_text("kept")
    assert check_writable_file(existing) is None
    assert check_writable_file(tmp_path / "new.json") is None
    assert existing.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(
    "option",
    [
        "--rollout-json=/proc/rollout-tax.json",
        "--rollout-html=/proc/rollout-tax.html",
        "--rollout-storage=/proc/runs",
    ],
)
def test_an_unwritable_output_is_a_usage_error_at_start(pytester, option):
    pytester.makepyfile(test_x=WORKLOAD)
    result = pytester.runpytest(option, "--rollout-save=x", "--rollout-probes=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *proc*"])


FINAL_WRITE_FAILS = """
import shutil
from pathlib import Path


def test_x(sandbox):
    sandbox.exec("true")


def test_y():  # the report's directory becomes a file: the write at the end fails
    shutil.rmtree("out")
    Path("out").write_text("not a directory")
"""


def test_a_failing_final_write_makes_the_exit_status_non_zero(pytester):
    pytester.makepyfile(test_x=FINAL_WRITE_FAILS)
    result = pytester.runpytest("--rollout-json=out/report.json", "--rollout-probes=0")
    result.stdout.fnmatch_lines(["*cannot write*"])
    assert result.ret != pytest.ExitCode.OK
