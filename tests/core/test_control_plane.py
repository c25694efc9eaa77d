"""Whether a control plane's endpoint is this machine (a hosted service's local stand-in)."""

import socket

import pytest

from pytest_rollout_tax.core.control_plane import is_loopback


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://127.5.0.1", True),
        ("http://[::1]:9000/api", True),
        ("http://localhost:3000", True),
        ("https://api.e2b.app", False),
        ("https://10.0.0.5:6443", False),
        ("unix:///var/run/docker.sock", False),
        ("not a url", False),
    ],
)
def test_a_loopback_endpoint_is_this_machine(endpoint, loopback, monkeypatch):
    def resolve(host, *args, **kwargs):  # no network: only localhost resolves
        if host == "localhost":
            return [(socket.AF_INET, 0, 0, "", ("127.0.0.1", 0))]
        raise OSError("no network here")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    assert is_loopback(endpoint) is loopback
