"""The step helper: built from its source on this host, and run as a session step runs it."""

from __future__ import annotations

import subprocess

import pytest

from pytest_rollout_tax.core import stepper


@pytest.fixture(scope="module")
def helper() -> str:
    built = stepper.built()
    assert built is not None, "cc and a static C library are test prerequisites (gcc, libc6-dev)"
    return str(built)


def run(helper: str, *args: str, cwd: str = "/") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [helper, *args], capture_output=True, stdin=subprocess.DEVNULL, cwd=cwd, check=False
    )


def test_it_is_built_from_the_packaged_source_into_the_cache_and_says_it_runs(helper):
    assert helper.startswith(str(stepper.cache_dir()))
    assert run(helper, "--check").stdout == stepper.CHECK_OUTPUT


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(stepper.SWITCH, "off")
    assert stepper.built() is None


def test_a_step_runs_in_its_cwd_with_its_variables_and_streams_apart(helper, tmp_path):
    script = 'echo "$A $PWD"; pwd -P; echo oops >&2; exit 3'
    done = run(helper, "0", str(tmp_path), "-e", "A=1 2", "--", "sh", "-c", script)
    assert done.returncode == 3
    assert done.stdout == f"1 2 {tmp_path}\n{tmp_path.resolve()}\n".encode()
    assert done.stderr == b"oops\n"


def test_kill_0_ends_the_step_not_its_relay_so_its_output_arrives(helper):
    script = "trap 'kill 0' EXIT; (sleep 30 >/dev/null 2>&1 &); echo hi"
    done = run(helper, "0", "/", "--", "sh", "-c", script)
    assert done.stdout == b"hi\n"


def test_late_background_output_is_the_steps(helper):
    done = run(helper, "0", "/", "--", "sh", "-c", "(sleep 0.2; echo late) & echo now")
    assert done.stdout == b"now\nlate\n"


def test_the_deadline_kills_the_whole_group_and_reports_137(helper):
    script = "echo started; sleep 30 & sleep 30"
    done = run(helper, "0.3", "/", "--", "sh", "-c", script)
    assert (done.returncode, done.stdout) == (137, b"started\n")


@pytest.mark.parametrize(
    ("args", "code", "reason"),
    [
        (["0", "/no-such-dir", "--", "true"], 127, b"/no-such-dir"),
        (["0", "/", "--", "no-such-program"], 127, b"no-such-program: not found"),
        (["0", "/", "--", "{data}"], 126, b"{data}: Permission denied"),
        (["0", "/", "-e"], 2, b"usage"),
    ],
)
def test_what_cannot_run_is_126_or_127_with_the_reason(helper, tmp_path, args, code, reason):
    data = tmp_path / "data"
    data.write_text("not a program")
    done = run(helper, *(arg.replace("{data}", str(data)) for arg in args))
    reason = reason.replace(b"{data}", str(data).encode())
    assert done.returncode == code and reason in done.stderr
