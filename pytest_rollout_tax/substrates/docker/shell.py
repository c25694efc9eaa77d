"""The ``session`` transport of docker: one ``sh`` per container, attached for its whole life.

The shell is one exec created with stdin open and started with ``socket=True``: the engine
then relays the connection both ways, stdin in and stdout and stderr out in docker's frames.
"""

from __future__ import annotations

import time

from ...core.shell import SHELL, Duplex
from . import stream
from .engine import ENGINE_ERRORS, engine_errors
from .handle import DockerHandle

#: How long the client waits to hand the shell a step before it declares the session lost.
SEND_TIMEOUT_S = 60.0
#: How often a long silence is checked against the engine: is the shell still running?
LIVENESS_S = 5.0
_READ_SIZE = 1 << 18


class DockerShell(Duplex):
    """One ``sh`` in the container, talked to over the engine's attached exec connection."""

    def __init__(self, handle: DockerHandle) -> None:
        self._handle = handle
        with engine_errors(handle.substrate, f"opening a shell in container {handle.id[:12]}"):
            #: The engine's id of the shell's exec.
            self.exec_id: str = handle.api.exec_create(
                handle.id, list(SHELL), stdin=True, workdir=handle.workdir
            )["Id"]
            # The shell says nothing until it is sent a line: nothing is read ahead here.
            self._sock = handle.api.exec_start(self.exec_id, socket=True)
        handle.session_exec = self.exec_id  # what a reset spares (reset.py)
        self._socket = stream.raw_socket(self._sock)
        self._frames = stream.Frames()
        self._ended = False

    def send(self, data: bytes) -> None:
        try:
            self._socket.settimeout(SEND_TIMEOUT_S)
            self._socket.sendall(data)
        except OSError:  # the shell or the engine is gone (or stuck): receive() reports the end
            self._ended = True

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (piece := self._frames.next()) is None:
            data = b"" if self._ended else self._read(deadline)
            if not data:
                self._ended = True
                return 0, b""
            self._frames.feed(data)
        return piece

    def close(self) -> None:
        # The engine closes the shell's stdin and the shell exits; the container goes next.
        self._ended = True
        stream.close(self._sock)

    def _read(self, deadline: float | None) -> bytes:
        """The next bytes from the connection (b"" at its end); TimeoutError past ``deadline``.

        A silence of :data:`LIVENESS_S` asks the engine whether the shell still runs, so a
        dead shell whose output the engine keeps open ends the stream instead of a hang.
        """
        while True:
            wait = LIVENESS_S if deadline is None else min(deadline - time.monotonic(), LIVENESS_S)
            if wait <= 0:
                raise TimeoutError
            self._socket.settimeout(wait)
            try:
                data: bytes = self._socket.recv(_READ_SIZE)
                return data
            except TimeoutError:
                if not self._running():
                    return b""
            except OSError:  # reset: the engine or the container is gone
                return b""

    def _running(self) -> bool:
        """Whether the engine says the shell runs (yes if it cannot tell: the socket will)."""
        try:
            return bool(self._handle.api.exec_inspect(self.exec_id).get("Running"))
        except ENGINE_ERRORS:
            return True
