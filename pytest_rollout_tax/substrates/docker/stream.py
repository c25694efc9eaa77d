"""Docker's attached streams: the socket behind an exec the SDK started, and its frames.

Without a TTY the engine multiplexes stdout and stderr on one connection, each frame an
8-byte header (stream, three zero bytes, big-endian payload size) and its payload.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from ...core.shell import STDERR, STDOUT

_HEADER = 8


class Frames:
    """Docker's multiplexed stream, decoded as it arrives (a frame may span many reads)."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._offset = 0  # where the undecoded bytes start
        self._stream = STDOUT
        self._left = 0  # payload bytes of the current frame still to come

    def feed(self, data: bytes) -> None:
        """Add bytes as they were read from the connection."""
        if self._offset:
            del self._data[: self._offset]
            self._offset = 0
        self._data += data

    def next(self) -> tuple[int, bytes] | None:
        """The next piece of payload as ``(STDOUT or STDERR, bytes)``; None until more is fed."""
        while True:
            available = len(self._data) - self._offset
            if self._left:
                if not available:
                    return None
                size = min(available, self._left)
                piece = bytes(self._data[self._offset : self._offset + size])
                self._offset += size
                self._left -= size
                return self._stream, piece
            if available < _HEADER:
                return None
            header = self._data[self._offset : self._offset + _HEADER]
            self._stream = STDERR if header[0] == STDERR else STDOUT
            self._left = int.from_bytes(header[4:], "big")
            self._offset += _HEADER


def http_reader(sock: Any) -> tuple[Any, Any]:
    """The HTTP response behind the SDK's exec socket and its buffered reader (private
    attributes of the docker SDK and urllib3: AttributeError if a version lacks them)."""
    response = sock._response
    return response, response.raw._fp.fp


def raw_socket(sock: Any) -> Any:
    """The OS socket under the SDK's exec socket (a ``SocketIO`` on unix and plain TCP)."""
    return getattr(sock, "_sock", sock)


def close(sock: Any) -> None:
    """End the connection of an exec socket, whoever else still holds it, and release it."""
    with contextlib.suppress(OSError, AttributeError):  # not every transport's socket has it
        raw_socket(sock).shutdown(socket.SHUT_RDWR)
    response = getattr(sock, "_response", None)
    with contextlib.suppress(OSError):
        (response if response is not None else sock).close()
