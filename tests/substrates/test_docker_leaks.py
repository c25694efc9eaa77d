"""No leaks, ever: real pytest subprocesses on the docker substrate, then a look at the engine.

Every workload logs ``SESSION CONTAINER PID`` for each sandbox it gets, so a test knows which
session to check and that its containers really existed; afterwards no container may carry
that session's label.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import docker_exec
from support.docker_engine import session_shell
from support.pytest_process import interrupt

from pytest_rollout_tax.core.processes import process_alive
from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.substrates.docker import KEEPALIVE, OWNER_LABEL, DockerSubstrate
from pytest_rollout_tax.substrates.docker.lifecycle import USER_LABEL, current_user

pytestmark = pytest.mark.usefixtures("sandbox_image")

CONFTEST = """
import os

import pytest


@pytest.fixture
def logged(sandbox, substrate):
    with open(os.environ["LEAK_LOG"], "a") as log:
        log.write(f"{substrate.session_id} {sandbox.id} {os.getpid()}\\n")
    return sandbox
"""


def write_suite(tmp_path: Path, source: str) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_work.py").write_text(textwrap.dedent(source))
    return tmp_path / "leak.log"


def environment(log: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return env | {"LEAK_LOG": str(log), "PYTHONUNBUFFERED": "1"}


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--substrate=docker", *args]


def run(tmp_path: Path, log: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        pytest_command(*args),
        cwd=tmp_path,
        env=environment(log),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def logged(log: Path) -> list[tuple[str, str, int]]:
    """The (session, container, pid) lines the workloads wrote."""
    if not log.exists():
        return []
    return [(s, c, int(p)) for s, c, p in (line.split() for line in log.read_text().splitlines())]


def assert_no_leftovers(docker_client, log: Path, expected_sandboxes: int) -> None:
    entries = logged(log)
    assert len(entries) >= expected_sandboxes, entries
    sessions = {session for session, _, _ in entries}
    assert len(sessions) == 1, sessions  # one session, even across xdist workers
    [session] = sessions
    left = docker_client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session}"})
    assert left == [], [c.name for c in left]
    existing = {c.id for c in docker_client.containers.list(all=True, sparse=True)}
    assert not existing & {container for _, container, _ in entries}


def test_a_clean_run_leaves_nothing(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        import pytest

        @pytest.mark.trajectory(rounds=2)
        def test_ok(logged):
            assert logged.exec("true").ok
        """,
    )
    code, output = run(tmp_path, log)
    assert code == 0, output
    assert_no_leftovers(docker_client, log, 2)


