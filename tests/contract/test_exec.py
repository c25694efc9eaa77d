"""``exec`` at its edges, the same on every substrate (docs/api.md, "The sandbox contract")."""

from __future__ import annotations

import pytest

from pytest_rollout_tax import ExecResult


def test_exit_codes_are_results_and_streams_stay_separate(box):
    result = box.exec("echo out; echo err >&2; exit 3")
    assert isinstance(result, ExecResult)
    assert (result.exit_code, result.ok) == (3, False)
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert box.exec("true").ok


def test_a_string_runs_in_a_shell_and_a_list_does_not(box):
    assert box.exec("echo $((6 * 7))").stdout == "42\n"
    assert box.exec(["echo", "$HOME", "a b", "'q'"]).stdout == "$HOME a b 'q'\n"
    assert box.exec(["printf", "[%s]", "", "ü", "a\nb"]).stdout == "[][ü][a\nb]"


@pytest.mark.parametrize("code", [1, 42, 255])
def test_every_exit_code_arrives_as_it_is(box, code):
    assert box.exec(f"exit {code}").exit_code == code


@pytest.mark.parametrize("cmd", [["no-such-program-xyz"], "no-such-program-xyz"])
def test_a_missing_program_is_exit_127_with_the_reason_on_stderr(box, cmd):
    result = box.exec(cmd)
    assert result.exit_code == 127
    assert "no-such-program-xyz" in result.stderr and result.stdout == ""


def test_a_file_that_is_not_executable_is_exit_126(box, space):
    box.write_file(f"{space}/script", "#!/bin/sh\necho hi\n")
    assert box.exec([f"./{space}/script"]).exit_code == 126


def test_commands_read_no_stdin(box):
    result = box.exec("cat; echo done", timeout=20)
    assert (result.exit_code, result.stdout) == (0, "done\n")


def test_env_adds_variables_for_one_call_only(box):
    result = box.exec("echo $GREETING-$HOME", env={"GREETING": "hi there"})
    assert result.stdout.startswith("hi there-/") and result.ok
    assert box.exec("echo ${GREETING:-unset}").stdout == "unset\n"
    assert box.exec(["env"], env={"A-B.C": "1"}).stdout.count("A-B.C=1") == 1
    tricky = 'it\'s $HOME `x` "q" \\ ü'
    assert box.exec(["printenv", "V"], env={"V": tricky}).stdout == tricky + "\n"


def test_shell_state_does_not_leak_between_calls(box, space):
    box.exec(f"cd {space} && export LEAK=1 && X=2")
    assert box.exec("echo ${LEAK:-none} ${X:-none}; pwd").stdout == f"none none\n{box.workdir}\n"


def test_cwd_resolves_against_the_workdir_and_may_be_absolute(box, space):
    assert box.exec("pwd").stdout == f"{box.workdir}\n"
    assert box.exec("pwd", cwd=space).stdout == f"{box.workdir}/{space}\n"
    assert box.exec("pwd", cwd="/").stdout == "/\n"
    box.exec(["mkdir", f"{space}/a dir 'q'"])
    assert box.exec("pwd", cwd=f"{space}/a dir 'q'").stdout == f"{box.workdir}/{space}/a dir 'q'\n"


@pytest.mark.parametrize("cwd", ["no-such-dir", "a-file"])
def test_a_cwd_that_is_not_a_directory_is_exit_127_with_the_reason_on_stderr(box, space, cwd):
    box.write_file(f"{space}/a-file", "x")
    result = box.exec(["true"], cwd=f"{space}/{cwd}")
    assert result.exit_code == 127 and cwd in result.stderr


def test_a_megabyte_of_output_on_each_stream_arrives_whole(box):
    result = box.exec("head -c 1048576 /dev/zero | tr '\\0' o; head -c 1048576 /dev/zero >&2")
    assert result.ok
    assert result.stdout == "o" * 1048576 and result.stderr == "\0" * 1048576


def test_output_that_is_not_utf8_is_replaced_not_raised(box):
    result = box.exec("printf 'a\\377b'")
    assert result.stdout == "a\ufffdb"


def test_exit_137_within_the_timeout_is_a_result(box):
    assert box.exec("kill -9 $$", timeout=30).exit_code == 137


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"env": {"": "x"}}, ValueError, "invalid variable name ''"),
        ({"env": {"A=B": "c"}}, ValueError, "invalid variable name 'A=B'"),
        ({"env": {"A\0B": "c"}}, ValueError, "invalid variable name"),
        ({"env": {"A": "c\0d"}}, ValueError, "NUL"),
        ({"env": {"A": 1}}, TypeError, "must be str"),
        ({"cmd": "echo a\0b"}, ValueError, "NUL"),
        ({"cmd": ["echo", "a\0b"]}, ValueError, "NUL"),
        ({"cmd": []}, ValueError, "empty command"),
        ({"cmd": ["echo", 1]}, TypeError, "must be a str"),
        ({"cmd": b"true"}, TypeError, "expected a str"),
        ({"cwd": "a\0b"}, ValueError, "NUL"),
    ],
)
def test_invalid_arguments_raise_before_anything_is_sent(box, kwargs, error, message):
    steps = len(box.rollout.steps)
    kwargs = dict(kwargs)  # shared by every substrate's instance of this test
    cmd = kwargs.pop("cmd", "touch sent")
    with pytest.raises(error, match=message):
        box.exec(cmd, **kwargs)
    assert len(box.rollout.steps) == steps
    with pytest.raises(FileNotFoundError):
        box.read_file("sent")
