"""Where a substrate's control plane was reached from this client, and whether a hosted
service's endpoint is a local stand-in."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from .known import from_known


@dataclass(frozen=True)
class ControlPlane:
    """The report's ``control_plane``: where a substrate's API was reached from this client,
    the median round trip of one cheap call to it, and whether it is a local stand-in."""

    endpoint: str
    rtt_s: float | None  #: None: the call failed
    #: The service is hosted elsewhere (E2B, AWS), yet its endpoint is on this machine.
    stand_in: bool
    #: How a hosted substrate's rollouts reach it (:attr:`Substrate.connection`); None: not
    #: stated.
    connection: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["connection"] is None:  # stated by hosted substrates only
            del data["connection"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControlPlane:
        return from_known(cls, data)


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` (a URL) names this machine: a loopback address, or a name that
    resolves only to loopback addresses."""
    host = urlsplit(endpoint).hostname
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
