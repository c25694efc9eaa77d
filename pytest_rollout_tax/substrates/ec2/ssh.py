"""One authenticated SSH connection (paramiko): a channel per command, files over one SFTP.

A command's line goes to the login shell, which runs it itself; on a timeout the command's
process group is killed over a second channel, so the connection stays usable.
"""

from __future__ import annotations

import logging
import select
import signal
import socket
import time
from collections.abc import Callable, Iterable

import paramiko
from paramiko.common import MSG_CHANNEL_REQUEST

from ...core.transport import OUTPUT_CAP, Output, RawResult, step_timeout
from .errors import SSHChannelError, SSHError, describe
from .sftp import SFTPFiles

log = logging.getLogger(__package__)

#: paramiko's transport log (banner errors while sshd boots, with tracebacks) goes here,
#: silenced by default; set ``propagate = True`` on it to debug the SSH layer.
SSH_LOG = "pytest_rollout_tax.substrates.ec2.ssh"
_ssh_log = logging.getLogger(SSH_LOG)
_ssh_log.addHandler(logging.NullHandler())
_ssh_log.propagate = False

#: Seconds for one TCP connect / SSH handshake attempt, and to open a channel.
CONNECT_TIMEOUT = 10.0
#: Seconds sent data may go unacknowledged before the kernel drops the connection: with the
#: keepalive, a peer that vanished silently (a terminated VM) ends every channel within
#: about a minute and a half instead of blocking a step for the kernel's ~15 minutes.
DEAD_PEER_TIMEOUT = 60.0
#: Seconds between keepalive messages on an idle connection.
KEEPALIVE_INTERVAL = 30
#: Seconds to wait for a timed-out command's channel to close after it was killed.
KILL_GRACE = 5.0
#: Exit code reported when the remote side ends a command without an exit status.
NO_STATUS = 255
_READ_SIZE = 1 << 16
#: Room for the pid line the wrapper prints before a command's own stdout.
_PID_LINE = 32


def _channel_request(channel: paramiko.Channel, message: paramiko.Message) -> None:
    """paramiko's channel-request handler, plus ``exit-signal``, which paramiko ignores.

    A command killed by a signal reports the signal's name instead of an exit status; it is
    kept on the channel (``rollout_tax_signal``) so the exit code can be 128 + its number.
    """
    start = message.packet.tell()
    if message.get_text() == "exit-signal":
        message.get_boolean()  # want_reply
        channel.rollout_tax_signal = message.get_text()
    message.packet.seek(start)
    paramiko.Channel._handle_request(channel, message)


class _Transport(paramiko.Transport):  # type: ignore[misc]  # paramiko has no type hints
    """A paramiko transport that also records ``exit-signal`` (see :func:`_channel_request`)."""

    _channel_handler_table = {  # noqa: RUF012 - paramiko's own table, extended
        **paramiko.Transport._channel_handler_table,
        MSG_CHANNEL_REQUEST: _channel_request,
    }


def exit_code(channel: paramiko.Channel) -> int | None:
    """The command's exit status, 128 + N if signal N killed it, None if neither came."""
    if channel.exit_status >= 0:
        return int(channel.exit_status)
    name = getattr(channel, "rollout_tax_signal", None)
    if name is None:
        return None
    try:
        return 128 + signal.Signals[f"SIG{name}"].value
    except KeyError:  # a signal this platform does not know
        return NO_STATUS