def test_failing_and_erroring_tests_leave_nothing(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        from pytest_rollout_tax import StepTimeout

        def test_assertion(logged):
            assert logged.exec("exit 1").ok

        def test_exception(logged):
            raise RuntimeError("workload bug")

        def test_step_timeout(logged):
            logged.exec("sleep 60", timeout=0.2)
        """,
    )
    code, output = run(tmp_path, log)
    assert code == 1, output
    assert "3 failed" in output
    assert_no_leftovers(docker_client, log, 3)


@pytest.mark.parametrize(
    "signum, where",
    [
        (signal.SIGINT, "exec"),
        (signal.SIGINT, "python"),
        (signal.SIGTERM, "exec"),
        (signal.SIGINT, "session"),
    ],
    ids=["sigint-in-exec", "sigint-in-python", "sigterm-in-exec", "sigint-in-session-step"],
)
def test_an_interrupted_run_leaves_nothing(tmp_path, docker_client, signum, where):
    """A real signal to a running pytest, while its test waits in a step (through the exec
    API, or a session's shell) or in Python."""
    log = write_suite(
        tmp_path,
        f"""
        import time

        def test_first(logged):
            assert logged.exec("true").ok

        def test_interrupted(logged):
            with open("ready", "w"):
                pass
            if {where!r} != "python":
                logged.exec("sleep 120")
            else:
                time.sleep(120)

        def test_never_runs(logged):
            pass
        """,
    )

    def ready() -> bool:
        if not (tmp_path / "ready").exists():
            return False
        container = logged(log)[-1][1]
        if where == "session":  # the container has its shell (raises if it has none)
            session_shell(docker_client, container)
        # in a step, make sure it has reached the container
        return where == "python" or "sleep 120" in _processes(docker_client, container)

    transport = ["--substrate-opt=docker.transport=session"] if where == "session" else []
    code, output = interrupt(
        pytest_command("-v", *transport),
        cwd=tmp_path,
        env=environment(log),
        ready=ready,
        signum=signum,
    )
    assert code == 2, output  # pytest's "interrupted"
    assert "KeyboardInterrupt" in output
    assert "test_never_runs PASSED" not in output
    assert_no_leftovers(docker_client, log, 2)


def _processes(docker_client, container_id: str) -> str:
    container = docker_client.containers.get(container_id)
    return docker_exec.run(container, ["ps", "-eo", "args"]).stdout.decode()


def test_the_session_shell_of_a_closed_sandbox_is_gone_with_the_container(
    sandbox_image, docker_client
):
    """The shell, and what a step left running behind it, go with the container."""
    import docker

    substrate = DockerSubstrate(
        session_id=f"test-{new_id()}", image=sandbox_image, transport="session"
    )
    try:
        sandbox = substrate.start()
        # a step returns once its output is closed: this one's child runs on past close
        assert sandbox.exec("sleep 300 >/dev/null 2>&1 &").ok
        assert "sleep 300" in _processes(docker_client, sandbox.id)
        shell = session_shell(docker_client, sandbox.id)
        assert process_alive(shell["Pid"])
        sandbox.close()
        assert not process_alive(shell["Pid"])
        with pytest.raises(docker.errors.NotFound):
            docker_client.api.exec_inspect(shell["ID"])
        with pytest.raises(docker.errors.NotFound):
            docker_client.containers.get(sandbox.id)
    finally:
        substrate.reap(substrate.session_id)
        substrate.close()


def test_a_crashed_xdist_worker_leaves_nothing(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        import os
        import pytest

        def test_crash(logged):
            os._exit(1)

        @pytest.mark.trajectory(rounds=3)
        def test_ok(logged):
            assert logged.exec("true").ok
        """,
    )
    code, output = run(tmp_path, log, "-p", "xdist", "-n", "2")
    assert code == 1, output
    assert "crashed" in output, output
    assert_no_leftovers(docker_client, log, 4)
    assert len({pid for _, _, pid in logged(log)}) >= 2  # the crashed worker had a sandbox


def test_a_worker_finishing_early_spares_the_sandbox_of_a_worker_still_running(
    tmp_path, docker_client
):
    """Each xdist worker reaps its session when it finishes; a live peer's sandbox survives."""
    log = write_suite(
        tmp_path,
        """
        import os
        import time

        def test_fast(logged):
            assert logged.exec("true").ok

        def test_slow(logged):
            # wait until the other worker has finished its session (and reaped it)
            deadline = time.monotonic() + 120
            while not any(name.startswith("finished-") for name in os.listdir(".")):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert logged.exec("echo alive").stdout == "alive\\n"
        """,
    )
    with open(tmp_path / "conftest.py", "a") as conftest:
        conftest.write(
            textwrap.dedent(
                """

                @pytest.hookimpl(trylast=True)
                def pytest_sessionfinish(session):
                    worker = os.environ.get("PYTEST_XDIST_WORKER")
                    if worker:
                        open(f"finished-{worker}", "w").close()
                """
            )
        )
    code, output = run(tmp_path, log, "-p", "xdist", "-n", "2")
    assert code == 0, output
    assert_no_leftovers(docker_client, log, 2)


def test_rollout_reap_removes_leftovers_and_spares_live_sessions(tmp_path, docker_client, request):
    def make(labels: dict[str, str]):
        container = docker_client.containers.run(
            request.getfixturevalue("sandbox_image"),
            entrypoint=KEEPALIVE,
            labels=labels,
            init=True,
            network_mode="none",
            detach=True,
        )
        request.addfinalizer(lambda: _remove(container))
        return container

    session = f"leftover-{new_id()}"
    user = {USER_LABEL: current_user()}  # docker.reap=mine: this user's leftovers
    dead = make({SESSION_LABEL: session} | user)  # no owner, as a crashed session leaves it
    dead_owner = make(
        {SESSION_LABEL: session, OWNER_LABEL: f"{os.uname().nodename}:999999999"} | user
    )
    live = make({SESSION_LABEL: f"live-{new_id()}", OWNER_LABEL: f"{os.uname().nodename}:1"})
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    code, output = run(tmp_path, tmp_path / "unused.log", "--rollout-reap")
    assert code == 0, output
    [line] = [line for line in output.splitlines() if line.startswith("rollout-tax: docker:")]
    removed = int(line.split("removed ")[1].split()[0])
    assert removed >= 2 and line.endswith("leftover sandbox(es)")
    left = docker_client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session}"})
    assert left == []
    live.reload()  # still there: PID 1 (init) is alive, so its session counts as running
    assert live.status == "running"
    assert dead.id and dead_owner.id


def _remove(container) -> None:
    import docker

    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True)


# -- bursts and warm pools ------------------------------------------------------------------

SESSION_HOOK = """

def pytest_sessionstart(session):
    plugin = session.config.pluginmanager.get_plugin("rollout-tax")
    with open("session", "w") as out:
        out.write(plugin.session.substrates.session_id)
"""


def session_containers(docker_client, tmp_path: Path) -> list:
    """The containers of the session the suite in ``tmp_path`` wrote to its ``session`` file."""
    if not (tmp_path / "session").exists():
        return []
    label = f"{SESSION_LABEL}={(tmp_path / 'session').read_text()}"
    return docker_client.containers.list(all=True, sparse=True, filters={"label": label})


def test_a_burst_and_a_pool_at_session_end_leave_nothing(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        import pytest

        @pytest.mark.trajectory(rounds=2)
        def test_ok(logged):
            assert logged.exec("ls -A").stdout == ""
        """,
    )
    code, output = run(
        tmp_path, log, "--rollout-burst=1,2", "--substrate-opt=docker.pool=2",
        "--rollout-json=report.json",
    )  # fmt: skip
    assert code == 0, output
    assert_no_leftovers(docker_client, log, 2)
    docker = json.loads((tmp_path / "report.json").read_text())["substrates"]["docker"]
    assert [level["cold_start"]["n"] for level in docker["burst"]] == [1, 2]
    pool = docker["pool"]
    assert (pool["size"], pool["hits"] + pool["misses"]) == (2, 2)
    assert pool["creations"]["n"] == 4  # 2 unclaimed at session end, destroyed with it


def test_ctrl_c_in_the_middle_of_a_burst_leaves_nothing(tmp_path, docker_client):
    log = write_suite(tmp_path, "def test_never_runs(logged):\n    pass\n")
    with open(tmp_path / "conftest.py", "a") as conftest:
        conftest.write(SESSION_HOOK)
    code, output = interrupt(
        pytest_command("--rollout-burst=1,2,3,4,5,6"),
        cwd=tmp_path,
        env=environment(log),
        ready=lambda: bool(session_containers(docker_client, tmp_path)),
        signum=signal.SIGINT,
    )
    assert code == 2, output  # pytest's "interrupted"
    assert "KeyboardInterrupt" in output
    assert logged(log) == []
    assert session_containers(docker_client, tmp_path) == []


def test_rollout_reap_removes_the_pooled_sandboxes_of_a_killed_session(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        import time

        def test_killed(logged):
            time.sleep(120)
        """,
    )
    with open(tmp_path / "conftest.py", "a") as conftest:
        conftest.write(SESSION_HOOK)

    def pool_refilled() -> bool:  # the claimed sandbox and 2 pooled ones, all running
        running = [c for c in session_containers(docker_client, tmp_path) if c.status == "running"]
        return len(logged(log)) == 1 and len(running) == 3

    code, output = interrupt(
        pytest_command("--substrate-opt=docker.pool=2"),
        cwd=tmp_path,
        env=environment(log),
        ready=pool_refilled,
        signum=signal.SIGKILL,
    )
    assert code == -signal.SIGKILL, output
    assert len(session_containers(docker_client, tmp_path)) == 3  # left by the killed session
    code, output = run(tmp_path, log, "--rollout-reap")
    assert code == 0, output
    assert session_containers(docker_client, tmp_path) == []


def test_one_pool_per_xdist_worker(tmp_path, docker_client):
    log = write_suite(
        tmp_path,
        """
        import pytest

        @pytest.mark.trajectory(rounds=4)
        def test_ok(logged):
            assert logged.exec("ls -A").stdout == ""
        """,
    )
    code, output = run(
        tmp_path, log, "-p", "xdist", "-n", "2", "--substrate-opt=docker.pool=1",
        "--rollout-json=report.json",
    )  # fmt: skip
    assert code == 0, output
    assert_no_leftovers(docker_client, log, 4)
    report = json.loads((tmp_path / "report.json").read_text())
    pool = report["substrates"]["docker"]["pool"]
    assert (pool["pools"], pool["size"], pool["hits"] + pool["misses"]) == (2, 1, 4)
    assert len({r["sandbox_id"] for r in report["rollouts"]}) == 4
