"""``exec``: every step its own exec websocket; files through its stdin (``head -c N``) and
stdout (``cat``), byte-exact on both subprotocols."""

from __future__ import annotations

import errno
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ...core.contract import READ_SCRIPT, WRITE_SCRIPT, file_error_for
from ...core.sandbox import Handle
from ...core.transport import (
    RawResult,
    Transport,
    one_line,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ...errors import SandboxError
from . import exec_ws
from .api import Api

#: How long after a step's timeout the client gives up waiting for the killed process's status.
KILL_GRACE = 10.0


@dataclass
class PodHandle(Handle):
    """A sandbox's pod: ``id`` is its name; what exec and teardown need to reach it."""

    #: The container commands run in.
    container: str
    #: The version the pod had when it was Ready; teardown watches from it.
    resource_version: str


class PodExec(Transport):
    """``exec``: one exec websocket per step, ended by the step's deadline (plus ``grace``);
    a file step's when no data came for the API's read timeout."""

    name = "exec"

    def __init__(
        self, api: Api, handle: PodHandle, *, substrate: str, grace: float = KILL_GRACE
    ) -> None:
        self._api = api
        self._handle = handle
        self._substrate = substrate
        self._grace = grace

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        command = argv
        if env or cwd != self._handle.workdir:
            command = ["sh", "-c", shell_line(argv, env=env, cwd=cwd)]
        command = timeout_wrapped(command, timeout)  # the no-op probe's too: it is the tax
        deadline = None if timeout is None else time.perf_counter() + timeout + self._grace
        started = time.perf_counter()
        try:
            result = exec_ws.run(
                self._api,
                self._handle.id,
                self._handle.container,
                command,
                deadline=deadline,
                cap=self.output_cap,
            )
        except exec_ws.Deadline:
            assert timeout is not None  # only a deadline passes
            fate = f"{self._grace:g} s later its exit status had not arrived"
            raise step_timeout(self._substrate, timeout, fate) from None
        if timeout is not None and was_timed_out(
            timeout, result.exit_code, time.perf_counter() - started
        ):
            raise step_timeout(self._substrate, timeout)
        return result

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        argv = ["sh", "-c", WRITE_SCRIPT, "sh", path, str(len(data))]
        result = self._file_exec(argv, timeout, data)
        if result.exit_code != 0:
            raise file_error_for(result.exit_code, path) or self._os_error(path, result, "write")

    def read(self, path: str, *, timeout: float | None) -> bytes:
        result = self._file_exec(["sh", "-c", READ_SCRIPT, "sh", path], timeout)
        if result.exit_code != 0:
            raise file_error_for(result.exit_code, path) or self._os_error(path, result, "read")
        return result.stdout

    def _file_exec(
        self, command: list[str], timeout: float | None, stdin: bytes | None = None
    ) -> RawResult:
        """A file step's exec, within ``timeout``; without one, until no data came for the
        API's read timeout."""
        idle = None if timeout is not None else self._api.timeout[1]
        deadline = None if timeout is None else time.perf_counter() + timeout
        pod, container = self._handle.id, self._handle.container
        try:
            return exec_ws.run(
                self._api, pod, container, command, stdin=stdin, deadline=deadline, idle=idle
            )
        except exec_ws.Deadline:
            if timeout is not None:
                raise step_timeout(self._substrate, timeout, "it may still be running") from None
            raise SandboxError(
                f"{self._substrate}: a file step got no data for {idle:g} s; its stream was closed"
            ) from None

    def _os_error(self, path: str, result: RawResult, verb: str) -> OSError:
        """An OSError for a failed file script, typed by the shell's message where it can be."""
        message = one_line(result.stderr.decode("utf-8", "replace")) or "failed"
        text = f"{self._substrate}: cannot {verb} {path} in pod {self._handle.id}: {message}"
        for marker, kind, code in (
            ("Permission denied", PermissionError, errno.EACCES),
            ("Not a directory", NotADirectoryError, errno.ENOTDIR),
            ("Is a directory", IsADirectoryError, errno.EISDIR),
            ("Read-only file system", OSError, errno.EROFS),
            ("No space left", OSError, errno.ENOSPC),
        ):
            if marker in message:
                return kind(code, text, path)
        return OSError(errno.EIO, text, path)