class SSHConnection:
    """One authenticated SSH connection: each command a channel, files over one SFTP session."""

    def __init__(self, transport: paramiko.Transport, where: str) -> None:
        self.transport = transport
        #: ``host:port``, for messages.
        self.where = where
        #: How many channels this connection has opened (commands, kills, shells, SFTP).
        self.channels_opened = 0
        self._files: SFTPFiles | None = None

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        *,
        user: str,
        keys: Iterable[paramiko.PKey],
        verify_host_key: Callable[[paramiko.PKey], None],
        timeout: float = CONNECT_TIMEOUT,
    ) -> SSHConnection:
        """Connect, check the host key, authenticate; raises what failed, unwrapped."""
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
            sock.setsockopt(
                socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(DEAD_PEER_TIMEOUT * 1e3)
            )
        transport = _Transport(sock)
        try:
            transport.set_log_channel(SSH_LOG)
            transport.banner_timeout = timeout
            transport.handshake_timeout = timeout
            transport.auth_timeout = timeout
            transport.start_client(timeout=timeout)
            verify_host_key(transport.get_remote_server_key())
            last: Exception = paramiko.AuthenticationException("no key to offer")
            for key in keys:
                try:
                    transport.auth_publickey(user, key)
                    break
                except paramiko.AuthenticationException as exc:
                    last = exc
            else:
                raise last
            transport.set_keepalive(KEEPALIVE_INTERVAL)
        except BaseException:
            transport.close()
            sock.close()
            raise
        sock.settimeout(None)
        return cls(transport, f"{host}:{port}")

    @property
    def alive(self) -> bool:
        return bool(self.transport.is_active())

    def channel(self) -> paramiko.Channel:
        """A new session channel; SSHChannelError (nothing started) if none can be opened."""
        try:
            channel = self.transport.open_session(timeout=CONNECT_TIMEOUT)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise SSHChannelError(
                f"SSH connection to {self.where} failed: {describe(exc)}"
            ) from None
        self.channels_opened += 1
        return channel

    def run(
        self, command: str, *, timeout: float | None, name: str = "ec2", cap: int = OUTPUT_CAP
    ) -> RawResult:
        """Run a shell command line in a new channel; on timeout kill its process group.

        The login shell runs the line itself. It is prefixed with ``echo $$``: sshd makes the
        login shell a session and process group leader (the command it execs keeps its pid),
        so that pid names the group a timeout kills. ``name`` prefixes error messages, which
        never include the command: it may carry secrets. Each stream keeps ``cap`` bytes.
        """
        deadline = None if timeout is None else time.perf_counter() + timeout
        channel = self.channel()
        try:
            channel.exec_command(f"echo $$; {command}; exit $?")
            channel.shutdown_write()
            stdout, stderr = Output(cap + _PID_LINE), Output(cap)
            if not _pump(channel, stdout, stderr, deadline):
                assert timeout is not None  # only a deadline ends the pump early
                self._kill(channel, stdout, stderr)
                raise step_timeout(name, timeout)
            # The exit status follows the end of output closely: allow it a moment.
            grace = None if deadline is None else max(0.5, deadline - time.perf_counter())
            if not channel.status_event.wait(grace):
                assert timeout is not None  # without a deadline the wait has no bound
                self._kill(channel, stdout, stderr)
                raise step_timeout(name, timeout)
            code = exit_code(channel)
            if code is None:
                if not self.alive:
                    raise SSHError(f"{name}: SSH connection to {self.where} lost during a command")
                code = NO_STATUS
            _, output = _split_pid(stdout.data)
            came = stdout.size - (len(stdout.data) - len(output)) + stderr.size
            return RawResult(code, bytes(output[:cap]), bytes(stderr.data), came)
        finally:
            channel.close()

    def check_call(self, command: str, *, timeout: float, name: str = "ec2") -> None:
        """Run ``command`` (one of ours); raise SSHError naming it and its stderr unless it
        exits 0."""
        result = self.run(command, timeout=timeout, name=name)
        if result.exit_code != 0:
            detail = result.stderr.decode("utf-8", "replace").strip()[:200]
            raise SSHError(
                f"{name}: {command!r} exited {result.exit_code} on {self.where}: {detail}"
            )

    def files(self, timeout: float) -> SFTPFiles:
        """The connection's SFTP session, opened on first use; each of its requests may wait
        ``timeout`` seconds for an answer, then raises TimeoutError."""
        if self._files is None:
            try:
                sftp = paramiko.SFTPClient.from_transport(self.transport)
            except paramiko.SSHException as exc:
                if not self.alive:
                    raise
                raise SSHError(f"no SFTP on {self.where}: {describe(exc)}") from None
            if sftp is None:
                raise SSHChannelError(f"SSH connection to {self.where} closed")
            self.channels_opened += 1
            self._files = SFTPFiles(sftp)
        self._files.settimeout(timeout)
        return self._files

    def drop_files(self) -> None:
        """Forget the SFTP session (after an error left it unusable); the next use opens one."""
        files, self._files = self._files, None
        if files is not None:
            try:
                files.close()
            except Exception as exc:  # already broken: that is why it is dropped
                log.debug("ec2: closing SFTP on %s: %s", self.where, exc)

    def close(self) -> None:
        try:
            self.drop_files()
        finally:
            self.transport.close()

    def _kill(self, channel: paramiko.Channel, stdout: Output, stderr: Output) -> None:
        """Kill the process group of a running command and wait briefly for its channel."""
        grace = time.perf_counter() + KILL_GRACE
        _pump(channel, stdout, stderr, grace, until=lambda: b"\n" in stdout.data)
        pid, _ = _split_pid(stdout.data)
        if pid is not None:
            try:
                killer = self.channel()
            except SSHChannelError as exc:  # the command did run: not a retryable failure
                raise SSHError(f"cannot kill a timed-out command: {exc}") from None
            try:
                killer.exec_command(
                    f"kill -KILL -- -{pid} 2>/dev/null || kill -KILL {pid} 2>/dev/null; true"
                )
                killer.shutdown_write()
                killer.status_event.wait(KILL_GRACE)
            finally:
                killer.close()
        _pump(channel, stdout, stderr, grace)


def _pump(
    channel: paramiko.Channel,
    stdout: Output,
    stderr: Output,
    deadline: float | None,
    until: Callable[[], bool] | None = None,
) -> bool:
    """Read both streams until EOF (True), ``until()`` holds (True) or the deadline (False)."""
    while True:
        while channel.recv_ready():
            stdout.add(channel.recv(_READ_SIZE))
        while channel.recv_stderr_ready():
            stderr.add(channel.recv_stderr(_READ_SIZE))
        if channel.eof_received or channel.closed:
            while channel.recv_ready():
                stdout.add(channel.recv(_READ_SIZE))
            while channel.recv_stderr_ready():
                stderr.add(channel.recv_stderr(_READ_SIZE))
            return True
        if until is not None and until():
            return True
        remaining = None if deadline is None else max(0.0, deadline - time.perf_counter())
        if remaining is not None and remaining <= 0:
            return False
        select.select([channel], [], [], remaining)


def _split_pid(stdout: bytearray) -> tuple[int | None, bytearray]:
    """The pid line the wrapper prints first, and the command's own output after it."""
    line, sep, rest = bytes(stdout).partition(b"\n")
    if sep and line.strip().isdigit():
        return int(line), bytearray(rest)
    return None, stdout
