"""The ``session`` transport: one long-lived shell per sandbox, each step framed by sentinels.

A backend only opens a :class:`Duplex` (a byte stream to ``sh`` in the sandbox with stdout and
stderr apart: a pipe, an attached exec, a websocket, an SSH channel). Every step is one line
sent to that shell: the command runs in a subshell (no ``cd``, variable or shell state leaks
into the next step), with no stdin, under the same ``timeout`` wrapper as ``exec``; then the
shell prints a random sentinel with the exit status on stdout, and one on stderr.
"""

from __future__ import annotations

import base64
import errno
import shlex
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

from ..errors import SandboxError
from . import contract
from .record import PhaseClock
from .transport import (
    RawResult,
    Transport,
    one_line,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)

STDOUT, STDERR = 1, 2
#: How long past a step's deadline (or, without one, how long in silence for a file step)
#: the client waits for the shell before it declares the session lost.
GRACE_S = 10.0
#: The shell every session runs.
SHELL = ("sh",)


class Duplex(ABC):
    """A byte stream to a shell in the sandbox: stdin in, stdout and stderr out, apart."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write ``data`` to the shell's stdin."""

    @abstractmethod
    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        """The next chunk of output as ``(STDOUT or STDERR, data)``; ``(0, b"")`` once the
        shell's output has ended; TimeoutError if nothing arrives within ``timeout``."""

    @abstractmethod
    def close(self) -> None:
        """End the shell and release the stream."""


class ShellSession(Transport):
    """The ``session`` transport over any :class:`Duplex`."""

    name = "session"

    def __init__(self, connect: Callable[[], Duplex], *, substrate: str) -> None:
        self._connect = connect
        self._substrate = substrate
        self._duplex: Duplex | None = None

    def open(self, clock: PhaseClock) -> None:
        self._duplex = self._connect()
        self._call("true", deadline=time.monotonic() + GRACE_S + 20)
        clock.mark("session")

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        script = f"({shell_line(timeout_wrapped(argv, timeout), env=env, cwd=cwd)}) </dev/null"
        deadline = None if timeout is None else time.monotonic() + timeout + GRACE_S
        started = time.perf_counter()
        code, stdout, stderr = self._call(script, deadline)
        if was_timed_out(argv, timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate, timeout)
        return RawResult(code, stdout, stderr)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        encoded = base64.b64encode(data).decode()
        script = (
            f"(set -- {shlex.quote(path)}; {contract.WHY_NOT_WRITE}; "
            f'mkdir -p -- "$(dirname -- "$1")" && printf %s {encoded} | base64 -d > "$1")'
        )
        self._file_step(script, path, timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        script = f"(set -- {shlex.quote(path)}; {contract.READ_SCRIPT})"
        return self._file_step(script, path, timeout)

    def close(self) -> None:
        if self._duplex is not None:
            duplex, self._duplex = self._duplex, None
            duplex.close()

    # -- framing -------------------------------------------------------------------------------

    def _file_step(self, script: str, path: str, timeout: float | None) -> bytes:
        """A file step through the shell; past ``timeout`` (else a minute of silence) the
        session cannot be trusted to frame the next step and is lost."""
        if timeout is None:
            code, stdout, stderr = self._call(script, deadline=None, silence=GRACE_S * 6)
        else:
            deadline = time.monotonic() + timeout
            silent = f"a file step got no answer within its {timeout:g} s timeout"
            code, stdout, stderr = self._call(script, deadline, silent=silent)
        if code != 0:
            raise contract.file_error_for(code, path) or OSError(
                errno.EIO, one_line(stderr.decode("utf-8", "replace")) or "failed", path
            )
        return stdout

    def _call(
        self,
        script: str,
        deadline: float | None,
        silence: float | None = None,
        silent: str = "no answer from the shell",
    ) -> tuple[int, bytes, bytes]:
        """Send one step and read both streams up to its sentinels: until ``deadline``, or
        without one, while the shell is never ``silence`` seconds quiet (None: forever)."""
        if self._duplex is None:
            raise SandboxError(f"{self._substrate}: the session is closed")
        marker = uuid.uuid4().hex.encode()
        self._duplex.send(
            script.encode() + b"\nprintf '\\n%s %d\\n' " + marker + b" $?; "
            b"printf '\\n%s\\n' " + marker + b" >&2\n"
        )
        out_end, err_end = b"\n" + marker + b" ", b"\n" + marker + b"\n"
        stdout, stderr = bytearray(), bytearray()
        code: int | None = None
        stderr_done = False
        while code is None or not stderr_done:
            wait = silence if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                stream, chunk = self._duplex.receive(wait)
            except TimeoutError:
                raise self._lost(silent) from None
            if not chunk:
                raise self._lost("the shell ended")
            # What follows a sentinel is a background process's late output: dropped.
            if stream == STDOUT and code is None:
                start = max(len(stdout) - 64, 0)
                stdout += chunk
                at = stdout.find(out_end, start)
                end = stdout.find(b"\n", at + len(out_end)) if at >= 0 else -1
                if end >= 0:
                    code = int(stdout[at + len(out_end) : end])
                    del stdout[at:]
            elif stream == STDERR and not stderr_done:
                start = max(len(stderr) - 64, 0)
                stderr += chunk
                if (at := stderr.find(err_end, start)) >= 0:
                    stderr_done = True
                    del stderr[at:]
        return code, bytes(stdout), bytes(stderr)

    def _lost(self, why: str) -> SandboxError:
        """The session is unusable: close it; every later step fails at once, in one line."""
        self.close()
        return SandboxError(f"{self._substrate}: session lost: {why}")
