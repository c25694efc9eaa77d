"""``ec2``: one fresh cloud VM per sandbox, commands over one multiplexed SSH connection.

Control plane: boto3 with the standard credential chain and region resolution. Cold start
runs from ``run_instances`` to the first no-op command over SSH, in the phases
``requested`` (the API call), ``running`` (``describe_instances`` polled at a short interval:
boto3's waiters poll every 15 s and would measure themselves), ``ssh_ready`` (TCP, SSH
handshake, host key, authentication, work directory) and ``first_exec``.

Data plane: paramiko. One SSH transport per sandbox carries every command as a channel and
every file over one SFTP session, so a step costs a channel round trip, not a new connection.
Host keys are accepted on first contact and pinned per instance; a changed key is refused.
The login shell runs each command line itself and replaces itself with the command (``exec``),
so a no-op costs one process spawn, as on the other substrates.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import posixpath
import select
import shlex
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from ..record import PhaseClock, Rollout
from ..sandbox import ROLLOUT_LABEL, SESSION_LABEL, RawResult, Sandbox, Substrate, shell_command

try:
    import boto3
    import botocore.exceptions as aws_errors
    import botocore.loaders
    import botocore.session
    import paramiko
    from botocore.config import Config as BotoConfig
    from paramiko.common import MSG_CHANNEL_REQUEST
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SubstrateUnavailable(
        f"substrate 'ec2' needs boto3 and paramiko ({exc.name} is not installed): "
        "pip install 'pytest-rollout-tax[aws]'"
    ) from None

log = logging.getLogger(__name__)

#: paramiko's transport log (banner errors while sshd boots, with tracebacks) goes here,
#: silenced by default; set ``propagate = True`` on it to debug the SSH layer.
SSH_LOG = "pytest_rollout_tax.substrates.ec2.ssh"
_ssh_log = logging.getLogger(SSH_LOG)
_ssh_log.addHandler(logging.NullHandler())
_ssh_log.propagate = False

#: Instance states from which an instance never becomes usable.
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")
#: States that ``reap`` terminates.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
#: Seconds for one TCP connect / SSH handshake attempt (bounded by ``ready_timeout`` too).
CONNECT_TIMEOUT = 10.0
#: Seconds between SSH attempts after an authentication failure (at least ``poll_interval``).
#: Early failures are normal while cloud-init installs the user and key, but each one is logged
#: (and, from OpenSSH 9.8, penalized) by sshd, so they are not repeated at ``poll_interval``.
AUTH_RETRY_INTERVAL = 1.0
#: Seconds to wait for a timed-out command's channel to close after it was killed.
KILL_GRACE = 5.0
#: Seconds one SFTP request may go unanswered when the sandbox has no step timeout; then the
#: connection is dropped (the next step reconnects) instead of a file step hanging forever.
SFTP_TIMEOUT = 300.0
#: Seconds to wait for the API to report a terminated instance as shutting down.
TERMINATE_TIMEOUT = 60.0
#: Exit code reported when the remote side ends a command without an exit status.
NO_STATUS = 255
_READ_SIZE = 1 << 16

_CAPACITY_CODES = {
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "Unsupported",
}
_BAD_CREDENTIAL_CODES = {
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "RequestExpired",
    "ExpiredToken",
    "ExpiredTokenException",
    "OptInRequired",
}
_UNREACHABLE = (
    aws_errors.EndpointConnectionError,
    aws_errors.ConnectTimeoutError,
    aws_errors.ReadTimeoutError,
    aws_errors.ConnectionClosedError,
)


class SSHError(SandboxError):
    """The SSH connection to a live instance failed, was lost, or presented a changed key."""


class SSHChannelError(SSHError):
    """No channel could be opened: the connection is gone and nothing was started."""


@dataclass
class EC2Options:
    #: AMI id to launch (required to create sandboxes; not needed for ``--rollout-reap``).
    ami: str | None = None
    instance_type: str = "t3.micro"
    subnet_id: str | None = None
    security_group_ids: list[str] = field(default_factory=list)
    #: EC2 key pair whose public key the AMI installs for ``ssh_user``.
    key_name: str | None = None
    #: Instance profile name, or its ARN.
    iam_instance_profile: str | None = None
    user_data: str | None = field(default=None, repr=False)
    #: Extra tags for instances and volumes (the ownership tags always win).
    tags: dict[str, str] = field(default_factory=dict)
    ssh_user: str = "ec2-user"
    #: Private key file matching ``key_name``; unset: the keys ssh-agent offers.
    ssh_key: str | None = None
    #: ``public_ip``, ``private_ip``, or a fixed ``host:port`` (bastion tunnel, tests).
    connect: str = "public_ip"
    #: Seconds from ``run_instances`` until SSH must answer; else the instance is terminated.
    ready_timeout: float = 600.0
    endpoint_url: str | None = None
    #: Absolute working directory of each sandbox; ``{instance_id}`` is replaced.
    workdir: str = "/tmp/rollout-tax/{instance_id}"
    #: Region and profile; unset: the standard resolution (AWS_REGION, AWS_PROFILE, config).
    region: str | None = None
    profile: str | None = None
    #: Seconds between ``describe_instances`` polls and between SSH connection attempts.
    poll_interval: float = 0.25
    #: Optional known_hosts file: accepted keys are appended under the instance id.
    known_hosts: str | None = None
    #: Dollars per instance-hour, to put a cost next to the projected worker-hours.
    price_per_hour: float | None = None

    def check(self) -> None:
        endpoint(self.connect)
        if self.ready_timeout <= 0:
            raise ValueError(f"ready_timeout={self.ready_timeout}: must be > 0")
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval={self.poll_interval}: must be > 0")
        if not self.workdir.startswith("/"):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")
        if self.price_per_hour is not None and self.price_per_hour < 0:
            raise ValueError(f"price_per_hour={self.price_per_hour}: must be >= 0")


def endpoint(connect: str) -> tuple[str, int] | None:
    """``(host, port)`` of a fixed ``connect`` value, None for ``public_ip``/``private_ip``."""
    if connect in ("public_ip", "private_ip"):
        return None
    host, sep, port = connect.rpartition(":")
    if not sep or (":" in host and not host.startswith("[")) or connect.endswith("]"):
        host, port = connect, "22"  # no port: a name, an IPv4 address or a bare IPv6 address
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"connect={connect!r}: expected public_ip, private_ip or HOST:PORT")
    return host, int(port)


# -- SSH ----------------------------------------------------------------------------------------


def _channel_request(channel: paramiko.Channel, message: paramiko.Message) -> None:
    """paramiko's channel-request handler, plus ``exit-signal``, which paramiko ignores.

    A command killed by a signal reports the signal's name instead of an exit status; it is
    kept on the channel (``rollout_tax_signal``) so the exit code can be 128 + its number.
    """
    start = message.packet.tell()
    if message.get_text() == "exit-signal":
        message.get_boolean()  # want_reply
        channel.rollout_tax_signal = message.get_text()  # type: ignore[attr-defined]
    message.packet.seek(start)
    paramiko.Channel._handle_request(channel, message)


class _Transport(paramiko.Transport):
    """A paramiko transport that also records ``exit-signal`` (see :func:`_channel_request`)."""

    _channel_handler_table = {  # noqa: RUF012 - paramiko's own table, extended
        **paramiko.Transport._channel_handler_table,
        MSG_CHANNEL_REQUEST: _channel_request,
    }


def _exit_code(channel: paramiko.Channel) -> int | None:
    """The command's exit status, 128 + N if signal N killed it, None if neither came."""
    if channel.exit_status >= 0:
        return channel.exit_status
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
        self.where = where
        self._sftp: paramiko.SFTPClient | None = None

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
            transport.set_keepalive(30)
        except BaseException:
            transport.close()
            sock.close()
            raise
        sock.settimeout(None)
        return cls(transport, f"{host}:{port}")

    @property
    def alive(self) -> bool:
        return self.transport.is_active()

    def run(self, command: str, *, timeout: float | None, name: str = "ec2") -> RawResult:
        """Run a shell command line in a new channel; on timeout kill its process group.

        The login shell runs the line itself. It is prefixed with ``echo $$``: sshd makes the
        login shell a session and process group leader (the command it execs keeps
        its pid), so that pid names the group a timeout kills. ``name`` prefixes error messages,
        which never include the command: it may carry secrets.
        """
        deadline = None if timeout is None else time.perf_counter() + timeout
        channel = self._channel()
        try:
            channel.exec_command(f"echo $$; {command}; exit $?")
            channel.shutdown_write()
            stdout, stderr = bytearray(), bytearray()
            finished = self._pump(channel, stdout, stderr, deadline)
            if not finished:
                self._kill(channel, stdout, stderr)
                raise StepTimeout(f"{name}: step ran past its {timeout:g} s timeout; killed")
            # The exit status follows the end of output closely: allow it a moment.
            grace = None if deadline is None else max(0.5, deadline - time.perf_counter())
            if not channel.status_event.wait(grace):
                self._kill(channel, stdout, stderr)
                raise StepTimeout(f"{name}: step ran past its {timeout:g} s timeout; killed")
            code = _exit_code(channel)
            if code is None:
                if not self.alive:
                    raise SSHError(f"{name}: SSH connection to {self.where} lost during a command")
                code = NO_STATUS
            _, output = _split_pid(stdout)
            return RawResult(code, bytes(output), bytes(stderr))
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

    def sftp(self, timeout: float) -> paramiko.SFTPClient:
        """The connection's SFTP session, opened on first use; each of its requests may wait
        ``timeout`` seconds for an answer, then raises TimeoutError."""
        if self._sftp is None:
            try:
                self._sftp = paramiko.SFTPClient.from_transport(self.transport)
            except paramiko.SSHException as exc:
                if not self.alive:
                    raise
                raise SSHError(f"no SFTP on {self.where}: {_describe(exc)}") from None
            if self._sftp is None:
                raise SSHChannelError(f"SSH connection to {self.where} closed")
        self._sftp.get_channel().settimeout(timeout)
        return self._sftp

    def drop_sftp(self) -> None:
        """Forget the SFTP session (after an error left it unusable); the next use opens one."""
        sftp, self._sftp = self._sftp, None
        if sftp is not None:
            try:
                sftp.close()
            except Exception as exc:  # already broken: that is why it is dropped
                log.debug("ec2: closing SFTP on %s: %s", self.where, exc)

    def close(self) -> None:
        try:
            if self._sftp is not None:
                self._sftp.close()
        finally:
            self._sftp = None
            self.transport.close()

    # -- helpers -------------------------------------------------------------------------------

    def _channel(self) -> paramiko.Channel:
        try:
            return self.transport.open_session(timeout=CONNECT_TIMEOUT)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise SSHChannelError(
                f"SSH connection to {self.where} failed: {_describe(exc)}"
            ) from None

    def _pump(
        self,
        channel: paramiko.Channel,
        stdout: bytearray,
        stderr: bytearray,
        deadline: float | None,
        until: Callable[[], bool] | None = None,
    ) -> bool:
        """Read both streams until EOF (True), ``until()`` holds (True) or the deadline (False)."""
        while True:
            while channel.recv_ready():
                stdout += channel.recv(_READ_SIZE)
            while channel.recv_stderr_ready():
                stderr += channel.recv_stderr(_READ_SIZE)
            if channel.eof_received or channel.closed:
                while channel.recv_ready():
                    stdout += channel.recv(_READ_SIZE)
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(_READ_SIZE)
                return True
            if until is not None and until():
                return True
            remaining = _remaining(deadline)
            if remaining is not None and remaining <= 0:
                return False
            select.select([channel], [], [], remaining)

    def _kill(self, channel: paramiko.Channel, stdout: bytearray, stderr: bytearray) -> None:
        """Kill the process group of a running command and wait briefly for its channel."""
        grace = time.perf_counter() + KILL_GRACE
        self._pump(channel, stdout, stderr, grace, until=lambda: b"\n" in stdout)
        pid, _ = _split_pid(stdout)
        if pid is not None:
            try:
                killer = self._channel()
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
        self._pump(channel, stdout, stderr, grace)


