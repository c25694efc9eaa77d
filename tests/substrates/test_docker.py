"""The docker substrate against the real engine: what is particular to it (phases, labels,
hardening, the exec and archive APIs, the timeout wrapper, the session shell, options, errors)
and the example suite on ``--substrate=local,docker``. What every substrate does is
tests/contract/'s.

Fixture names avoid ``sandbox``/``substrate``/``rollout``: those are the plugin's own.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker.errors as docker_errors
import pytest
import requests.exceptions
from support import docker_exec as docker_exec_standin
from support.docker_engine import session_shell

from pytest_rollout_tax import StepTimeout, get_substrate
from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL, new_id
from pytest_rollout_tax.errors import (
    ConfigError,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.docker import (
    DEFAULT_IMAGE,
    OWNER_LABEL,
    DockerHandle,
    DockerSubstrate,
    engine,
    stream,
)
from pytest_rollout_tax.substrates.docker import exec as docker_exec
from pytest_rollout_tax.substrates.docker import shell as docker_shell
from pytest_rollout_tax.substrates.docker.lifecycle import USER_LABEL, current_user
from pytest_rollout_tax.text.units import ratio as format_ratio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dsub(sandbox_image: str) -> Iterator[DockerSubstrate]:
    """One docker substrate for the module, with its own session id."""
    substrate = get_substrate("docker", session_id=f"test-{new_id()}", image=sandbox_image)
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


@pytest.fixture(scope="module")
def box(dsub: DockerSubstrate) -> Iterator[Sandbox]:
    """One sandbox shared by the semantic tests (isolation is not their point)."""
    with dsub.start() as sandbox:
        yield sandbox


def started(sandbox_image: str, **options) -> Sandbox:
    """A sandbox on a fresh substrate with ``options``; close both with ``finish``."""
    options = {"image": sandbox_image} | options
    substrate = get_substrate("docker", session_id=f"test-{new_id()}", **options)
    try:
        return substrate.start()
    except BaseException:
        substrate.close()
        raise


def finish(sandbox: Sandbox) -> None:
    sandbox.close()
    sandbox.substrate.close()


def out(sandbox: Sandbox, cmd) -> str:
    result = sandbox.exec(cmd)
    assert result.exit_code == 0, result
    return result.stdout.strip()


# -- cold start, labels, hardening ------------------------------------------------------------


def test_cold_start_phases_add_up_and_the_container_is_labelled_and_hardened(
    dsub, box, docker_client
):
    rollout = box.rollout
    assert list(rollout.phases) == ["create", "start", "first_exec"]
    assert rollout.cold_start_s == pytest.approx(sum(rollout.phases.values()))
    labels = docker_client.containers.get(box.id).labels
    assert labels[SESSION_LABEL] == dsub.session_id
    assert len(labels[ROLLOUT_LABEL]) == 12
    assert labels[OWNER_LABEL].endswith(f":{os.getpid()}")
    assert out(box, ["cat", "/proc/1/comm"]) == "docker-init"
    assert out(box, "grep NoNewPrivs /proc/self/status") == "NoNewPrivs:\t1"


def test_teardown_is_a_forced_remove(dsub, docker_client):
    import docker

    sandbox = dsub.start()
    sandbox.exec("sleep 300 >/dev/null 2>&1 &")  # still running at teardown
    sandbox.close()
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(sandbox.id)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_start_interrupted_after_create_removes_its_container(
    sandbox_image, docker_client, monkeypatch, error
):
    substrate = get_substrate("docker", session_id=f"test-{new_id()}", image=sandbox_image)
    created = []
    create = substrate.api.create_container

    def create_and_remember(*args, **kwargs):
        created.append(create(*args, **kwargs)["Id"])
        return {"Id": created[-1]}

    def interrupted_start(container_id):
        raise error("between create and start")

    monkeypatch.setattr(substrate.api, "create_container", create_and_remember)
    monkeypatch.setattr(substrate.api, "start", interrupted_start)
    try:
        with pytest.raises((KeyboardInterrupt, RolloutTaxError)):
            substrate.start()
    finally:
        substrate.close()
    assert len(created) == 1
    label = f"{SESSION_LABEL}={substrate.session_id}"
    assert docker_client.containers.list(all=True, filters={"label": label}) == []


@pytest.mark.parametrize(
    "lost",
    [requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError, KeyboardInterrupt],
    ids=["timeout", "reset", "interrupt"],
)
def test_a_start_whose_create_response_is_lost_removes_the_container_by_name(
    sandbox_image, docker_client, monkeypatch, lost
):
    """The engine created the container but its id never arrived: it is removed by name."""
    substrate = get_substrate("docker", session_id=f"test-{new_id()}", image=sandbox_image)
    created = []
    create = substrate.api.create_container

    def create_then_lose_the_response(*args, **kwargs):
        created.append(create(*args, **kwargs)["Id"])
        raise lost("the response to the create request was lost")

    monkeypatch.setattr(substrate.api, "create_container", create_then_lose_the_response)
    label = f"{SESSION_LABEL}={substrate.session_id}"
    try:
        with pytest.raises((KeyboardInterrupt, SandboxStartError)):
            substrate.start()
        assert len(created) == 1
        assert docker_client.containers.list(all=True, filters={"label": label}) == []
    finally:
        substrate.reap(substrate.session_id)  # only if the assertion above failed
        substrate.close()


# -- the exec API ------------------------------------------------------------------------------


def test_a_program_the_runtime_cannot_find_is_exit_127_with_the_reason_on_stderr(box):
    """Without a step timeout nothing wraps the command, so it is the OCI runtime that fails
    to start it (the contract's steps all have a timeout: `timeout` reports it there)."""
    result = box.exec(["no-such-program-xyz"])
    assert (result.exit_code, result.stdout) == (127, "")
    assert "no-such-program-xyz" in result.stderr


@pytest.mark.parametrize("forced", ["sdk-internals-missing", "other-transport"])
def test_the_sdks_own_reader_is_the_fallback_and_reads_the_same(box, monkeypatch, forced):
    """Without the SDK internals ``_exec_output`` reads through (a future docker SDK or
    urllib3), or on ssh / named-pipe transports, the SDK's own reader takes over."""
    used = []
    sdk_output = docker_exec.sdk_output
    monkeypatch.setattr(
        docker_exec, "sdk_output", lambda sock, cap: used.append(sock) or sdk_output(sock, cap)
    )
    if forced == "sdk-internals-missing":
        monkeypatch.setattr(stream, "http_reader", _without_internals)
    else:
        monkeypatch.setattr(docker_exec, "plain_socket", lambda base_url: False)
    result = box.exec("for i in $(seq 300); do echo o$i; echo e$i >&2; done; exit 3", timeout=30)
    assert result.exit_code == 3
    assert result.stdout.split() == [f"o{i}" for i in range(1, 301)]
    assert result.stderr.split() == [f"e{i}" for i in range(1, 301)]
    assert box.exec(["true"]).stdout == "" and box.exec(["true"]).ok
    assert len(used) == 3


def _without_internals(sock):
    raise AttributeError("'HTTPResponse' object has no attribute '_fp'")


# -- the archive API ---------------------------------------------------------------------------


def test_writing_into_new_directories_keeps_the_mode_of_existing_ones(box):
    """The archive carries only the file, so its existing parents are not chmod-ed or chown-ed."""
    before = out(box, ["stat", "-c", "%a %U", "/tmp", "/workspace"])
    box.write_file("/tmp/x/y/z.txt", "deep\n")
    box.write_file("a/b/c/d.txt", "deeper\n")
    assert out(box, ["stat", "-c", "%a %U", "/tmp", "/workspace"]) == before  # 1777 stays


# -- timeouts ------------------------------------------------------------------------------------


def test_a_step_timeout_is_one_reason_that_never_shows_the_command(box):
    with pytest.raises(StepTimeout) as caught:
        box.exec("TOKEN=hunter2-secret; sleep 301 & sleep 302; echo never", timeout=0.5)
    # the same reason for every such step, and never the command line (it may hold secrets)
    assert str(caught.value) == "docker: step ran past its 0.5 s timeout; killed"
    assert box.rollout.steps[-1].exit_code is None


def test_the_client_backstop_gives_up_on_a_step_the_engine_does_not_end(box):
    """If the in-container timeout never fires, the client stops waiting and kills the group."""
    api = box.substrate.api
    argv = ["timeout", "-s", "KILL", "120", "sh", "-c", "sleep 303"]
    exec_id = api.exec_create(box.id, argv)["Id"]
    with pytest.raises(TimeoutError):
        docker_exec.exec_output(api, exec_id, 0.3, 1 << 20)
    assert docker_exec.kill_exec(api, exec_id, "timeout", group=True) is True
    assert docker_exec.exit_code(api, exec_id) == 137
    assert "sleep 303" not in out(box, ["ps", "-eo", "args"])


def test_probes_run_in_the_timeout_wrapper_as_every_step_and_time_out_client_side(box, monkeypatch):
    """The action tax is what carrying a step costs: the probe's `true` is wrapped as any
    step's command is (issue 29); a step that never answers times out on the client."""
    commands = []
    create = box.substrate.api.exec_create
    monkeypatch.setattr(
        box.substrate.api,
        "exec_create",
        lambda cid, cmd, **kw: commands.append(cmd) or create(cid, cmd, **kw),
    )
    box.timeout = 30
    try:
        box.probe(1)
        box.exec(["true"])
        box.exec(["echo"])
    finally:
        box.timeout = None
    wrapped = ["timeout", "-s", "KILL", "30.000"]
    assert commands == [[*wrapped, "true"], [*wrapped, "true"], [*wrapped, "echo"]]
    monkeypatch.setattr(docker_exec, "exec_output", _never_answers)
    with pytest.raises(StepTimeout) as caught:
        box.exec(["true"], timeout=0.2)
    # the client's backstop, past the in-container `timeout`; the message names no command
    later = f"{docker_exec.BACKSTOP_S:.0f} s later it still ran; "
    assert str(caught.value).startswith(f"docker: step ran past its 0.2 s timeout; {later}")


def _never_answers(api, exec_id, timeout, cap):
    assert timeout == pytest.approx(0.2 + docker_exec.BACKSTOP_S)  # a wrapped step's backstop
    raise TimeoutError


def test_a_long_silent_command_outlives_the_clients_request_timeout(sandbox_image):
    """The SDK's 60 s request timeout must not cap a step: steps without a timeout wait."""
    sandbox = started(sandbox_image)
    try:
        sandbox.substrate.api.timeout = 1  # every request now times out after 1 s of silence
        assert sandbox.exec("sleep 1.5; echo done").stdout == "done\n"
    finally:
        sandbox.substrate.api.timeout = 60
        finish(sandbox)


def test_a_container_removed_behind_its_back_is_a_clear_error_and_close_still_works(
    dsub, docker_client
):
    sandbox = dsub.start()
    docker_client.containers.get(sandbox.id).remove(force=True)
    with pytest.raises(SandboxError, match=r"^docker: exec in container \w{12} failed: "):
        sandbox.exec("true")
    with pytest.raises(SandboxError, match="is gone"):
        sandbox.read_file("x")
    sandbox.close()
    assert sandbox.rollout.teardown_s is not None


# -- the session transport ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def session_sub(sandbox_image: str) -> Iterator[DockerSubstrate]:
    """A docker substrate whose steps go through one shell per container."""
    substrate = get_substrate(
        "docker", session_id=f"test-{new_id()}", image=sandbox_image, transport="session"
    )
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


@pytest.fixture(scope="module")
def shell_box(session_sub: DockerSubstrate) -> Iterator[Sandbox]:
    with session_sub.start() as sandbox:
        yield sandbox


def test_the_session_is_one_shell_opened_in_its_own_phase_of_the_cold_start(
    session_sub, docker_client, monkeypatch
):
    created = []
    create = session_sub.api.exec_create
    monkeypatch.setattr(
        session_sub.api,
        "exec_create",
        lambda cid, cmd, **kw: created.append(cmd) or create(cid, cmd, **kw),
    )
    with session_sub.start() as sandbox:
        rollout = sandbox.rollout
        assert (rollout.kind, rollout.transport) == ("docker", "session")
        assert list(rollout.phases) == ["create", "start", "session", "first_exec"]
        assert rollout.cold_start_s == pytest.approx(sum(rollout.phases.values()))
        assert sandbox.exec("echo $$ $PPID").ok
        sandbox.write_file("f", b"\0\xff")
        assert sandbox.read_file("f", binary=True) == b"\0\xff"
        sandbox.probe(3)
        assert created == [["sh"]]  # every step, file and probe went through the one shell
        shell = session_shell(docker_client, sandbox.id)
        assert shell["Running"] and shell["ProcessConfig"]["entrypoint"] == "sh"


@pytest.mark.parametrize("death", ["killed-from-the-host", "removed"])
def test_a_session_whose_shell_dies_fails_in_one_line_and_never_hangs(
    session_sub, docker_client, death
):
    """From outside, the shell's process is killed, or the container removed (a step that
    kills its own shell is a contract case: tests/contract/test_lifecycle.py)."""
    sandbox = session_sub.start()
    try:
        assert sandbox.exec("echo alive").stdout == "alive\n"
        if death == "killed-from-the-host":
            os.kill(session_shell(docker_client, sandbox.id)["Pid"], signal.SIGKILL)
        else:
            docker_client.containers.get(sandbox.id).remove(force=True)
        for step in (lambda: sandbox.exec("echo never"), lambda: sandbox.read_file("f")):
            with pytest.raises(SandboxError) as caught:
                step()
            message = str(caught.value)
            assert message.startswith("docker: ") and "\n" not in message
            assert "session lost" in message or "session is closed" in message
    finally:
        sandbox.close()
    assert sandbox.rollout.teardown_s is not None


def test_a_megabyte_of_binary_output_crosses_the_session_as_the_file_holds_it(shell_box):
    """Random bytes (NULs, frame-header and sentinel look-alikes) on stdout, byte for byte."""
    assert shell_box.exec("head -c 1048576 /dev/urandom > blob.bin").ok
    data = shell_box.read_file("blob.bin", binary=True)
    assert len(data) == 1048576
    result = shell_box.exec(["cat", "blob.bin"])
    assert result.stdout == data.decode("utf-8", "replace") and result.stderr == ""
    assert shell_box.exec("echo still framed").stdout == "still framed\n"


def test_frames_decode_however_the_connection_splits_them():
    """Docker's 8-byte headers and payloads may arrive split at any byte."""
    frames = [(1, b"out"), (2, b""), (2, b"err\n" * 5000), (1, bytes(range(256)))]
    wire = b"".join(
        bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data for kind, data in frames
    )
    expected = (b"out" + bytes(range(256)), b"err\n" * 5000)
    for size in (1, 7, 8, 9, 4096):
        decoder, got = stream.Frames(), {1: bytearray(), 2: bytearray()}
        for start in range(0, len(wire), size):
            decoder.feed(wire[start : start + size])
            while (piece := decoder.next()) is not None:
                got[piece[0]] += piece[1]
        assert (bytes(got[1]), bytes(got[2])) == expected


def _exec_output(api, exec_id):
    stdout, stderr = docker_exec.exec_output(api, exec_id, 10, 1 << 20)
    return stdout.data, stderr.data


def _standin_output(api, exec_id):
    got = {1: b"", 2: b""}
    for kind, data in docker_exec_standin.frames(api.exec_start(exec_id, socket=True)):
        got[kind] += data
    return got[1], got[2]


@pytest.mark.parametrize("read", [_exec_output, _standin_output], ids=["substrate", "stand-ins"])
def test_output_that_comes_with_the_exec_start_headers_is_kept(tmp_path, read):
    """A command that writes at once can reach the client in the same read as the engine's
    headers; the SDK's reader would drop those bytes (docker/docker-py#2042). The substrate
    and the stand-ins read through the response's buffer."""
    import docker

    wire = b"".join(
        bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data
        for kind, data in [(2, b"4242\n"), (1, b"at once\n")]
    )
    answer = b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n" + wire
    path = str(tmp_path / "engine.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        api = docker.APIClient(base_url=f"unix://{path}", version="1.41")
        with ThreadPoolExecutor(1) as pool:
            served = pool.submit(_answer_once, listener, answer)
            assert read(api, "e" * 64) == (b"at once\n", b"4242\n")
            assert served.result(10).startswith(b"POST /v1.41/exec/" + b"e" * 64 + b"/start ")


def _answer_once(listener: socket.socket, answer: bytes) -> bytes:
    """Take one request, answer it in one write (headers and output together), hang up."""
    conn, _ = listener.accept()
    with conn:
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        conn.sendall(answer)
    return request


@pytest.mark.parametrize("running", [False, True])
def test_a_silent_shell_is_asked_about_and_a_dead_one_ends_the_stream(monkeypatch, running):
    """If the engine kept a dead shell's connection open, the liveness check ends it."""
    ours, engines = socket.socketpair()
    api = _FakeEngineAPI(sock=ours, running=running)
    monkeypatch.setattr(docker_shell, "LIVENESS_S", 0.01)
    handle = DockerHandle(
        id="c" * 64, workdir="/w", api=api, substrate="docker", image="i", owner=None
    )
    shell = docker_shell.DockerShell(handle)
    try:
        if running:
            with pytest.raises(TimeoutError):
                shell.receive(0.05)
        else:
            assert shell.receive(None) == (0, b"")
        assert api.inspected
    finally:
        shell.close()
        engines.close()


class _FakeEngineAPI:
    """The few exec calls a session makes, answered without an engine."""

    def __init__(self, *, sock: socket.socket, running: bool) -> None:
        self.sock, self.running, self.inspected = sock, running, 0

    def exec_create(self, container, cmd, **kwargs):
        return {"Id": "shell"}

    def exec_start(self, exec_id, socket=False):
        return self.sock

    def exec_inspect(self, exec_id):
        self.inspected += 1
        return {"Running": self.running}


# -- options, observed from inside ----------------------------------------------------------


def cgroup_value(sandbox: Sandbox, v1: str, v2: str) -> str:
    return out(sandbox, f"cat /sys/fs/cgroup/{v1} 2>/dev/null || cat /sys/fs/cgroup/{v2}")


def test_network_none_leaves_only_loopback_and_bridge_adds_an_interface(box, sandbox_image):
    assert out(box, ["ls", "/sys/class/net"]).split() == ["lo"]
    bridged = started(sandbox_image, network="bridge")
    try:
        assert "eth0" in out(bridged, ["ls", "/sys/class/net"]).split()
    finally:
        finish(bridged)


def test_resource_limits_are_visible_in_the_cgroups(sandbox_image):
    sandbox = started(sandbox_image, memory="64m", cpus="0.5", pids_limit="50")
    try:
        memory = cgroup_value(sandbox, "memory/memory.limit_in_bytes", "memory.max")
        assert memory == str(64 * 1024 * 1024)
        quota = cgroup_value(sandbox, "cpu/cpu.cfs_quota_us", "cpu.max").split()[0]
        period = cgroup_value(sandbox, "cpu/cpu.cfs_period_us", "cpu.max").split()[-1]
        assert int(quota) / int(period) == 0.5
        assert cgroup_value(sandbox, "pids/pids.max", "pids.max") == "50"
    finally:
        finish(sandbox)


def test_workdir_env_and_runtime_options(sandbox_image):
    sandbox = started(sandbox_image, workdir="/srv/work", env="A=1,B=two words", runtime="runc")
    try:
        assert out(sandbox, "pwd") == "/srv/work"
        sandbox.write_file("here.txt", "x")
        assert out(sandbox, ["cat", "/srv/work/here.txt"]) == "x"
        assert sandbox.exec('echo "$A|$B"').stdout == "1|two words\n"
        assert sandbox.exec('echo "$A|$B"', env={"A": "per-call"}).stdout == "per-call|two words\n"
    finally:
        finish(sandbox)


@pytest.mark.parametrize("user, ids", [("nobody", "65534 65534"), ("1234:4321", "1234 4321")])
def test_user_runs_commands_and_owns_the_files_written(sandbox_image, user, ids):
    sandbox = started(sandbox_image, user=user, workdir="/tmp")
    try:
        assert out(sandbox, "id -u; id -g").split() == ids.split()
        sandbox.write_file("notes/mine.txt", "v1\n")
        owners = out(sandbox, ["stat", "-c", "%u %g", "notes", "notes/mine.txt"]).split()
        assert owners == ids.split() * 2
        assert sandbox.exec("echo v2 >> notes/mine.txt").ok  # the user can edit what it got
        assert sandbox.read_file("notes/mine.txt") == "v1\nv2\n"
    finally:
        finish(sandbox)


@pytest.mark.parametrize("transport", ["exec", "session"])
def test_a_user_cannot_write_files_a_shell_step_of_theirs_cannot(
    docker_client, sandbox_image, transport
):
    """The archive API writes as root: a write as ``user=nobody`` is checked as theirs."""
    sandbox = started(sandbox_image, user="nobody", workdir="/tmp", transport=transport)
    try:
        for path in ("/root/new.txt", "/root/deeper/new.txt", "/etc/passwd"):
            assert sandbox.exec(f"echo x > {path}").exit_code != 0  # a shell step cannot
            with pytest.raises(PermissionError) as denied:
                sandbox.write_file(path, "x\n")
            assert (denied.value.errno, denied.value.filename) == (errno.EACCES, path)
        look = "ls -d /root/new.txt /root/deeper 2>&1; head -1 /etc/passwd"
        exec_id = docker_client.api.exec_create(sandbox.id, ["sh", "-c", look], user="root")
        *missing, passwd = docker_client.api.exec_start(exec_id).decode().splitlines()
        assert len(missing) == 2 and all("No such file" in line for line in missing), missing
        assert passwd == "root:x:0:0:root:/root:/bin/bash"  # nothing written, nothing replaced
        sandbox.write_file("mine.txt", "ok")  # where the user may, as before
        assert sandbox.read_file("/tmp/mine.txt") == "ok"
    finally:
        finish(sandbox)


def test_another_image_by_name(docker_client, sandbox_image):
    alias = f"rollout-tax/test-alias:{new_id()}"
    docker_client.images.get(sandbox_image).tag(alias)
    try:
        sandbox = started(sandbox_image, image=alias)
        try:
            assert docker_client.containers.get(sandbox.id).attrs["Config"]["Image"] == (alias)
        finally:
            finish(sandbox)
    finally:
        docker_client.images.remove(alias)


def test_pull_missing_is_a_phase_outside_the_cold_start(docker_client, sandbox_image, monkeypatch):
    """No registry here: the pull is simulated by tagging, but the plugin's path is real."""
    alias = f"rollout-tax/test-pull:{new_id()}"
    substrate = get_substrate("docker", session_id=f"test-{new_id()}", image=alias, pull="missing")
    pulled = []

    def fake_pull(image, stream=False, decode=False, **kwargs):
        pulled.append(image)
        docker_client.images.get(sandbox_image).tag(alias)
        yield {"status": f"Pulled {image}"}

    monkeypatch.setattr(substrate.api, "pull", fake_pull)
    try:
        with substrate.start() as first, substrate.start() as second:
            assert pulled == [alias]
            assert list(first.rollout.phases) == ["pull", "create", "start", "first_exec"]
            phases = first.rollout.phases
            assert first.rollout.cold_start_s == pytest.approx(
                phases["create"] + phases["start"] + phases["first_exec"]
            )
            assert "pull" not in second.rollout.phases
    finally:
        substrate.close()
        docker_client.images.remove(alias)


def test_a_failed_pull_is_a_start_error_naming_the_image(sandbox_image, monkeypatch):
    alias = f"rollout-tax/test-nopull:{new_id()}"
    substrate = get_substrate("docker", image=alias, pull="missing")

    def failing_pull(image, **kwargs):
        yield {"error": "registry unreachable"}

    monkeypatch.setattr(substrate.api, "pull", failing_pull)
    try:
        with pytest.raises(Exception, match=f"pulling image {alias} failed: registry unreachable"):
            substrate.start()
    finally:
        substrate.close()


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, named",
    [
        # checked from the values alone, when the substrate is made
        ({"memory": "lots"}, "docker.memory='lots': expected a size like 512m or 2g"),
        ({"memory": "1m"}, "docker.memory='1m': the engine needs at least 6m"),
        ({"cpus": "0"}, "docker.cpus=0.0: expected 0.01 to 1,024 CPUs"),
        ({"cpus": "many"}, "docker.cpus='many': "),
        ({"pull": "sometimes"}, "docker.pull='sometimes': expected one of never, missing"),
        ({"network": "no such net!"}, "docker.network='no such net!': expected none, bridge"),
        ({"pids_limit": "0"}, "docker.pids_limit=0: expected a positive number"),
        ({"workdir": "relative"}, "docker.workdir='relative': expected an absolute path"),
        ({"user": "a b"}, "docker.user='a b': expected NAME, UID or UID:GID"),
        ({"env": "=x"}, "docker.env='=x': expected KEY=VALUE"),
        ({"bogus": "1"}, "docker.bogus: unknown option"),
    ],
)
def test_invalid_option_values_name_the_option(options, named):
    with pytest.raises(ConfigError) as error:
        get_substrate("docker", **options)
    message = str(error.value)
    assert message.startswith(named) and "\n" not in message


@pytest.mark.parametrize(
    "options, error, named",
    [
        ({"cpus": "64"}, ConfigError, "docker.cpus=64: the engine has only"),
        ({"network": "nosuchnet-xyz"}, ConfigError, "docker.network='nosuchnet-xyz': no such net"),
        ({"runtime": "nosuch"}, ConfigError, "docker.runtime='nosuch': not registered"),
    ],
    ids=["cpus", "network", "runtime"],
)
def test_what_the_engine_lacks_fails_every_start_naming_the_option(
    sandbox_image, options, error, named
):
    """Checked against the engine once, before the first start (reaping needs none of it)."""
    substrate = get_substrate("docker", image=sandbox_image, **options)
    try:
        for _ in range(2):
            with pytest.raises(error) as raised:
                substrate.start()
            message = str(raised.value)
            assert message.startswith(named) and "\n" not in message
        assert substrate.reap(substrate.session_id) == 0
    finally:
        substrate.close()


@pytest.mark.parametrize(
    "image, fix",
    [
        (DEFAULT_IMAGE, "build it with scripts/ensure-docker"),
        (
            "rollout-tax/missing:nope",
            "build it (docker build -t rollout-tax/missing:nope .) or load it",
        ),
    ],
)
def test_a_missing_image_with_pull_never_names_it_and_how_to_build_it(
    sandbox_image, monkeypatch, image, fix
):
    substrate = get_substrate("docker", image=image)
    if image == DEFAULT_IMAGE:  # pretend the default image is missing
        monkeypatch.setattr(substrate.api, "inspect_image", _no_such_image)
    try:
        with pytest.raises(SubstrateUnavailable) as error:
            substrate.start()
    finally:
        substrate.close()
    message = str(error.value)
    assert message == f"docker: image {image} is missing and docker.pull=never; {fix}, or set " + (
        "docker.pull=missing"
    )


def _no_such_image(image: str) -> None:
    import docker

    raise docker.errors.ImageNotFound(f"No such image: {image}")


def test_an_unreachable_engine_names_the_socket_and_the_fix(monkeypatch, tmp_path):
    missing = f"unix://{tmp_path}/none.sock"
    monkeypatch.setenv("DOCKER_HOST", missing)
    with pytest.raises(SubstrateUnavailable) as error:
        get_substrate("docker")
    assert str(error.value) == (
        f"docker: Docker engine unreachable at {missing} (DOCKER_HOST): No such file or "
        "directory; run scripts/ensure-docker or set DOCKER_HOST"
    )
    # Without DOCKER_HOST the message names the default socket (here: made unreachable).
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setattr(engine.docker, "from_env", _client_for(missing))
    with pytest.raises(SubstrateUnavailable) as error:
        get_substrate("docker")
    assert str(error.value) == (
        "docker: Docker engine unreachable at unix:///var/run/docker.sock "
        "(DOCKER_HOST is not set): No such file or directory; run scripts/ensure-docker or set "
        "DOCKER_HOST"
    )


def _client_for(base_url: str):
    import docker

    def from_env(**kwargs):
        return docker.DockerClient(base_url=base_url, **kwargs)

    return from_env


# -- through pytest: failures are data, without tracebacks --------------------------------------


WORKLOAD = """
import pytest

@pytest.mark.trajectory(rounds=2)
def test_work(sandbox):
    assert sandbox.exec("true").ok
"""


def run_pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout=300):
    """pytest in a subprocess, rooted in ``tmp_path``; returns (exit code, output)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment.update(env or {})
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    done = subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    "args, env, reason",
    [
        (
            [],
            {"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
            "Docker engine unreachable at unix:///nonexistent/docker.sock (DOCKER_HOST): No such "
            "file or directory; run scripts/ensure-docker",
        ),
        (
            ["--substrate-opt", "docker.image=rollout-tax/missing:nope"],
            {},
            "image rollout-tax/missing:nope is missing and docker.pull=never; build it",
        ),
        (
            ["--substrate-opt", "docker.network=nosuchnet-xyz"],
            {},
            "docker.network='nosuchnet-xyz': no such network on this engine",
        ),
        (
            ["--substrate-opt", "docker.image=UPPER/Case::x"],
            {},
            "docker.image='UPPER/Case::x': no such image",
        ),
    ],
    ids=["unreachable", "image-missing", "network-missing", "image-malformed"],
)
def test_errors_fail_every_rollout_with_one_line_and_no_traceback(
    sandbox_image, tmp_path, args, env, reason
):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_work.py").write_text(WORKLOAD)
    code, output = run_pytest(
        tmp_path, "--substrate=docker", "--rollout-json=r.json", *args, env=env
    )
    assert code == 1, output
    assert "Traceback" not in output and "docker/errors.py" not in output
    assert "http+docker" not in output and "Client Error" not in output
    lines = [line for line in output.splitlines() if reason in line]
    assert lines, output
    report = json.loads((tmp_path / "r.json").read_text())
    docker_row = report["substrates"]["docker"]
    assert docker_row["rollouts"] == 2 and docker_row["failures"] == 0
    [(failure, count)] = docker_row["infra_failed"]["reasons"].items()
    assert reason in failure and count == 2
    assert all(r["outcome"] == "infra_failed" for r in report["rollouts"])


def test_reaping_needs_no_image(sandbox_image, tmp_path, docker_client):
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = docker_client.containers.run(  # as a session killed outright leaves one
        sandbox_image,
        ["sleep", "infinity"],
        labels={
            SESSION_LABEL: new_id(),
            OWNER_LABEL: f"{socket.gethostname()}:{dead.pid}",
            USER_LABEL: current_user(),
        },
        init=True,
        detach=True,
    )
    try:
        code, output = run_pytest(
            tmp_path,
            "--rollout-reap",
            "--substrate=docker",
            "--substrate-opt=docker.image=rollout-tax/missing:nope",
            "--substrate-opt=docker.pull=missing",
        )
        assert code == 0, output
        assert "rollout-tax: docker: removed" in output and "missing" not in output
        assert not docker_client.containers.list(all=True, filters={"id": leftover.id})
    finally:  # a failed assertion must not leave the container behind
        with contextlib.suppress(docker_errors.NotFound):
            leftover.remove(force=True)


def test_an_invalid_option_value_is_a_usage_error_before_any_rollout(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_work.py").write_text(WORKLOAD)
    code, output = run_pytest(tmp_path, "--substrate=docker", "--substrate-opt=docker.memory=lots")
    assert code == 4, output  # pytest's usage error
    assert "docker.memory='lots': expected a size like 512m or 2g" in output
    assert "Traceback" not in output and "test_work" not in output


def test_the_example_suite_on_local_and_docker_shows_the_spread(sandbox_image, tmp_path):
    """The example suite under xdist; the 150-step loop runs one round per substrate (of 3)."""
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    loop = "example_suite/test_agent_loop.py::test_agent_loop"
    skip = [f"--deselect={loop}[{name}-{r}]" for name in ("local", "docker") for r in (2, 3)]
    code, output = run_pytest(
        tmp_path,
        "example_suite",
        "--substrate=local,docker",
        "--rollout-json=r.json",
        *skip,
        "-p",
        "xdist",
        "-n",
        "2",
    )
    assert code == 0, output
    report = json.loads((tmp_path / "r.json").read_text())
    local, docker_row = report["substrates"]["local"], report["substrates"]["docker"]
    assert local["rollouts"] == docker_row["rollouts"] == 6
    assert local["failures"] == docker_row["failures"] == 0
    assert set(docker_row["phases"]) == {"create", "start", "first_exec"}
    spread = report["spread"]
    assert (spread["fastest"], spread["slowest"]) == ("local", "docker")
    p50 = docker_row["cold_start"]["p50"] / local["cold_start"]["p50"]
    assert spread["cold_start_p50"] == pytest.approx(p50) and p50 > 1
    hours = docker_row["worker_hours"] / local["worker_hours"]
    assert spread["worker_hours"] == pytest.approx(hours) and hours > 1
    for rollout in report["rollouts"]:
        if rollout["substrate"] == "docker":
            assert rollout["cold_start_s"] == pytest.approx(sum(rollout["phases"].values()))
            assert rollout["teardown_s"] > 0 and rollout["action_probes_s"]
    assert "spread: cold start p50" in output


def test_the_example_suite_with_a_session_variant_shows_both_rows_and_the_ratio(
    sandbox_image, tmp_path
):
    """docs/substrates/transports.md's variant: docker and docker-session side by side,
    compared in one line."""
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rollout-tax.substrates.docker-session]\nkind = "docker"\ntransport = "session"\n'
    )
    loop = "example_suite/test_agent_loop.py::test_agent_loop"
    skip = [
        f"--deselect={loop}[{name}-{r}]" for name in ("docker", "docker-session") for r in (2, 3)
    ]
    code, output = run_pytest(
        tmp_path, "example_suite", "--substrate=docker,docker-session", "--rollout-json=r.json",
        *skip, "-p", "xdist", "-n", "2",
    )  # fmt: skip
    assert code == 0, output
    report = json.loads((tmp_path / "r.json").read_text())
    docker_row, session = report["substrates"]["docker"], report["substrates"]["docker-session"]
    assert (docker_row["transport"], session["transport"]) == ("exec", "session")
    assert docker_row["kind"] == session["kind"] == "docker"
    assert list(session["phases"]) == ["create", "start", "session", "first_exec"]
    overhead = [min(row["action"]["mean"], row["step"]["mean"]) for row in (session, docker_row)]
    ratio = overhead[0] / overhead[1]
    saved = session["tax_hours"] - docker_row["tax_hours"]
    text = " ".join(line.strip() for line in output.splitlines())
    expected = f"step overhead {format_ratio(ratio)}, {saved:+,.0f} tax-hours"
    assert f"docker-session vs docker, transport session vs exec: {expected}" in text
    assert ratio < 1 and saved < 0
