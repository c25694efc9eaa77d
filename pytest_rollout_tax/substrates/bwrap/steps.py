"""The transports of a bwrap sandbox: ``exec`` (each step one ``nsenter`` into it) and the
``session`` shell (one ``nsenter``'d ``sh`` for the sandbox's life, served by the step helper).

A step's command runs under ``timeout -s KILL`` inside the sandbox, as docker's do; past its
deadline and a backstop, the ``nsenter`` on this host is killed with its process group.
File steps are scripts in the sandbox (``core/contract.py``): the path is resolved inside it,
its symlinks included.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping

from ...core.contract import READ_SCRIPT, WRITE_SCRIPT, file_error_for
from ...core.shell import SHELL, STDERR, STDOUT, Duplex
from ...core.transport import (
    RawResult,
    Transport,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ..local import _kill_group, _read_capped, pipes
from .launch import BwrapHandle, enter

#: How long past a step's timeout this client waits before it kills the step from outside.
BACKSTOP_S = 5.0
#: How often a silent session checks that its shell still runs.
LIVENESS_S = 0.5


class BwrapExec(Transport):
    """``exec``: one ``nsenter`` into the sandbox per step."""

    name = "exec"

    def __init__(self, handle: BwrapHandle) -> None:
        self._handle = handle

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        line = shell_line(timeout_wrapped(argv, timeout), env=env, cwd=cwd)
        backstop = None if timeout is None else timeout + max(BACKSTOP_S, timeout / 2)
        started = time.perf_counter()
        process = self._spawn(["/bin/sh", "-c", line], stdin=subprocess.DEVNULL)
        try:
            stdout, stderr = _read_capped(process, backstop, self.output_cap)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            assert timeout is not None  # only a deadline expires
            raise step_timeout(self._handle.substrate, timeout) from None
        except BaseException:  # Ctrl-C, SIGTERM: the step goes first
            _kill_group(process)
            raise
        code = process.returncode
        code = 128 - code if code < 0 else code
        if timeout is not None and was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._handle.substrate, timeout)
        return RawResult.of(code, stdout, stderr)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self._file(["sh", "-c", WRITE_SCRIPT, "sh", path, str(len(data))], path, data, timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        return self._file(["sh", "-c", READ_SCRIPT, "sh", path], path, None, timeout)

    def _file(self, argv: list[str], path: str, data: bytes | None, timeout: float | None) -> bytes:
        """A file script in the sandbox, ``data`` on its stdin; its stdout, whole."""
        process = self._spawn(argv, stdin=subprocess.PIPE if data is not None else None)
        try:
            stdout, stderr = process.communicate(data, timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            assert timeout is not None  # only a deadline expires
            raise step_timeout(self._handle.substrate, timeout) from None
        except BaseException:
            _kill_group(process)
            raise
        if process.returncode != 0:
            why = stderr.decode("utf-8", "replace").strip() or "failed"
            raise file_error_for(process.returncode, path) or OSError(errno.EIO, why, path)
        result: bytes = stdout
        return result

    def _spawn(self, argv: list[str], *, stdin: int | None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            enter(self._handle, argv),
            env=self._handle.env,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )


class BwrapShell(Duplex):
    """``session``: one ``sh`` entered into the sandbox, talked to over pipes."""

    def __init__(self, handle: BwrapHandle) -> None:
        self._process = subprocess.Popen(
            enter(handle, SHELL),
            env=handle.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._stdin, stdout, stderr = pipes(self._process)
        self._selector = selectors.DefaultSelector()
        self._selector.register(stdout, selectors.EVENT_READ, STDOUT)
        self._selector.register(stderr, selectors.EVENT_READ, STDERR)

    def send(self, data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):  # the shell is gone: receive() says so
            self._stdin.write(data)
            self._stdin.flush()

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._selector.get_map():
            left = LIVENESS_S if deadline is None else deadline - time.monotonic()
            ready = self._selector.select(max(min(left, LIVENESS_S), 0))
            if not ready:
                if self._process.poll() is not None:
                    return 0, b""  # the shell died; a child of it holds its pipes
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError
                continue
            key = ready[0][0]
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                return key.data, chunk
            self._selector.unregister(key.fileobj)
        return 0, b""

    def close(self) -> None:
        """End the shell (the nsenter on this host, its group); what its steps left running
        ends with the sandbox, or with its reset."""
        process = self._process
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        self._selector.close()
        for pipe in pipes(process):
            with contextlib.suppress(OSError):
                pipe.close()
        process.wait()
