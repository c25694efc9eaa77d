"""The ``session`` transport: one long-lived shell per sandbox, each step framed by sentinels.

A backend only opens a :class:`Duplex` (a byte stream to ``sh`` in the sandbox with stdout and
stderr apart: a pipe, an attached exec, a websocket, an SSH channel). When the session opens,
the step helper (:mod:`.stepper`) is placed in the sandbox and the shell execs it as the
session's server (``rtx-step --serve``): every step is then one request to it, the same for
every command (the no-op probe's too), and costs one fork and one exec. The helper enters the
step's cwd, adds its variables and runs it with no stdin in a process group of its own (no
``cd``, variable or shell state leaks into the next step; ``kill 0`` ends only the step),
relays its output until its command has exited and every process holding its output has
closed it, at the deadline kills the whole group, and then writes a random sentinel with the
exit status on stdout and one on stderr. File steps are scripts it hands to ``sh``. Where the
helper cannot run, the shell stays the server: each step is one line, :data:`RELAY` under the
``timeout`` wrapper (``0``: no limit), the same contract at a few more processes per step,
the shell's own job messages (``Killed``) sent nowhere, and the shell prints the sentinels.
"""

from __future__ import annotations

import base64
import errno
import functools
import shlex
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping

from ..errors import SandboxError
from . import contract, stepper
from .record import PhaseClock
from .transport import (
    Output,
    RawResult,
    Transport,
    one_line,
    shell_line,
    step_timeout,
    timeout_limit,
    was_timed_out,
    with_env,
)

STDOUT, STDERR = 1, 2
#: How long past a step's deadline (or, without one, how long in silence for a file step)
#: the client waits for the shell before it declares the session lost.
GRACE_S = 10.0
#: The shell every session runs.
SHELL = ("sh",)
#: The session's first step: the sandbox's machine, whose step helper it gets.
MACHINE = "uname -m"
#: The session's first line: the shell keeps its stderr on fd 9 for the steps and sends its
#: own to /dev/null, where the job messages a shell prints for a killed child (``Killed``,
#: ``Segmentation fault``) go.
SETUP = b"exec 9>&2 2>/dev/null\n"
#: Runs ``"$@"`` (the step under ``timeout -s KILL``, whose process group holds the step alone,
#: so ``kill 0`` in the step never reaches the relay) with its stdout and stderr relayed by one
#: ``cat`` each, and exits with its status once both streams closed (the status comes back on
#: fd 5, a command substitution). A shell that waits for a command killed by a signal prints
#: ``Killed`` on its stderr, and dash waits with the command's redirections applied: so the
#: command's stderr (fd 7, the pipe to the second ``cat``) is set by ``exec`` in a subshell,
#: and every shell's is /dev/null. The fallback of a sandbox the helper cannot run in.
RELAY = (
    "exec 3>&1 4>&2 2>/dev/null; "
    'c=$(exec 5>&1; (exec 7>&1; ((exec "$@" 2>&7 3>&- 4>&- 5>&- 7>&-); echo $? >&5) '
    "| cat >&3) | cat >&4); "
    'exit "$c"'
)


def step_line(
    argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
) -> str:
    """The shell line of one session step without the helper, whatever its command."""
    wrapped = ["timeout", "-s", "KILL", timeout_limit(timeout), *with_env(argv, env)]
    return subshell(shell_line(["sh", "-c", RELAY, "sh", *wrapped], env=None, cwd=cwd))


def step_request(
    argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
) -> bytes:
    """The request of one session step to the helper's server, whatever its command (its
    marker goes in front: see ``core/stepper.c``). Names, values and arguments hold no NUL."""
    variables = [f"{name}={value}" for name, value in (env or {}).items()]
    head = f"R {timeout_limit(timeout)} {len(variables)} {len(argv)}\n".encode()
    return head + b"".join(field.encode() + b"\0" for field in [cwd, *variables, *argv])


def script_request(script: str) -> bytes:
    """The request of a file step to the helper's server: ``script``, run by ``sh``."""
    body = script.encode()
    return f"S {len(body)}\n".encode() + body


def subshell(body: str) -> str:
    """``body`` in a subshell with no stdin and the session's stderr (fd 9: see :data:`SETUP`)."""
    return f"(exec 2>&9 9>&- </dev/null; {body})"


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


