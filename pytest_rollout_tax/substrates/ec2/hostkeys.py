"""Host keys pinned per instance (accept-new): the first key an instance shows is kept, and
any other key it shows later is refused. Optionally recorded in a known_hosts file."""

from __future__ import annotations

import threading
from pathlib import Path

import paramiko

from .errors import SSHError


class HostKeyPins:
    """The host key pinned for each instance id of one substrate."""

    def __init__(self, name: str, known_hosts: str | None) -> None:
        self.name = name
        self.known_hosts = known_hosts
        #: Host keys accepted on first contact, per instance id.
        self.keys: dict[str, paramiko.PKey] = {}
        self._lock = threading.Lock()

    def verify(self, instance_id: str, host: str, port: int, key: paramiko.PKey) -> None:
        """Pin ``key`` if ``instance_id`` has none yet; SSHError if it has another."""
        with self._lock:
            pinned = self.keys.get(instance_id) or self._known(instance_id, key)
            if pinned is None:
                self.keys[instance_id] = key
                self._remember(instance_id, key)
                return
        if pinned.get_name() != key.get_name() or pinned.asbytes() != key.asbytes():
            raise SSHError(
                f"{self.name}: the SSH host key of instance {instance_id} at {host}:{port} "
                f"changed (pinned {pinned.get_name()} {pinned.fingerprint}, now offered "
                f"{key.get_name()} {key.fingerprint}); refusing to connect"
            )
        self.keys[instance_id] = pinned

    def _known(self, instance_id: str, offered: paramiko.PKey) -> paramiko.PKey | None:
        """The key recorded for ``instance_id`` in the known_hosts file, if any."""
        path = self.known_hosts
        if not path or not Path(path).is_file():
            return None
        entries = paramiko.HostKeys(path).lookup(instance_id) or {}
        if not entries:
            return None
        return entries.get(offered.get_name()) or next(iter(entries.values()))

    def _remember(self, instance_id: str, key: paramiko.PKey) -> None:
        if not self.known_hosts:
            return
        Path(self.known_hosts).parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a", encoding="ascii") as handle:
            handle.write(f"{instance_id} {key.get_name()} {key.get_base64()}\n")
