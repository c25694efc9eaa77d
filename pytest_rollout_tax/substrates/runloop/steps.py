"""The two data planes of a devbox: one Runloop execution per step (``exec``), or a shell held
in one execution with its stdin attached (``session``); files through the SDK on both."""

from __future__ import annotations

import contextlib
import errno
import queue
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ...core.shell import STDERR, STDOUT, Duplex, ShellTransport
from ...core.transport import (
    Output,
    RawResult,
    Transport,
    one_line,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ...errors import RolloutTaxError, SandboxError
from ..hosted import HostedHandle
from .sdk import BadRequestError, NotFoundError, PollingConfig, PollingTimeout, httpx

#: How long past a step's timeout the client waits for its execution to report its end.
GRACE_S = 10.0
#: The long poll's hold between checks of a step's end (Runloop holds at most 25 s).
POLL_S = 25.0


class Owner(Protocol):
    """What a transport needs of its substrate: a name, its errors, redaction."""

    name: str

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError: ...

    def redact(self, value: object) -> str: ...


class _Files:
    """Files through the SDK: ``upload_file`` (multipart) and ``download_file``, byte for byte."""

    def __init__(self, handle: HostedHandle, substrate: Owner) -> None:
        self.client = handle.client
        self.devbox_id = handle.id
        self._substrate = substrate

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        try:
            self.client.devboxes.upload_file(self.devbox_id, path=path, file=data, timeout=timeout)
        except Exception as exc:
            raise self._file_failure(exc, path, "writing a file", timeout) from None

    def read(self, path: str, *, timeout: float | None) -> bytes:
        try:
            answer = self.client.devboxes.download_file(self.devbox_id, path=path, timeout=timeout)
            return bytes(answer.read())
        except Exception as exc:
            raise self._file_failure(exc, path, "reading a file", timeout) from None

    def _file_failure(
        self, exc: Exception, path: str, action: str, timeout: float | None
    ) -> Exception:
        """Runloop's answer about ``path`` as an OSError (the Sandbox asks the devbox why); a
        request past the step's timeout as StepTimeout; anything else as the substrate's."""
        if timeout and isinstance(exc, httpx.TimeoutException | PollingTimeout):
            return step_timeout(self._substrate.name, timeout, "it may still be running")
        if isinstance(exc, NotFoundError | BadRequestError):
            return OSError(errno.EIO, one_line(self._substrate.redact(exc)), path)
        return self._substrate.error(exc, action, self.devbox_id)


class RunloopExec(_Files, Transport):
    """One execution per step: ``execute`` (which answers at once for a short command), then
    the long poll ``wait_for_command`` while it runs; output past the answer's last lines is
    streamed whole (``stream_stdout_updates``)."""

    name = "exec"

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        step = timeout_wrapped(["sh", "-c", shell_line(argv, env=env, cwd=cwd)], timeout)
        # exec: the login shell becomes the step, so it adds no job message of its own
        command = f"exec {shlex.join(step)} </dev/null"
        wait = None if timeout is None else timeout + GRACE_S
        polling = PollingConfig(interval_seconds=POLL_S, max_attempts=1 << 20, timeout_seconds=wait)
        started = time.perf_counter()
        try:
            done = self.client.devboxes.execute_and_await_completion(
                self.devbox_id, command=command, polling_config=polling
            )
            stdout = self._output(done, STDOUT)
            stderr = self._output(done, STDERR)
        except PollingTimeout:
            fate = "it may still be running"
            raise step_timeout(self._substrate.name, timeout or 0, fate) from None
        except Exception as exc:
            raise self._substrate.error(exc, "running a command", self.devbox_id) from None
        code = int(done.exit_status if done.exit_status is not None else -1)
        if was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        return RawResult.of(code, stdout, stderr)

    def _output(self, done: Any, fd: int) -> Output:
        """One stream of a finished execution: the answer's, or, where Runloop cut it to its
        last lines, the whole stream, kept up to the cap."""
        output = Output(self.output_cap)
        name = "stdout" if fd == STDOUT else "stderr"
        if not getattr(done, f"{name}_truncated"):
            output.add((getattr(done, name) or "").encode())
            return output
        executions = self.client.devboxes.executions
        stream = getattr(executions, f"stream_{name}_updates")
        for chunk in stream(done.execution_id, devbox_id=self.devbox_id):
            output.add(chunk.output.encode())
        return output


class _AttachedShell(Duplex):
    """``sh`` in one execution with its stdin attached (``execute_async(attach_stdin=True)``):
    stdin through ``send_std_in``, stdout and stderr as two server-sent event streams, each
    read by a thread of its own onto one queue."""

    def __init__(self, client: Any, devbox_id: str) -> None:
        self.client, self.devbox_id = client, devbox_id
        devboxes = client.devboxes
        self.execution_id = devboxes.execute_async(devbox_id, command="exec sh", attach_stdin=True)
        self.execution_id = self.execution_id.execution_id
        self._chunks: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._ended = 0
        self._streams: list[Any] = []
        unlimited = httpx.Timeout(None, connect=10.0)  # a session may be silent for long
        for fd, open_stream in (
            (STDOUT, devboxes.executions.stream_stdout_updates),
            (STDERR, devboxes.executions.stream_stderr_updates),
        ):
            stream = open_stream(self.execution_id, devbox_id=devbox_id, timeout=unlimited)
            self._streams.append(stream)
            pump = threading.Thread(
                target=self._pump, args=(fd, stream), name=f"runloop-{fd}", daemon=True
            )
            pump.start()

    def _pump(self, fd: int, chunks: Iterable[Any]) -> None:
        with contextlib.suppress(Exception):  # a stream that fails has ended
            for chunk in chunks:
                self._chunks.put((fd, chunk.output.encode()))
        self._chunks.put((fd, b""))

    def send(self, data: bytes) -> None:
        executions = self.client.devboxes.executions
        executions.send_std_in(
            self.execution_id, devbox_id=self.devbox_id, text=data.decode("utf-8", "replace")
        )

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        while True:
            try:
                fd, data = self._chunks.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError from None
            if data:
                return fd, data
            self._ended += 1
            if self._ended == 2:
                return 0, b""

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the devbox is shut down right after
            self.client.devboxes.executions.send_std_in(
                self.execution_id, devbox_id=self.devbox_id, signal="EOF"
            )
        for stream in self._streams:
            with contextlib.suppress(Exception):
                stream.close()


class RunloopSession(ShellTransport):
    """The ``session`` transport over :class:`_AttachedShell`; files go through the SDK's file
    calls (byte for byte), as on ``exec``: the shell's output arrives as text."""

    def __init__(self, handle: HostedHandle, substrate: Owner) -> None:
        self._files = _Files(handle, substrate)

        def connect() -> Duplex:
            try:
                return _AttachedShell(handle.client, handle.id)
            except Exception as exc:
                raise substrate.error(exc, "opening a session", handle.id) from None

        super().__init__(connect, substrate=substrate.name)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self._open()
        self._files.write(path, data, timeout=timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        self._open()
        return self._files.read(path, timeout=timeout)

    def _open(self) -> None:
        """A lost session fails every later step, file steps too, as on every substrate."""
        if self._duplex is None:
            raise SandboxError(f"{self._substrate}: the session is closed")


#: How each transport is made from a devbox and its substrate.
TRANSPORTS: dict[str, Callable[[HostedHandle, Owner], Transport]] = {
    "exec": RunloopExec,
    "session": RunloopSession,
}
