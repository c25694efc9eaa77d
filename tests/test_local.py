"""The local substrate, for real: child processes in a fresh temporary directory."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from pytest_rollout_tax import ExecResult, StepTimeout, get_substrate
from pytest_rollout_tax.errors import SandboxStartError


@pytest.fixture
def sandbox():
    with get_substrate("local").start() as sb:
        yield sb


def test_a_sandbox_starts_with_an_empty_workdir_and_records_its_cold_start(sandbox):
    assert os.listdir(sandbox.workdir) == []
    assert sandbox.rollout.cold_start_s > 0
    assert list(sandbox.rollout.phases) == ["create", "first_exec"]


def test_exit_codes_are_results_and_streams_stay_separate(sandbox):
    result = sandbox.exec("echo out; echo err >&2; exit 3")
    assert isinstance(result, ExecResult)
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (
        3,
        "out\n",
        "err\n",
        False,
    )
    assert result.duration_s > 0


def test_a_list_runs_without_a_shell(sandbox):
    assert sandbox.exec(["echo", "$HOME", "a b"]).stdout == "$HOME a b\n"


def test_a_missing_program_is_exit_127(sandbox):
    result = sandbox.exec(["no-such-program-xyz"])
    assert result.exit_code == 127 and "not found" in result.stderr


def test_env_is_clean_and_extendable(sandbox):
    os.environ["ROLLOUT_TAX_SECRET_PROBE"] = "leak"
    try:
        result = sandbox.exec("echo ${ROLLOUT_TAX_SECRET_PROBE:-unset} $FOO", env={"FOO": "bar"})
    finally:
        del os.environ["ROLLOUT_TAX_SECRET_PROBE"]
    assert result.stdout == "unset bar\n"


def test_cwd_and_relative_paths_resolve_against_the_workdir(sandbox):
    sandbox.write_file("pkg/sub/mod.py", "x = 1\n")
    assert Path(sandbox.workdir, "pkg/sub/mod.py").read_text() == "x = 1\n"
    assert sandbox.exec("pwd", cwd="pkg/sub").stdout.strip() == os.path.join(
        sandbox.workdir, "pkg", "sub"
    )
    assert sandbox.exec("ls", cwd="pkg").stdout == "sub\n"


def test_files_round_trip_text_and_bytes(sandbox):
    sandbox.write_file("uni.txt", "héllo ✓\n")
    assert sandbox.read_file("uni.txt") == "héllo ✓\n"
    blob = bytes(range(256)) * 4096
    sandbox.write_file("bin/blob", blob)
    assert sandbox.read_file("bin/blob", binary=True) == blob
    assert sandbox.read_file("bin/blob").startswith("\x00\x01")


def test_invalid_utf8_output_is_replaced_not_raised(sandbox):
    assert sandbox.exec(["printf", "\\377ok"]).stdout == "\ufffdok"


def test_reading_a_missing_file_raises_file_not_found(sandbox):
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("missing.txt")


def test_one_megabyte_of_output_arrives_whole(sandbox):
    result = sandbox.exec("head -c 1048576 /dev/zero | tr '\\0' x")
    assert len(result.stdout) == 1024 * 1024


def test_a_timeout_kills_the_process_group_and_the_sandbox_stays_usable(sandbox):
    with pytest.raises(StepTimeout):
        sandbox.exec("sleep 30 & echo $! > pid; wait", timeout=2)
    assert dies(int(sandbox.read_file("pid")))
    assert sandbox.exec("echo alive").stdout == "alive\n"


def dies(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``within_s``: SIGKILL is not instant."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rpartition(")")[2].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


def test_every_tool_call_is_a_recorded_step(sandbox):
    sandbox.write_file("a", "1")
    sandbox.read_file("a")
    sandbox.exec("exit 2")
    with pytest.raises(StepTimeout):
        sandbox.exec("sleep 5", timeout=0.2)
    kinds = [(s.kind, s.exit_code) for s in sandbox.rollout.steps]
    assert kinds == [("write_file", None), ("read_file", None), ("exec", 2), ("exec", None)]


def test_probes_time_no_ops_without_counting_them_as_steps(sandbox):
    samples = sandbox.probe(3)
    assert len(samples) == 3 and all(s > 0 for s in samples)
    assert sandbox.rollout.action_probes_s == samples and sandbox.rollout.steps == []


def test_close_removes_the_workdir_and_times_teardown():
    sb = get_substrate("local").start()
    workdir = sb.workdir
    sb.close()
    sb.close()
    assert not os.path.exists(workdir)
    assert sb.rollout.teardown_s > 0
    assert sb.rollout.trajectory_s >= sb.rollout.cold_start_s + sb.rollout.teardown_s


def test_default_timeout_applies_to_steps_without_one():
    with get_substrate("local").start(timeout=0.2) as sb, pytest.raises(StepTimeout):
        sb.exec("sleep 5")


def test_a_sandbox_that_cannot_start_is_a_start_error(tmp_path):
    substrate = get_substrate("local", root=str(tmp_path / "missing"))
    with pytest.raises(SandboxStartError, match=r"local: cannot make a workdir in .*/missing"):
        substrate.start()


def test_reap_removes_leftovers_of_dead_sessions_and_spares_live_ones(tmp_path):
    dead_pid = subprocess.Popen(["true"])  # a pid that has exited
    dead_pid.wait()
    dead = tmp_path / f"rollout-tax-aaaa-{dead_pid.pid}-x1"
    live = tmp_path / f"rollout-tax-bbbb-{os.getpid()}-y2"
    unrelated = tmp_path / "rollout-tax-notes"
    for path in (dead, live, unrelated):
        path.mkdir()
    substrate = get_substrate("local", root=str(tmp_path))
    assert substrate.reap(None) == 1
    assert not dead.exists() and live.exists() and unrelated.exists()
    assert substrate.reap("bbbb") == 1
    assert not live.exists() and unrelated.exists()


def test_a_workdir_carries_its_session_and_process(tmp_path):
    substrate = get_substrate("local", root=str(tmp_path))
    with substrate.start() as sandbox:
        assert Path(sandbox.workdir).name.startswith(
            f"rollout-tax-{substrate.session_id}-{os.getpid()}-"
        )
        assert substrate.reap(None) == 0  # its own process is alive
