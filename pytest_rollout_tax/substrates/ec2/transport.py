"""``exec``: each step one SSH channel on the sandbox's open connection, files over SFTP.

The login shell runs each command line itself and replaces itself with the command (``exec``),
so a no-op costs one process spawn, as on the other substrates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

import paramiko

from ...core.transport import RawResult, Transport, shell_line
from ...errors import StepTimeout
from .errors import SSHChannelError, SSHError, describe
from .login import Link
from .ssh import SSHConnection

#: Seconds one SFTP request may go unanswered when the sandbox has no step timeout; then the
#: connection is dropped (the next step reconnects) instead of a file step hanging forever.
SFTP_TIMEOUT = 300.0

T = TypeVar("T")


class _Dropped(Exception):
    """The connection dropped during a file step, which may be retried."""


class EC2Exec(Transport):
    """One channel per command on the sandbox's :class:`Link`; one SFTP session for files."""

    name = "exec"

    def __init__(self, link: Link, *, substrate: str) -> None:
        self._link = link
        self._substrate = substrate

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # sshd hands the line to the login shell, which runs it and becomes the command.
        command = shell_line(argv, env=env, cwd=cwd)
        name, cap = self._substrate, self.output_cap

        def run(connection: SSHConnection) -> RawResult:
            return connection.run(command, timeout=timeout, name=name, cap=cap)

        return self._over_ssh(run, file=False)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        def put(connection: SSHConnection) -> None:
            connection.files(timeout or SFTP_TIMEOUT).put(path, data)

        self._over_ssh(put, file=True, timeout=timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        def get(connection: SSHConnection) -> bytes:
            return connection.files(timeout or SFTP_TIMEOUT).get(path)

        return self._over_ssh(get, file=True, timeout=timeout)

    def _over_ssh(
        self,
        operation: Callable[[SSHConnection], T],
        *,
        file: bool,
        timeout: float | None = None,
    ) -> T:
        """``operation(connection)``; after a dropped connection, reconnect and retry once
        if nothing ran yet (no channel opened) or it is a file step (safe to repeat).

        Every SSH failure becomes one line: :class:`SSHError`, or :class:`StepTimeout` for
        an SFTP request unanswered within the step timeout. File errors the SFTP server
        reports (an ``OSError`` with an errno) pass through as they are.
        """
        try:
            return self._attempt(
                self._link.connection(), operation, file=file, retry=True, timeout=timeout
            )
        except (SSHChannelError, _Dropped):
            self._link.drop()
        return self._attempt(
            self._link.connection(), operation, file=file, retry=False, timeout=timeout
        )

    def _attempt(
        self,
        connection: SSHConnection,
        operation: Callable[[SSHConnection], T],
        *,
        file: bool,
        retry: bool,
        timeout: float | None,
    ) -> T:
        """One try of :meth:`_over_ssh`; raises _Dropped if ``retry`` and it may be retried."""
        name, instance = self._substrate, self._link.instance_id
        failure: BaseException
        try:
            return operation(connection)
        except StepTimeout:  # a step past its timeout (a TimeoutError too): the sandbox is fine
            raise
        except TimeoutError:  # only SFTP requests have a channel timeout
            self._link.drop()  # the connection may be dead; its SFTP session is unusable
            if timeout:
                raise StepTimeout(
                    f"{name}: file step got no SFTP answer within its {timeout:g} s "
                    "timeout; connection dropped"
                ) from None
            raise SSHError(
                f"{name}: SFTP on {instance} got no answer within {SFTP_TIMEOUT:g} s; "
                "connection dropped"
            ) from None
        except OSError as exc:
            if exc.errno is not None:  # an error status of the SFTP server: a file error
                raise
            failure = exc
        except (paramiko.SSHException, paramiko.SFTPError, EOFError) as exc:
            failure = exc
        if connection.alive:  # the connection is fine; that request failed
            if file:
                connection.drop_files()
            raise SSHError(
                f"{name}: SSH {'file step' if file else 'command'} on {instance} "
                f"failed: {describe(failure)}"
            ) from None
        if retry and file:
            raise _Dropped
        self._link.drop()
        raise SSHError(f"{name}: SSH connection to {instance} lost: {describe(failure)}") from None
