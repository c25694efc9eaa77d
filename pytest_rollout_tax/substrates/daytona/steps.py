"""The two data planes of a Daytona sandbox: ``process.exec`` per step, or a Daytona session;
files through the SDK's ``fs`` on both."""

from __future__ import annotations

import contextlib
import shlex
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ...core.record import PhaseClock
from ...core.shell import RELAY
from ...core.transport import (
    RawResult,
    one_line,
    step_timeout,
    timeout_limit,
    was_timed_out,
    with_env,
)
from ...errors import SandboxError
from ..hosted import HostedHandle
from ..hosted.transport import HostedTransport, Provider
from .sdk import DaytonaError, DaytonaNotFoundError, DaytonaTimeoutError, SessionExecuteRequest

#: Separates a step's stdout from its stderr in ``process.exec``'s merged ``result``.
_SPLIT = "rollout-tax-stderr-"


def _wrapped(argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None) -> str:
    """The shell words of one step: under ``timeout -s KILL`` (``0``: no limit) and the relay
    that ends it once every holder of its output closed it (:data:`..core.shell.RELAY`)."""
    limit = timeout_limit(timeout)
    words = ["timeout", "-s", "KILL", limit, "sh", "-c", RELAY, "sh", *with_env(argv, env)]
    return shlex.join(words)


class _Steps(HostedTransport):
    """What both Daytona transports share: files through the SDK's ``fs``, errors."""

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        try:
            self.sdk.fs.upload_file(data, path, timeout=_seconds(timeout))
        except Exception as exc:
            raise self._file_failure(exc, path, "writing a file", timeout) from None

    def read(self, path: str, *, timeout: float | None) -> bytes:
        try:
            return bytes(self.sdk.fs.download_file(path, _seconds(timeout)))
        except Exception as exc:
            raise self._file_failure(exc, path, "reading a file", timeout) from None

    def _file_failure(
        self, exc: Exception, path: str, action: str, timeout: float | None
    ) -> Exception:
        """The toolbox's answer about ``path`` as an OSError (the Sandbox asks why); a request
        past the step's timeout as StepTimeout; the sandbox's own failure as SandboxError."""
        if timeout and isinstance(exc, DaytonaTimeoutError):
            return self._file_timeout(timeout)
        status = getattr(exc, "status_code", None)
        if isinstance(exc, DaytonaNotFoundError) or (
            isinstance(exc, DaytonaError) and status is not None and 400 <= status < 500
        ):  # the Sandbox asks the sandbox why (missing, not a directory, ...)
            return self._answered(exc, path)
        return self._fail(exc, action)

    def _result(
        self,
        timeout: float | None,
        started: float,
        code: int,
        out: bytes,
        err: bytes,
    ) -> RawResult:
        if was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        return RawResult.capped(code, out, err, self.output_cap)


class DaytonaExec(_Steps):
    """One ``process.exec`` (``POST /process/execute``) per step. The service merges stdout
    and stderr into one ``result``: the step's stderr goes to a file in the sandbox and follows
    its stdout after a random separator, in the same call."""

    name = "exec"

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # The service merges the streams: stderr goes to a file, printed after a separator.
        separator = f"{_SPLIT}{uuid.uuid4().hex}"
        step, quoted = _wrapped(argv, timeout=timeout, env=env), shlex.quote(cwd)
        command = (
            f'f=$(mktemp) || exit 125; (cd -- {quoted} || exit 127; exec {step}) 2>"$f"; '
            f'c=$?; printf \'\\n%s\\n\' {separator}; cat "$f"; rm -f "$f"; exit $c'
        )
        started = time.perf_counter()
        response = self._exec(shlex.join(["sh", "-c", command]))
        out, found, err = (response.result or "").rpartition(f"\n{separator}\n")
        if not found:
            lost = one_line(response.result or "no output", 120)
            raise self._fail(
                SandboxError(f"the step's output has no separator: {lost}"), "running a command"
            )
        return self._result(
            timeout, started, int(response.exit_code or 0), out.encode(), err.encode()
        )

    def _exec(self, command: str) -> Any:
        try:
            return self.sdk.process.exec(command, cwd="/")
        except Exception as exc:
            raise self._fail(exc, "running a command") from None


class DaytonaSession(_Steps):
    """Every step is one command in a Daytona session (``process.create_session``), a shell the
    service holds; each runs in a subshell so nothing leaks into the next, with stdout and
    stderr apart (``execute_session_command``)."""

    name = "session"

    def __init__(self, handle: HostedHandle, substrate: Provider) -> None:
        super().__init__(handle, substrate)
        self.session_id: str | None = None

    def open(self, clock: PhaseClock) -> None:
        session_id = f"rollout-tax-{uuid.uuid4().hex[:12]}"
        try:
            self.sdk.process.create_session(session_id)
        except Exception as exc:
            raise self._substrate.error(exc, "creating a session", self.sandbox_id) from None
        self.session_id = session_id
        clock.mark("session")

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        if self.session_id is None:
            raise SandboxError(f"{self._substrate.name}: the session is closed")
        step = _wrapped(argv, timeout=timeout, env=env)
        started = time.perf_counter()
        response = self._command(
            f"(exec </dev/null; cd -- {shlex.quote(cwd)} || exit 127; exec {step})"
        )
        out, err = (response.stdout or "").encode(), (response.stderr or "").encode()
        return self._result(timeout, started, int(response.exit_code or 0), out, err)

    def _command(self, line: str) -> Any:
        """One command in the session; its exit code, stdout and stderr."""
        if self.session_id is None:
            raise SandboxError(f"{self._substrate.name}: the session is closed")
        try:
            return self.sdk.process.execute_session_command(
                self.session_id, SessionExecuteRequest(command=line, run_async=False)
            )
        except Exception as exc:
            raise self._fail(exc, "running a command") from None

    def close(self) -> None:
        session_id, self.session_id = self.session_id, None
        if session_id is not None:
            with contextlib.suppress(Exception):  # the sandbox is deleted right after
                self.sdk.process.delete_session(session_id)


def _seconds(timeout: float | None) -> int:
    """A file step's timeout as the SDK takes it: whole seconds, 30 minutes without one."""
    return 30 * 60 if timeout is None else max(1, int(timeout + 0.999))