class _Dropped(Exception):
    """Internal: the connection dropped during a file step, which may be retried."""


def _split_pid(stdout: bytearray) -> tuple[int | None, bytearray]:
    """The pid line the wrapper prints first, and the command's own output after it."""
    line, sep, rest = bytes(stdout).partition(b"\n")
    if sep and line.strip().isdigit():
        return int(line), bytearray(rest)
    return None, stdout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- the sandbox -------------------------------------------------------------------------------


class EC2Sandbox(Sandbox):
    """One EC2 instance; commands as SSH channels, files over SFTP, teardown terminates it."""

    def __init__(
        self,
        *,
        substrate: EC2Substrate,
        instance_id: str,
        host: str,
        port: int,
        connection: SSHConnection,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.substrate = substrate
        self.instance_id = instance_id
        self.host = host
        self.port = port
        self._connection: SSHConnection | None = connection
        self._dirs: set[str] = set()

    def _run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # The ``cd DIR && exec ARGV`` line of shell_command, without its ``sh -c``: sshd hands
        # it to the login shell, which runs it and becomes the command (one process spawn).
        command = shell_command(argv, env=env, cwd=cwd)[-1]
        name = self.substrate.name
        return self._over_ssh(lambda c: c.run(command, timeout=timeout, name=name), file=False)

    def _write(self, path: str, data: bytes) -> None:
        self._over_ssh(lambda c: self._put(c.sftp(self._sftp_timeout), path, data), file=True)

    def _read(self, path: str) -> bytes:
        return self._over_ssh(lambda c: self._get(c.sftp(self._sftp_timeout), path), file=True)

    @property
    def _sftp_timeout(self) -> float:
        """How long one SFTP request may go unanswered: the step timeout, if one is set."""
        return self.timeout if self.timeout else SFTP_TIMEOUT

    def _destroy(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception as exc:  # the instance goes away anyway
                log.debug("ec2: closing SSH to %s: %s", self.instance_id, exc)
            self._connection = None
        try:
            self.substrate._terminate(self.instance_id)
        except RolloutTaxError as exc:
            name = self.substrate.name
            raise type(exc)(
                f"{exc}; instance {self.instance_id} may still be running: "
                f"pytest --rollout-reap --substrate={name} removes it"
            ) from None

    def _over_ssh(self, operation: Callable[[SSHConnection], Any], *, file: bool) -> Any:
        """``operation(connection)``; after a dropped connection, reconnect and retry once
        if nothing ran yet (no channel opened) or it is a file step (safe to repeat).

        Every SSH failure becomes one line: :class:`SSHError`, or :class:`StepTimeout` for
        an SFTP request unanswered within the step timeout. File errors the SFTP server
        reports (an ``OSError`` with an errno) pass through as they are.
        """
        connection = self.connection()
        try:
            return self._attempt(connection, operation, file=file, retry=True)
        except (SSHChannelError, _Dropped):
            connection.close()
        return self._attempt(self.connection(), operation, file=file, retry=False)

    def _attempt(
        self,
        connection: SSHConnection,
        operation: Callable[[SSHConnection], Any],
        *,
        file: bool,
        retry: bool,
    ) -> Any:
        """One try of :meth:`_over_ssh`; raises _Dropped if ``retry`` and it may be retried."""
        name = self.substrate.name
        failure: BaseException
        try:
            return operation(connection)
        except TimeoutError:  # only SFTP requests have a channel timeout
            connection.close()  # the connection may be dead; its SFTP session is unusable
            if self.timeout:
                raise StepTimeout(
                    f"{name}: file step got no SFTP answer within its {self.timeout:g} s "
                    "timeout; connection dropped"
                ) from None
            raise SSHError(
                f"{name}: SFTP on {self.instance_id} got no answer within {SFTP_TIMEOUT:g} s; "
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
                connection.drop_sftp()
            raise SSHError(
                f"{name}: SSH {'file step' if file else 'command'} on {self.instance_id} "
                f"failed: {_describe(failure)}"
            ) from None
        if retry and file:
            raise _Dropped
        connection.close()
        raise SSHError(
            f"{name}: SSH connection to {self.instance_id} lost: {_describe(failure)}"
        ) from None

    def connection(self) -> SSHConnection:
        """The sandbox's SSH connection; reconnects once (same pinned host key) if it dropped."""
        if self._closed:
            raise SSHError(f"{self.substrate.name}: sandbox on {self.instance_id} is closed")
        if self._connection is None or not self._connection.alive:
            if self._connection is not None:
                self._connection.close()
            self._connection = None
            self._dirs.clear()
            deadline = time.perf_counter() + CONNECT_TIMEOUT
            self._connection = self.substrate._connect(
                self.instance_id, self.host, self.port, deadline, retry=False
            )
        return self._connection

    def _makedirs(self, sftp: paramiko.SFTPClient, path: str) -> None:
        """``mkdir -p`` over SFTP, remembering which directories exist."""
        if path in self._dirs or path in ("", "/"):
            return
        try:
            found = sftp.stat(path)
        except FileNotFoundError:
            self._makedirs(sftp, posixpath.dirname(path))
            try:
                sftp.mkdir(path)
            except OSError:
                sftp.stat(path)  # made concurrently: fine; else raise the real error
        else:
            if not stat.S_ISDIR(found.st_mode or 0):
                raise OSError(errno.ENOTDIR, "Not a directory", path)
        self._dirs.add(path)

    def _put(self, sftp: paramiko.SFTPClient, path: str, data: bytes) -> None:
        parent = posixpath.dirname(path)
        with _sftp_status(path):
            if parent not in self._dirs:
                self._makedirs(sftp, parent)
            try:
                self._write_file(sftp, path, data)
            except FileNotFoundError:  # a directory we made was removed since
                self._dirs.clear()
                self._makedirs(sftp, parent)
                self._write_file(sftp, path, data)

    @staticmethod
    def _write_file(sftp: paramiko.SFTPClient, path: str, data: bytes) -> None:
        with sftp.open(path, "wb") as handle:
            handle.set_pipelined(True)
            handle.write(data)

    @staticmethod
    def _get(sftp: paramiko.SFTPClient, path: str) -> bytes:
        with _sftp_status(path), sftp.open(path, "rb") as handle:
            handle.prefetch()
            return handle.read()


@contextlib.contextmanager
def _sftp_status(path: str) -> Iterator[None]:
    """An SFTP error status as a plain OSError about ``path``: SFTP's few codes (a missing
    parent and a file in the way are both "no such file") leave the sandbox to name the cause."""
    try:
        yield
    except TimeoutError:
        raise
    except OSError as exc:
        raise OSError(errno.EIO, f"SFTP: {exc.strerror or exc or 'failed'}", path) from None


# -- the substrate -----------------------------------------------------------------------------


class EC2Substrate(Substrate):
    """Cloud VMs on EC2 (or an EC2-compatible endpoint) through boto3; SSH through paramiko."""

    kind = "ec2"
    Options = EC2Options

    def __init__(self, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        opts: EC2Options = self.options
        self.price_per_hour = opts.price_per_hour
        self.fixed_endpoint = endpoint(opts.connect)
        try:
            self.session = boto3.Session(
                botocore_session=_botocore_session(),
                profile_name=opts.profile,
                region_name=opts.region,
            )
        except aws_errors.ProfileNotFound:
            raise ConfigError(f"{self.name}.profile={opts.profile}: no such AWS profile") from None
        try:
            # Assume-role, SSO and process credentials are fetched here, on first use. A
            # failure is reported below in one line; botocore's warning would add a traceback.
            with _quiet_in_this_thread("botocore.credentials"):
                credentials = self.session.get_credentials()
                frozen = None if credentials is None else credentials.get_frozen_credentials()
        except (aws_errors.ClientError, aws_errors.BotoCoreError) as exc:
            raise SubstrateUnavailable(
                f"{self.name}: cannot load the configured AWS credentials: "
                f"{_credentials_failure(exc)}"
            ) from None
        if frozen is None:
            raise CredentialsMissing(
                f"{self.name}: no AWS credentials found (environment, shared credentials or "
                "config file, SSO, container or instance role); configure them to run on ec2"
            )
        self._secrets = [s for s in (frozen.secret_key, frozen.token, frozen.access_key) if s]
        self.region = self.session.region_name
        if not self.region:
            raise ConfigError(
                f"{self.name}: no AWS region configured; set AWS_REGION (or AWS_DEFAULT_REGION), "
                f"a region in the profile, or --substrate-opt {self.name}.region=REGION"
            )
        config = BotoConfig(connect_timeout=10, read_timeout=60, retries={"mode": "standard"})
        try:
            self.client = self.session.client("ec2", endpoint_url=opts.endpoint_url, config=config)
        except ValueError as exc:
            raise ConfigError(f"{self.name}.endpoint_url: {exc}") from None
        self.api = _redact_url(self.client.meta.endpoint_url)
        #: Host keys accepted on first contact, per instance id (accept-new, then pinned).
        self.host_keys: dict[str, paramiko.PKey] = {}
        self._lock = threading.Lock()
        self._keys: list[paramiko.PKey] | None = None
        self._auth_failure: str | None = None
        if opts.ami:
            self._keys = self._load_keys()
            self._preflight()

    # -- cold start ----------------------------------------------------------------------------

    def _create(self, *, rollout: Rollout, labels: dict[str, str], clock: PhaseClock) -> Sandbox:
        opts: EC2Options = self.options
        if not opts.ami:
            raise ConfigError(f"{self.name}.ami is not set: --substrate-opt {self.name}.ami=AMI_ID")
        if self._keys is None:
            self._keys = self._load_keys()
        if self._auth_failure:
            raise SandboxStartError(f"{self._auth_failure} (earlier in this session; not retried)")
        response = self._call("RunInstances", self.client.run_instances, **self._launch(labels))
        instance_id = response["Instances"][0]["InstanceId"]
        clock.mark("requested")
        deadline = clock.started + opts.ready_timeout
        try:
            instance = self._wait_running(instance_id, deadline)
            clock.mark("running")
            host, port = self._address(instance)
            connection = self._connect(instance_id, host, port, deadline, retry=True)
            try:
                workdir = opts.workdir.replace("{instance_id}", instance_id)
                connection.check_call(
                    f"mkdir -p -- {shlex.quote(workdir)}", timeout=60, name=self.name
                )
            except BaseException:
                connection.close()
                raise
            clock.mark("ssh_ready")
        except BaseException as exc:
            note = self._terminate_after_failure(instance_id)
            if isinstance(exc, RolloutTaxError):
                raise type(exc)(f"{exc}; {note}") from None
            if isinstance(exc, Exception):
                raise SandboxStartError(f"{self.name}: {_describe(exc)}; {note}") from None
            raise
        return EC2Sandbox(
            substrate=self,
            instance_id=instance_id,
            host=host,
            port=port,
            connection=connection,
            workdir=workdir,
            rollout=rollout,
        )

    def _launch(self, labels: dict[str, str]) -> dict[str, Any]:
        """The ``run_instances`` parameters: options plus the ownership tags."""
        opts: EC2Options = self.options
        tags = {"Name": f"rollout-tax-{labels.get(ROLLOUT_LABEL, self.session_id)}"}
        tags |= dict(opts.tags) | labels
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        params: dict[str, Any] = {
            "ImageId": opts.ami,
            "InstanceType": opts.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume")
            ],
        }
        if opts.subnet_id:
            params["SubnetId"] = opts.subnet_id
        if opts.security_group_ids:
            params["SecurityGroupIds"] = list(opts.security_group_ids)
        if opts.key_name:
            params["KeyName"] = opts.key_name
        if opts.iam_instance_profile:
            profile = opts.iam_instance_profile
            params["IamInstanceProfile"] = (
                {"Arn": profile} if profile.startswith("arn:") else {"Name": profile}
            )
        if opts.user_data:
            params["UserData"] = opts.user_data
        return params

    def _wait_running(self, instance_id: str, deadline: float) -> dict:
        """Poll ``describe_instances`` until the instance runs (with the address we need)."""
        opts: EC2Options = self.options
        state = "pending"
        while True:
            try:
                response = self.client.describe_instances(InstanceIds=[instance_id])
            except aws_errors.ClientError as exc:
                if _code(exc) != "InvalidInstanceID.NotFound":  # eventual consistency
                    raise self._api_error(exc, "DescribeInstances") from None
            except (*_UNREACHABLE, aws_errors.BotoCoreError) as exc:
                raise self._api_error(exc, "DescribeInstances") from None
            else:
                instances = [i for r in response["Reservations"] for i in r["Instances"]]
                if instances:
                    instance = instances[0]
                    state = instance["State"]["Name"]
                    if state == "running" and (
                        self.fixed_endpoint or instance.get(_ADDRESS_KEYS[opts.connect])
                    ):
                        return instance
                    if state in GONE_STATES:
                        reason = instance.get("StateReason", {}).get("Message", "no reason given")
                        raise SandboxStartError(
                            f"{self.name}: instance {instance_id} went {state} while starting: "
                            f"{self._redact(reason)}"
                        )
            if time.perf_counter() + opts.poll_interval > deadline:
                what = "running" if state != "running" else f"running with a {opts.connect}"
                raise SandboxStartError(
                    f"{self.name}: instance {instance_id} was not {what} within "
                    f"{opts.ready_timeout:g} s (state {state})"
                )
            time.sleep(opts.poll_interval)

    def _address(self, instance: dict) -> tuple[str, int]:
        if self.fixed_endpoint:
            return self.fixed_endpoint
        return instance[_ADDRESS_KEYS[self.options.connect]], 22

    def _connect(
        self, instance_id: str, host: str, port: int, deadline: float, *, retry: bool
    ) -> SSHConnection:
        """An authenticated connection; while ``retry``, keep trying until ``deadline``."""
        opts: EC2Options = self.options
        assert self._keys is not None
        last = "no attempt made"
        auth_failed = False
        while True:
            attempt = max(0.5, min(CONNECT_TIMEOUT, deadline - time.perf_counter()))
            try:
                return SSHConnection.open(
                    host,
                    port,
                    user=opts.ssh_user,
                    keys=self._keys,
                    verify_host_key=lambda key: self._verify_host_key(instance_id, host, port, key),
                    timeout=attempt,
                )
            except paramiko.AuthenticationException:
                # Normal while cloud-init has not yet installed the user and key: retried.
                auth_failed = True
            except SSHError:
                raise
            except (OSError, EOFError, paramiko.SSHException) as exc:
                auth_failed = False
                last = _describe(exc)
            interval = max(opts.poll_interval, AUTH_RETRY_INTERVAL if auth_failed else 0.0)
            if not retry or time.perf_counter() + interval > deadline:
                break
            time.sleep(interval)
        if auth_failed:
            message = (
                f"{self.name}: SSH authentication as {opts.ssh_user!r} with "
                f"{self._key_source()} failed on {host}:{port} (instance {instance_id})"
                + (f" until the {opts.ready_timeout:g} s ready_timeout" if retry else "")
                + f"; check {self.name}.ssh_user, {self.name}.ssh_key and {self.name}.key_name"
            )
            if not retry:  # a live sandbox's reconnection: that key worked before
                raise SSHError(message)
            self._auth_failure = message  # every later rollout of the session fails at once
            raise SandboxStartError(message)
        if retry:
            raise SandboxStartError(
                f"{self.name}: SSH on {host}:{port} (instance {instance_id}) was not ready within "
                f"{opts.ready_timeout:g} s; last error: {last}"
            )
        raise SSHError(f"{self.name}: cannot reconnect to SSH on {host}:{port}: {last}")

    def _verify_host_key(self, instance_id: str, host: str, port: int, key: paramiko.PKey) -> None:
        """Accept-new: pin the first key an instance shows; refuse any other key later."""
        with self._lock:
            pinned = self.host_keys.get(instance_id) or self._known_key(instance_id, key)
            if pinned is None:
                self.host_keys[instance_id] = key
                self._remember_key(instance_id, key)
                return
        if pinned.get_name() != key.get_name() or pinned.asbytes() != key.asbytes():
            raise SSHError(
                f"{self.name}: the SSH host key of instance {instance_id} at {host}:{port} "
                f"changed (pinned {pinned.get_name()} {pinned.fingerprint}, now offered "
                f"{key.get_name()} {key.fingerprint}); refusing to connect"
            )
        self.host_keys[instance_id] = pinned

    def _known_key(self, instance_id: str, offered: paramiko.PKey) -> paramiko.PKey | None:
        """The key recorded for ``instance_id`` in the known_hosts file, if any."""
        path = self.options.known_hosts
        if not path or not Path(path).is_file():
            return None
        entries = paramiko.HostKeys(path).lookup(instance_id) or {}
        if not entries:
            return None
        return entries.get(offered.get_name()) or next(iter(entries.values()))

    def _remember_key(self, instance_id: str, key: paramiko.PKey) -> None:
        path = self.options.known_hosts
        if not path:
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="ascii") as handle:
            handle.write(f"{instance_id} {key.get_name()} {key.get_base64()}\n")

    # -- teardown and reaping ------------------------------------------------------------------

    def _terminate(self, instance_id: str) -> None:
        """Terminate ``instance_id`` and return once the API reports it shutting down."""
        response = self._call(
            "TerminateInstances", self.client.terminate_instances, InstanceIds=[instance_id]
        )
        states = [i["CurrentState"]["Name"] for i in response.get("TerminatingInstances", [])]
        deadline = time.perf_counter() + TERMINATE_TIMEOUT
        while not states or states[0] not in ("shutting-down", "terminated"):
            if time.perf_counter() > deadline:
                raise SandboxError(
                    f"{self.name}: instance {instance_id} still {states} {TERMINATE_TIMEOUT:g} s "
                    "after terminate_instances"
                )
            time.sleep(self.options.poll_interval)
            described = self._call(
                "DescribeInstances", self.client.describe_instances, InstanceIds=[instance_id]
            )
            states = [i["State"]["Name"] for r in described["Reservations"] for i in r["Instances"]]

    def _terminate_after_failure(self, instance_id: str) -> str:
        """Terminate an instance whose start failed; a note for the error message."""
        try:
            self._terminate(instance_id)
        except Exception as exc:
            return (
                f"could not terminate instance {instance_id} ({exc}); "
                f"pytest --rollout-reap --substrate={self.name} removes it"
            )
        return f"instance {instance_id} terminated"

    def reap(self, session_id: str | None = None) -> int:
        """Terminate live instances tagged with ``session_id`` (any rollout-tax session if None)."""
        if session_id is None:
            owner = {"Name": "tag-key", "Values": [SESSION_LABEL]}
        else:
            owner = {"Name": f"tag:{SESSION_LABEL}", "Values": [session_id]}
        filters = [owner, {"Name": "instance-state-name", "Values": list(LIVE_STATES)}]
        ids: list[str] = []
        try:
            for page in self.client.get_paginator("describe_instances").paginate(Filters=filters):
                ids += [i["InstanceId"] for r in page["Reservations"] for i in r["Instances"]]
        except (aws_errors.ClientError, aws_errors.BotoCoreError) as exc:
            raise self._api_error(exc, "DescribeInstances") from None
        for start in range(0, len(ids), 1000):
            self._call(
                "TerminateInstances",
                self.client.terminate_instances,
                InstanceIds=ids[start : start + 1000],
            )
        return len(ids)

    def close(self) -> None:
        self.client.close()

    # -- configuration checks ------------------------------------------------------------------

    def _preflight(self) -> None:
        """Check reachability, permissions and launch parameters once, launching nothing."""
        for action, call, params in (
            ("DescribeInstances", self.client.describe_instances, {"MaxResults": 5}),
            ("RunInstances", self.client.run_instances, self._launch({SESSION_LABEL: "dryrun"})),
        ):
            try:
                call(DryRun=True, **params)
            except aws_errors.ClientError as exc:
                if _code(exc) != "DryRunOperation":
                    raise self._api_error(exc, action) from None
            except (aws_errors.BotoCoreError, *_UNREACHABLE) as exc:
                raise self._api_error(exc, action) from None

    def _load_keys(self) -> list[paramiko.PKey]:
        """The private key(s) to authenticate with: ``ssh_key``, else ssh-agent's."""
        path = self.options.ssh_key
        option = f"{self.name}.ssh_key"
        if path is None:
            try:
                keys = list(paramiko.Agent().get_keys())
            except Exception:  # no agent, or one that does not answer
                keys = []
            if not keys:
                raise ConfigError(
                    f"{option} is not set and no ssh-agent offers a key: set {option}=PATH to "
                    f"the private key of the EC2 key pair {self.options.key_name or '(key_name)'}"
                )
            return keys
        try:
            return [paramiko.PKey.from_path(path)]
        except FileNotFoundError:
            raise ConfigError(f"{option}={path}: no such file") from None
        except paramiko.PasswordRequiredException:
            raise ConfigError(
                f"{option}={path}: the key is encrypted; add it to ssh-agent and leave "
                f"{option} unset"
            ) from None
        except Exception as exc:
            raise ConfigError(
                f"{option}={path}: not a private key paramiko can use ({type(exc).__name__})"
            ) from None

    def _key_source(self) -> str:
        path = self.options.ssh_key
        return f"key {path}" if path else "the keys of ssh-agent"

    # -- AWS errors ----------------------------------------------------------------------------

    def _call(self, action: str, method: Callable[..., dict], **params: Any) -> dict:
        """``method(**params)``, with every AWS failure turned into one clear error."""
        try:
            return method(**params)
        except (aws_errors.ClientError, aws_errors.BotoCoreError, *_UNREACHABLE) as exc:
            raise self._api_error(exc, action) from None

    def _api_error(self, exc: BaseException, action: str) -> RolloutTaxError:
        """A one-line error for an AWS failure of ``action``, naming what to fix."""
        opts: EC2Options = self.options
        name = self.name
        if isinstance(exc, _UNREACHABLE):
            return SubstrateUnavailable(
                f"{name}: cannot reach the EC2 API at {self.api} ({type(exc).__name__} on "
                f"{action}); check the network or {name}.endpoint_url"
            )
        if isinstance(exc, aws_errors.NoCredentialsError | aws_errors.PartialCredentialsError):
            return CredentialsMissing(f"{name}: AWS credentials are missing or incomplete")
        if isinstance(exc, aws_errors.ParamValidationError):
            return ConfigError(f"{name}: invalid {action} parameters: {self._redact(str(exc))}")
        if not isinstance(exc, aws_errors.ClientError):
            return SubstrateUnavailable(f"{name}: {action} failed: {self._redact(_describe(exc))}")
        code = _code(exc)
        message = self._redact(_first_line(exc.response.get("Error", {}).get("Message", "")))
        where = f"in {self.region} at {self.api}"
        if code == "UnauthorizedOperation" or code.startswith("AccessDenied"):
            return SubstrateUnavailable(
                f"{name}: not authorized to perform ec2:{action} ({code}); grant it to the "
                "caller's IAM policy (README, 'ec2: IAM permissions')"
            )
        if code in _BAD_CREDENTIAL_CODES:
            return SubstrateUnavailable(f"{name}: AWS rejected the credentials ({code}) {where}")
        if code.startswith("InvalidAMIID"):
            return ConfigError(f"{name}.ami={opts.ami}: AMI not found {where} ({code})")
        if code.startswith("InvalidInstanceType") or (
            code == "InvalidParameterValue" and "instancetype" in message.lower()
        ):
            return ConfigError(
                f"{name}.instance_type={opts.instance_type}: not available {where} ({code})"
            )
        if code.startswith("InvalidKeyPair"):
            return ConfigError(f"{name}.key_name={opts.key_name}: key pair not found {where}")
        if code.startswith("InvalidSubnet"):
            return ConfigError(f"{name}.subnet_id={opts.subnet_id}: {code}: {message}")
        if code.startswith("InvalidGroup") or code.startswith("InvalidSecurityGroup"):
            return ConfigError(f"{name}.security_group_ids: {code}: {message}")
        if code in _CAPACITY_CODES:
            return SandboxStartError(
                f"{name}: insufficient capacity for {opts.instance_type} {where} ({code}): "
                f"{message}"
            )
        return SandboxStartError(f"{name}: {action} failed ({code}): {message}")

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


_ADDRESS_KEYS = {"public_ip": "PublicIpAddress", "private_ip": "PrivateIpAddress"}
_loader: botocore.loaders.Loader | None = None


def _botocore_session() -> botocore.session.Session:
    """A new botocore session sharing one data loader, so the EC2 service model (megabytes
    of JSON) is parsed once per process, not once per substrate."""
    global _loader
    if _loader is None:
        _loader = botocore.loaders.create_loader()
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader)
    return session


def _code(exc: aws_errors.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


@contextlib.contextmanager
def _quiet_in_this_thread(logger_name: str) -> Iterator[None]:
    """Drop what ``logger_name`` logs from this thread while the block runs."""
    thread = threading.get_ident()
    logger = logging.getLogger(logger_name)

    def other_threads(record: logging.LogRecord) -> bool:
        return record.thread != thread

    logger.addFilter(other_threads)
    try:
        yield
    finally:
        logger.removeFilter(other_threads)


def _credentials_failure(exc: BaseException) -> str:
    """Why the credentials could not be loaded, in one line that carries no secret."""
    if isinstance(exc, aws_errors.ClientError):  # e.g. AssumeRole refused: the code says why
        return f"{exc.operation_name} failed ({_code(exc)})"
    if isinstance(exc, aws_errors.CredentialRetrievalError):  # its text may be a process's
        return f"{type(exc).__name__} from {exc.kwargs.get('provider', 'a provider')}"
    return _describe(exc)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no message"
    return line if len(line) <= 300 else line[:297] + "..."


def _redact_url(url: str) -> str:
    """``url`` without any user:password part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
