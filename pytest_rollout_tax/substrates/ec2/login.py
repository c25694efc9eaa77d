"""SSH login to an instance: the keys to offer, retries while it boots, and each sandbox's
one connection, reopened when it drops."""

from __future__ import annotations

import logging
import time

import paramiko

from ...errors import ConfigError, SandboxStartError
from .errors import SSHError, describe
from .hostkeys import HostKeyPins
from .options import EC2Options
from .ssh import CONNECT_TIMEOUT, SSHConnection

log = logging.getLogger(__package__)

#: Seconds between SSH attempts after an authentication failure (at least ``poll_interval``).
#: Early failures are normal while cloud-init installs the user and key, but each one is logged
#: (and, from OpenSSH 9.8, penalized) by sshd, so they are not repeated at ``poll_interval``.
AUTH_RETRY_INTERVAL = 1.0


class Login:
    """How substrate ``name`` logs in to its instances: user, keys and pinned host keys."""

    def __init__(self, name: str, options: EC2Options) -> None:
        self.name = name
        self.options = options
        self.pins = HostKeyPins(name, options.known_hosts)
        #: Why authentication failed at a cold start: every later start fails at once with it.
        self.failure: str | None = None
        self._keys: list[paramiko.PKey] | None = None

    def load_keys(self) -> list[paramiko.PKey]:
        """The private key(s) to offer, loaded on first use: ``ssh_key``, else ssh-agent's."""
        if self._keys is None:
            self._keys = self._read_keys()
        return self._keys

    def connect(
        self, instance_id: str, host: str, port: int, deadline: float, *, retry: bool
    ) -> SSHConnection:
        """An authenticated connection; while ``retry``, keep trying until ``deadline``."""
        opts = self.options
        keys = self.load_keys()
        last = "no attempt made"
        auth_failed = False
        while True:
            attempt = max(0.5, min(CONNECT_TIMEOUT, deadline - time.perf_counter()))
            try:
                return SSHConnection.open(
                    host,
                    port,
                    user=opts.ssh_user,
                    keys=keys,
                    verify_host_key=lambda key: self.pins.verify(instance_id, host, port, key),
                    timeout=attempt,
                )
            except paramiko.AuthenticationException:
                # Normal while cloud-init has not yet installed the user and key: retried.
                auth_failed = True
            except SSHError:
                raise
            except (OSError, EOFError, paramiko.SSHException) as exc:
                auth_failed = False
                last = describe(exc)
            interval = max(opts.poll_interval, AUTH_RETRY_INTERVAL if auth_failed else 0.0)
            if not retry or time.perf_counter() + interval > deadline:
                break
            time.sleep(interval)
        name = self.name
        if auth_failed:
            source = f"key {opts.ssh_key}" if opts.ssh_key else "the keys of ssh-agent"
            message = (
                f"{name}: SSH authentication as {opts.ssh_user!r} with {source} failed on "
                f"{host}:{port} (instance {instance_id})"
                + (f" until the {opts.ready_timeout:g} s ready_timeout" if retry else "")
                + f"; check {name}.ssh_user, {name}.ssh_key and {name}.key_name"
            )
            if not retry:  # a live sandbox's reconnection: that key worked before
                raise SSHError(message)
            self.failure = message
            raise SandboxStartError(message)
        if retry:
            raise SandboxStartError(
                f"{name}: SSH on {host}:{port} (instance {instance_id}) was not ready within "
                f"{opts.ready_timeout:g} s; last error: {last}"
            )
        raise SSHError(f"{name}: cannot reconnect to SSH on {host}:{port}: {last}")

    def _read_keys(self) -> list[paramiko.PKey]:
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


class Link:
    """A sandbox's one SSH connection; reopened, with the same pinned host key, if it dropped."""

    def __init__(
        self, login: Login, instance_id: str, host: str, port: int, connection: SSHConnection
    ) -> None:
        self.login = login
        self.instance_id = instance_id
        self.host = host
        self.port = port
        self._connection: SSHConnection | None = connection
        self._closed = False

    def connection(self) -> SSHConnection:
        """The open connection; reconnects (once per call) if it dropped."""
        if self._closed:
            raise SSHError(f"{self.login.name}: sandbox on {self.instance_id} is closed")
        if self._connection is None or not self._connection.alive:
            self.drop()
            deadline = time.perf_counter() + CONNECT_TIMEOUT
            self._connection = self.login.connect(
                self.instance_id, self.host, self.port, deadline, retry=False
            )
        return self._connection

    def drop(self) -> None:
        """Close the connection; the next :meth:`connection` opens a new one."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as exc:  # the instance goes away anyway
                log.debug("ec2: closing SSH to %s: %s", self.instance_id, exc)

    def close(self) -> None:
        """Close the connection for good."""
        self._closed = True
        self.drop()