class ShellTransport(Transport):
    """The ``session`` transport over any :class:`Duplex`."""

    name = "session"

    def __init__(
        self, connect: Callable[[], Duplex], *, substrate: str, on_host: bool = False
    ) -> None:
        self._connect = connect
        self._substrate = substrate
        #: Whether the shell runs on this host (the helper is run where it was built).
        self._on_host = on_host
        self._duplex: Duplex | None = None
        #: Where the step helper serves the session in the sandbox (None: the shell does, and
        #: its relay runs every step).
        self.helper: str | None = None

    def open(self, clock: PhaseClock) -> None:
        self._duplex = self._connect()
        self._duplex.send(SETUP)
        # the shell's first answer says the sandbox's machine, whose helper it gets
        code, machine, _ = self._call(MACHINE, deadline=time.monotonic() + GRACE_S + 20)
        said = bytes(machine.data).decode(errors="replace").strip() if code == 0 else ""
        chosen = stepper.for_machine(said)
        self.helper, why = self._place_helper(chosen, said)
        self.step_path, self.relay_reason = "relay" if why else chosen.origin, why
        if self.helper is not None:
            self._serve(self.helper)
        clock.mark("session")

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        deadline = None if timeout is None else time.monotonic() + timeout + GRACE_S
        started = time.perf_counter()
        if self.helper is not None:
            request = step_request(argv, timeout=timeout, env=env, cwd=cwd)
            code, stdout, stderr = self._request(request, deadline, cap=self.output_cap)
        else:
            script = step_line(argv, timeout=timeout, env=env, cwd=cwd)
            code, stdout, stderr = self._call(script, deadline, cap=self.output_cap)
        if timeout is not None and was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate, timeout)
        return RawResult.of(code, stdout, stderr)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        encoded = base64.b64encode(data).decode()
        script = (
            f"set -- {shlex.quote(path)}; {contract.WHY_NOT_WRITE}; "
            f'mkdir -p -- "$(dirname -- "$1")" && printf %s {encoded} | base64 -d > "$1"'
        )
        self._file_step(script, path, timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        script = f"set -- {shlex.quote(path)}; {contract.READ_SCRIPT}"
        return self._file_step(script, path, timeout)

    def close(self) -> None:
        if self._duplex is not None:
            duplex, self._duplex = self._duplex, None
            duplex.close()

    def _place_helper(self, chosen: stepper.Helper, machine: str) -> tuple[str | None, str | None]:
        """The helper's path in the sandbox once it runs there (on this host, where it lies;
        elsewhere, written through the shell to a new directory of /tmp: a docker
        ``put_archive`` upload was slower, ``benchmarks/session_open.py``), or why the relay
        serves instead."""
        if chosen.path is None:
            return None, chosen.why
        cannot_run = f"the {chosen.origin} helper for {machine} did not run (rtx-step --check)"
        path = str(chosen.path)
        if not self._on_host:
            where = f"/tmp/.{stepper.NAME}-{uuid.uuid4().hex[:12]}"  # its own name, for comm
            path = f"{where}/{stepper.NAME}"
            encoded = base64.b64encode(chosen.path.read_bytes()).decode()
            script = f"mkdir -p {where} && printf %s {encoded} | base64 -d > {path}"
            script += f" && chmod 755 {path}"
            if self._call(subshell(script), deadline=None, silence=GRACE_S * 6)[0] != 0:
                return None, "the helper could not be written to the sandbox's /tmp"
            cannot_run += ": a /tmp mounted noexec?"
        return (path, None) if self._checked(path) else (None, cannot_run)

    def _checked(self, path: str) -> bool:
        """Whether the helper at ``path`` runs in the sandbox (``--check``)."""
        check = subshell(f"exec {shlex.quote(path)} --check")
        code, stdout, _ = self._call(check, deadline=None, silence=GRACE_S * 6)
        return code == 0 and bytes(stdout.data) == stepper.CHECK_OUTPUT

    # -- framing -------------------------------------------------------------------------------

    def _serve(self, helper: str) -> None:
        """The shell execs the helper as the session's server, which frames its first marker."""
        marker = uuid.uuid4().hex.encode()
        line = f"exec {shlex.quote(helper)} --serve {marker.decode()} 2>&9 9>&-\n".encode()
        self._exchange(line, marker, deadline=None, silence=GRACE_S * 6)

    def _file_step(self, script: str, path: str, timeout: float | None) -> bytes:
        """A file step (a script for ``sh``); past ``timeout`` (else a minute of silence) the
        session cannot be trusted to frame the next step and is lost."""
        if self.helper is not None:
            send = functools.partial(self._request, script_request(script))
        else:
            send = functools.partial(self._call, subshell(script))
        if timeout is None:
            code, stdout, stderr = send(deadline=None, silence=GRACE_S * 6)
        else:
            deadline = time.monotonic() + timeout
            silent = f"a file step got no answer within its {timeout:g} s timeout"
            code, stdout, stderr = send(deadline, silent=silent)
        if code != 0:
            raise contract.file_error_for(code, path) or OSError(
                errno.EIO, one_line(stderr.data.decode("utf-8", "replace")) or "failed", path
            )
        return bytes(stdout.data)

    def _call(
        self,
        script: str,
        deadline: float | None,
        silence: float | None = None,
        silent: str = "no answer from the shell",
        cap: int | None = None,
    ) -> tuple[int, Output, Output]:
        """Send one shell line, then the shell's sentinels; see :meth:`_exchange`."""
        marker = uuid.uuid4().hex.encode()
        line = (
            script.encode() + b"\nprintf '\\n%s %d\\n' " + marker + b" $?; "
            b"printf '\\n%s\\n' " + marker + b" >&9\n"
        )
        return self._exchange(line, marker, deadline, silence, silent, cap)

    def _request(
        self,
        request: bytes,
        deadline: float | None,
        silence: float | None = None,
        silent: str = "no answer from the helper",
        cap: int | None = None,
    ) -> tuple[int, Output, Output]:
        """Send one request to the helper's server, which frames it; see :meth:`_exchange`."""
        marker = uuid.uuid4().hex.encode()
        return self._exchange(marker + b" " + request, marker, deadline, silence, silent, cap)

    def _exchange(
        self,
        data: bytes,
        marker: bytes,
        deadline: float | None,
        silence: float | None = None,
        silent: str = "no answer from the shell",
        cap: int | None = None,
    ) -> tuple[int, Output, Output]:
        """Send ``data`` and read both streams up to ``marker``'s sentinels, each kept up to
        ``cap`` bytes (None: whole): until ``deadline``, or without one, while the session is
        never ``silence`` seconds quiet (None: forever)."""
        if self._duplex is None:
            raise SandboxError(f"{self._substrate}: the session is closed")
        self._duplex.send(data)
        streams = {STDOUT: _Framed(marker, cap), STDERR: _Framed(marker, cap)}
        while not all(stream.ended for stream in streams.values()):
            wait = silence if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                stream, chunk = self._duplex.receive(wait)
            except TimeoutError:
                raise self._lost(silent) from None
            if not chunk:
                raise self._lost("the shell ended")
            streams[stream].feed(chunk)
        trailer = streams[STDOUT].trailer
        assert trailer is not None  # every stream ended, so each read its trailer
        return int(trailer), streams[STDOUT].output, streams[STDERR].output

    def _lost(self, why: str) -> SandboxError:
        """The session is unusable: close it; every later step fails at once, in one line."""
        self.close()
        return SandboxError(f"{self._substrate}: session lost: {why}")


class _Framed:
    """One stream of a session step, up to its sentinel line (``\\n<marker>`` and the rest of
    the line: `` <status>`` on stdout); what follows it, a background process's late
    output, is dropped. Only the bytes that could begin the sentinel are held back."""

    def __init__(self, marker: bytes, cap: int | None) -> None:
        self._end = b"\n" + marker
        self.output = Output(sys.maxsize if cap is None else cap)
        self._pending = bytearray()
        #: The rest of the sentinel's line, once it came (None: not yet).
        self.trailer: bytes | None = None

    @property
    def ended(self) -> bool:
        return self.trailer is not None

    def feed(self, chunk: bytes) -> None:
        if self.ended:
            return
        self._pending += chunk
        at = self._pending.find(self._end)
        if at < 0:
            keep = len(self._end) - 1
            if len(self._pending) > keep:
                self.output.add(self._pending[:-keep])
                del self._pending[:-keep]
            return
        self.output.add(self._pending[:at])
        del self._pending[:at]
        line = self._pending.find(b"\n", len(self._end))
        if line >= 0:
            self.trailer = bytes(self._pending[len(self._end) : line])
            self._pending.clear()
