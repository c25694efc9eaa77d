"""Fixtures of the exporters' tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def unused_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
