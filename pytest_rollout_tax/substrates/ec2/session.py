"""``session``: one SSH channel running ``sh`` for the sandbox's life, stdin held open.

The shell's stdout and stderr arrive apart on the channel (data and extended data); the
framing of each step is :class:`~pytest_rollout_tax.shell.ShellSession`'s.
"""

from __future__ import annotations

import select
import shlex
import time

import paramiko

from ...shell import SHELL, STDERR, STDOUT, Duplex
from .errors import SSHChannelError, SSHError, describe
from .ssh import SSHConnection

#: Seconds a send may wait for the channel's window (the shell not reading its stdin) before
#: the channel is closed as lost.
SEND_TIMEOUT = 60.0
_READ_SIZE = 1 << 16


class SSHShell(Duplex):
    """``sh`` on a channel of ``connection``, exec'd by the login shell."""

    def __init__(self, connection: SSHConnection, *, substrate: str) -> None:
        try:
            self._channel = connection.channel()
        except SSHChannelError as exc:
            raise SSHError(f"{substrate}: no shell: {exc}") from None
        try:
            self._channel.settimeout(SEND_TIMEOUT)
            self._channel.exec_command(f"exec {shlex.join(SHELL)}")
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self._channel.close()
            raise SSHError(
                f"{substrate}: no shell on {connection.where}: {describe(exc)}"
            ) from None

    def send(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except (paramiko.SSHException, EOFError, OSError):
            self._channel.close()  # the shell is gone or stuck: receive() reports its end

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        channel = self._channel
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if channel.recv_ready():
                return STDOUT, channel.recv(_READ_SIZE)
            if channel.recv_stderr_ready():
                return STDERR, channel.recv_stderr(_READ_SIZE)
            if channel.eof_received or channel.closed:
                return 0, b""
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            select.select([channel], [], [], remaining)

    def close(self) -> None:
        self._channel.close()
