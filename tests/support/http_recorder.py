"""An HTTP server on loopback that records every request and answers with a set status (test
infrastructure): what a Pushgateway behind basic auth was sent, headers included."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def basic_auth(self) -> str | None:
        """The ``user:password`` of its basic-auth header, if it has one."""
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        return base64.b64decode(value).decode() if scheme == "Basic" else None


@dataclass
class HTTPRecorder:
    """The running server: its URL, what it was sent, and the status it answers."""

    url: str
    requests: list[Request] = field(default_factory=list)
    status: int = 200


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    recorder: HTTPRecorder


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        recorder = self.server.recorder
        recorder.requests.append(Request(self.command, self.path, dict(self.headers), body))
        self.send_response(recorder.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_POST = do_DELETE = _record

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def http_recorder() -> Iterator[HTTPRecorder]:
    """A fresh recorder on a free loopback port, for one test."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.recorder = HTTPRecorder(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.recorder
    finally:
        server.shutdown()
        server.server_close()
