"""The contract's checks and file scripts as plain functions; tests/contract/ runs them for real."""

from __future__ import annotations

import math
import subprocess

import pytest

from pytest_rollout_tax.core import contract


@pytest.mark.parametrize(
    ("cmd", "argv"),
    [("echo hi", ["sh", "-c", "echo hi"]), (("ls", "-l"), ["ls", "-l"]), ("", ["sh", "-c", ""])],
)
def test_a_command_becomes_an_argv(cmd, argv):
    assert contract.check_command(cmd) == argv


@pytest.mark.parametrize("timeout", [1, 0.5, 1e9])
def test_positive_finite_timeouts_pass_as_floats(timeout):
    assert contract.check_timeout(timeout) == float(timeout)
    assert contract.check_timeout(None) is None


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -2, False, "3", [1], 10**400])
def test_other_timeouts_name_where_they_came_from(timeout):
    with pytest.raises(ValueError, match=r"^marker timeout=.*: expected a positive finite"):
        contract.check_timeout(timeout, "marker timeout")


def test_env_is_copied_and_may_have_names_a_shell_could_not_export():
    env = {"A-B.C": "x=y", "_": ""}
    assert contract.check_env(env) == env and contract.check_env(env) is not env
    assert contract.check_env(None) is None


@pytest.mark.parametrize(
    ("path", "resolved"),
    [("a/b", "/w/a/b"), ("/etc/x", "/etc/x"), ("../x", "/x"), ("a/./b/../c", "/w/a/c")],
)
def test_file_paths_resolve_against_the_workdir(path, resolved):
    assert contract.check_file_path("/w", path) == resolved


@pytest.mark.parametrize("path", [".", "./", "a/", "a/.", "a/..", "/w", "/", "/w/"])
def test_a_file_path_that_names_a_directory_is_is_a_directory(path):
    with pytest.raises(IsADirectoryError):
        contract.check_file_path("/w", path)


def test_errors_look_like_pythons_own():
    error = contract.file_error(NotADirectoryError, "/w/f/x")
    assert str(error) == "[Errno 20] Not a directory: '/w/f/x'"
    assert contract.file_error_for(80, "/p").__class__ is FileNotFoundError
    assert contract.file_error_for(1, "/p") is None


def run_script(script: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script, "sh", *args], input=stdin, capture_output=True)


def test_the_file_scripts_name_each_error_by_its_exit_code(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    cases = {
        (contract.READ_SCRIPT, "missing"): FileNotFoundError,
        (contract.READ_SCRIPT, "missing/deeper"): FileNotFoundError,
        (contract.READ_SCRIPT, "dir"): IsADirectoryError,
        (contract.READ_SCRIPT, "file/inner"): NotADirectoryError,
        (contract.WRITE_SCRIPT, "dir"): IsADirectoryError,
        (contract.WRITE_SCRIPT, "file/inner"): NotADirectoryError,
        (contract.WRITE_SCRIPT, "file/deeper/inner"): NotADirectoryError,
    }
    for (script, path), error in cases.items():
        done = run_script(script, str(tmp_path / path), "1", stdin=b"y")
        assert contract.FILE_ERRORS.get(done.returncode) is error, (path, done)
    assert (tmp_path / "dir").is_dir() and (tmp_path / "file").read_text() == "x"


def test_the_file_scripts_read_and_write_exactly(tmp_path):
    data = bytes(range(256)) * 64
    target = tmp_path / "new" / "dirs" / "blob"
    assert (
        run_script(contract.WRITE_SCRIPT, str(target), str(len(data)), stdin=data).returncode == 0
    )
    assert target.read_bytes() == data
    assert run_script(contract.READ_SCRIPT, str(target)).stdout == data
