"""The ``exec`` transport of docker: one exec API call per step, files through the archive API.

Each step makes exactly the requests the SDK's own ``exec_run`` makes (exec create, exec start,
exec inspect), so an action costs what the SDK costs.
"""

from __future__ import annotations

import errno
import os
import posixpath
import signal
import time
from collections.abc import Mapping
from typing import Any

from ...core.contract import READ_SCRIPT, file_error_for
from ...core.shell import STDERR, STDOUT
from ...core.transport import (
    Output,
    RawResult,
    Transport,
    not_started,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ...errors import SandboxError
from . import archive, stream
from .engine import ENGINE_ERRORS, UNIX_URL, docker_socket, engine_errors, plain_socket
from .handle import DockerHandle

#: How long past a step's timeout the client waits for the engine before giving up on it.
BACKSTOP_S = 5.0
#: Where the kernel's files live: their size is 0 until read, so the archive API has none.
KERNEL_FILES = ("/proc/", "/sys/")


class DockerExec(Transport):
    """``exec``: a fresh exec in the container per step."""

    name = "exec"

    def __init__(self, handle: DockerHandle) -> None:
        self._handle = handle

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # A timed step runs under `timeout` (the no-op probe too: it costs what a step
        # costs), and the client waits a while longer (the backstop).
        handle = self._handle
        command = timeout_wrapped(argv, timeout)
        wrapped = command != argv
        backstop = timeout
        if timeout is not None and wrapped:
            backstop = timeout + max(BACKSTOP_S, timeout / 2)
        started = time.perf_counter()
        with engine_errors(handle.substrate, f"exec in container {handle.id[:12]}"):
            exec_id = handle.api.exec_create(
                handle.id, command, environment=dict(env) if env else None, workdir=cwd
            )["Id"]
            try:
                stdout, stderr = exec_output(handle.api, exec_id, backstop, self.output_cap)
            except TimeoutError:
                assert timeout is not None and backstop is not None  # only a bound times out
                killed = kill_exec(handle.api, exec_id, command[0], group=wrapped)
                fate = "killed" if killed else "it may still be running"
                if wrapped:  # the in-container timeout should have ended it long before
                    fate = f"{backstop - timeout:.0f} s later it still ran; {fate}"
                raise step_timeout(handle.substrate, timeout, fate) from None
            code = exit_code(handle.api, exec_id)
        if timeout is not None and was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(handle.substrate, timeout)
        if (
            code == 126
            and not stderr.size
            and (failed := not_started(bytes(stdout.data))) is not None
        ):
            # The runtime could not start the command (not found, no such cwd, not executable).
            if wrapped and b'exec: "timeout"' in stdout.data:
                raise SandboxError(
                    f"{handle.substrate}: steps with a timeout need the `timeout` command "
                    f"(coreutils or busybox) in image {handle.image}"
                )
            return failed
        return RawResult.of(code, stdout, stderr)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        """Through the archive API, bounded by the client's request timeout."""
        handle = self._handle
        with engine_errors(handle.substrate, f"writing {path}"):
            ids = handle.owner.ids(self._run_plain)
            archive.put_file(handle, path, data, ids=ids, run=self._run_plain)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        if path.startswith(KERNEL_FILES):  # the archive API cannot copy them: read by `cat`
            read = self.run(
                ["sh", "-c", READ_SCRIPT, "sh", path], timeout=timeout, env=None, cwd="/"
            )
            if read.exit_code != 0:
                raise file_error_for(read.exit_code, path) or OSError(
                    errno.EIO, read.reason(), path
                )
            return read.stdout
        with engine_errors(self._handle.substrate, f"reading {path}"):
            return archive.get_file(self._handle, path)

    def _run_plain(self, argv: list[str]) -> RawResult:
        """``argv`` in ``/``, without a timeout: the helper steps of a file transfer."""
        return self.run(argv, timeout=None, env=None, cwd="/")


def exec_output(api: Any, exec_id: str, timeout: float | None, cap: int) -> tuple[Output, Output]:
    """Start ``exec_id`` and demultiplex its stdout and stderr until it ends, each kept up to
    ``cap`` bytes.

    The same single request as the SDK's ``exec_start``, but read through the HTTP response's
    own buffer (nothing read ahead with the headers can be lost) and with a deadline: the SDK's
    reader polls without one. ``timeout`` None waits as long as the command runs. Other
    transports, and an SDK without the internals this reads, get the SDK's reader instead.
    """
    sock = api.exec_start(exec_id, socket=True)
    if not plain_socket(api.base_url):  # ssh / named-pipe transports: the SDK's reader
        return sdk_output(sock, cap)
    try:
        response, reader = stream.http_reader(sock)
    except AttributeError:  # a docker SDK or urllib3 without these internals: the SDK's reader
        return sdk_output(sock, cap)
    raw_socket = stream.raw_socket(sock)
    deadline = None if timeout is None else time.monotonic() + timeout
    frames = stream.Frames()
    outputs = {STDOUT: Output(cap), STDERR: Output(cap)}
    try:
        raw_socket.settimeout(timeout)
        while chunk := reader.read1(1 << 20):
            frames.feed(chunk)
            while (piece := frames.next()) is not None:
                outputs[piece[0]].add(piece[1])
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:  # a flood that never lets the socket time out
                    raise TimeoutError
                raw_socket.settimeout(left)
    finally:
        response.close()
    return outputs[STDOUT], outputs[STDERR]


def sdk_output(sock: Any, cap: int) -> tuple[Output, Output]:
    """Read an exec socket to its end with the SDK's own reader, as ``exec_start(demux=True)``
    does (no client-side deadline: only the in-container timeout ends a step)."""
    try:
        frames = (
            docker_socket.demux_adaptor(*frame) for frame in docker_socket.frames_iter(sock, False)
        )
        streams = docker_socket.consume_socket_output(frames, demux=True)
    finally:
        stream.close(sock)
    stdout, stderr = Output(cap), Output(cap)
    for output, data in zip((stdout, stderr), streams, strict=True):
        output.add(data or b"")
    return stdout, stderr


def exit_code(api: Any, exec_id: str) -> int:
    """The exit code of a finished exec; waits briefly if the engine has not recorded it yet."""
    for delay in (0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, None):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        if delay is not None:
            time.sleep(delay)
    raise SandboxError(f"docker: exec {exec_id[:12]} ended but has no exit code")


def kill_exec(api: Any, exec_id: str, program: str, *, group: bool) -> bool:
    """Best effort, for a step the engine did not end: kill it (its process group if
    ``group``) from this host, when the engine runs here and the PID is indeed ``program``."""
    try:
        pid = api.exec_inspect(exec_id).get("Pid") or 0
        if pid <= 0 or api.base_url != UNIX_URL:
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:  # the same PID namespace?
            if posixpath.basename(cmdline.read().split(b"\0")[0]) != program.encode():
                return False
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        return True
    except (OSError, *ENGINE_ERRORS):
        return False
