"""``session``: one SSH channel running ``sh`` for the sandbox's life, stdin held open.

The shell's stdout and stderr arrive apart on the channel (data and extended data); the
framing of each step is :class:`~pytest_rollout_tax.shell.ShellTransport`'s.
"""

from __future__ import annotations

import select
import shlex
import time

import paramiko

from ...core.shell import SHELL, STDERR, STDOUT, Duplex
from ...errors import RolloutTaxError
from .errors import SSHChannelError, SSHError, describe
from .ssh import SSHConnection

#: Seconds a send may wait for the channel's window (the shell not reading its stdin) before
#: the channel is closed as lost.
SEND_TIMEOUT = 60.0
#: After this long in silence, whether the shell still runs is asked over a second channel:
#: sshd ends the channel (and reports the exit) only once every process holding the shell's
#: output, a background child of a dead shell too, has let go of it.
LIVENESS_S = 5.0
_READ_SIZE = 1 << 16


class SSHShell(Duplex):
    """``sh`` on a channel of ``connection``, exec'd by the login shell (which first prints its
    pid: the shell's, since exec keeps it)."""

    def __init__(self, connection: SSHConnection, *, substrate: str) -> None:
        self._connection = connection
        try:
            self._channel = connection.channel()
        except SSHChannelError as exc:
            raise SSHError(f"{substrate}: no shell: {exc}") from None
        try:
            self._channel.settimeout(SEND_TIMEOUT)
            self._channel.exec_command(f"echo $$; exec {shlex.join(SHELL)}")
            self.pid, self._early = self._read_pid()
        except (paramiko.SSHException, EOFError, OSError, ValueError) as exc:
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
        if self._early:
            early, self._early = self._early, b""
            return STDOUT, early
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
            wait = LIVENESS_S if remaining is None else min(remaining, LIVENESS_S)
            readable, _, _ = select.select([channel], [], [], wait)
            if not readable and wait == LIVENESS_S and not self._running():
                return 0, b""

    def close(self) -> None:
        self._channel.close()

    def _read_pid(self) -> tuple[int, bytes]:
        """The pid line the login shell prints first, and any output already after it."""
        received = b""
        while b"\n" not in received:
            chunk = self._channel.recv(_READ_SIZE)  # within SEND_TIMEOUT, else socket.timeout
            if not chunk:
                raise EOFError("the shell ended before it started")
            received += chunk
        line, _, rest = received.partition(b"\n")
        return int(line), rest

    def _running(self) -> bool:
        """Whether the shell still runs (yes if a second channel cannot tell: the first will)."""
        try:
            check = self._connection.run(f"kill -0 {self.pid}", timeout=LIVENESS_S)
        except (RolloutTaxError, paramiko.SSHException, EOFError, OSError):
            return True
        return check.exit_code == 0
