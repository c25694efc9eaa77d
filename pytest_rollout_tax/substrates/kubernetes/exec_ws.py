"""The exec websocket (``v5.channel.k8s.io``, else ``v4``): channel 0 stdin, 1 stdout, 2 stderr,
3 the ``Status`` with the exit code, and in v5 255 to close a channel.

:func:`run` is one exec per command; :class:`ExecStream` holds one ``sh`` open for a session.
The websocket is opened the way ``ws_client.create_websocket`` does, with a timeout added; the
client's ``stream()`` helper, which monkeypatches a shared ApiClient, is not used.
"""

from __future__ import annotations

import json
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...core.shell import SHELL, STDERR, STDOUT, Duplex
from ...core.transport import Output, RawResult, not_started, one_line
from ...errors import SandboxError, StepTimeout
from .api import EXEC, Api
from .client import (
    ABNF,
    WebSocket,
    WebSocketBadStatusException,
    WebSocketConnectionClosedException,
    WebSocketException,
    WebSocketTimeoutException,
    certifi,
    ws_client,
)

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
STDIN, STATUS, CLOSE = 0, 3, 255
#: stdin frames are sent in pieces of this size.
STDIN_CHUNK = 256 * 1024
_DATA = (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT)


class Deadline(StepTimeout):
    """The client-side deadline of an exec passed (or no frame came for its idle time)."""


def connect(
    api: Api, pod: str, container: str, command: list[str], *, stdin: bool, deadline: float | None
) -> WebSocket:
    """The exec websocket for ``command`` in ``pod``, connected within the API's connect
    timeout (or by ``deadline``, raising Deadline); ApiError if refused or unreachable."""
    query = [("command", part) for part in command] + [
        ("container", container),
        ("stdin", "true" if stdin else "false"),
        ("stdout", "true"),
        ("stderr", "true"),
        ("tty", "false"),
    ]
    timeout, by_deadline = api.timeout[0], False
    if deadline is not None:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise Deadline
        if remaining < timeout:
            timeout, by_deadline = remaining, True
    request = api.serialize("GET", EXEC, name=pod, query=query)
    try:
        return _websocket(api.configuration, request, timeout)
    except WebSocketBadStatusException as exc:
        raise api.refused(exc.status_code, exc.resp_body, "create", "pods/exec", pod) from None
    except (OSError, WebSocketException) as exc:
        if by_deadline and isinstance(exc, (TimeoutError, WebSocketTimeoutException)):
            raise Deadline from None  # the step's deadline, not the API's, ran out
        raise api.unreachable(exc) from None


def run(
    api: Api,
    pod: str,
    container: str,
    command: list[str],
    *,
    stdin: bytes | None = None,
    deadline: float | None = None,
    idle: float | None = None,
    cap: int | None = None,
) -> RawResult:
    """Run ``command`` over one exec websocket, ``stdin`` sent then closed; Deadline past
    ``deadline`` or after ``idle`` seconds without a frame (neither: as long as it runs).
    Each output stream keeps ``cap`` bytes (None: all)."""
    ws = connect(api, pod, container, command, stdin=stdin is not None, deadline=deadline)

    def arm() -> None:  # the socket timeout for the next send or receive
        timeout = idle
        if deadline is not None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise Deadline
            timeout = remaining if idle is None else min(remaining, idle)
        ws.settimeout(timeout)

    limit = sys.maxsize if cap is None else cap
    stdout, stderr, status = Output(limit), Output(limit), bytearray()
    try:
        if stdin is not None:
            for offset in range(0, len(stdin), STDIN_CHUNK):
                arm()
                ws.send_binary(bytes([STDIN]) + stdin[offset : offset + STDIN_CHUNK])
            if ws.subprotocol == V5:
                arm()
                ws.send_binary(bytes([CLOSE, STDIN]))
        while True:
            arm()
            try:
                opcode, frame = ws.recv_data_frame(True)
            except (WebSocketConnectionClosedException, ConnectionError):
                break
            if opcode == ABNF.OPCODE_CLOSE:
                break
            if opcode not in _DATA or not frame.data:
                continue
            data = _bytes(frame.data)
            channel, payload = data[0], data[1:]
            if channel == STDOUT:
                stdout.add(payload)
            elif channel == STDERR:
                stderr.add(payload)
            elif channel == STATUS:
                status += payload
    except WebSocketTimeoutException:
        raise Deadline from None
    except (OSError, WebSocketException) as exc:
        raise SandboxError(f"k8s: exec in pod {pod}: {api.unreachable(exc).detail}") from None
    finally:
        ws.shutdown()
    result = exit_code(pod, bytes(status), bytes(stdout.data), bytes(stderr.data), scrub=api.scrub)
    discarded = stdout.size + stderr.size - len(stdout.data) - len(stderr.data)
    return replace(result, output_bytes=result.size + discarded) if discarded else result


def exit_code(
    pod: str, status: bytes, stdout: bytes, stderr: bytes, *, scrub: Callable[[str], str]
) -> RawResult:
    """The result the ``Status`` of channel 3 gives: Success, or NonZeroExitCode with its
    ExitCode cause; runc's "exec failed" as 127 or 126. ``scrub`` cleans a server's message."""
    if not status:
        raise SandboxError(f"k8s: exec in pod {pod}: the stream ended without an exit status")
    unreadable = SandboxError(f"k8s: exec in pod {pod}: unreadable exit status")
    try:
        result = json.loads(status)
    except ValueError:
        raise unreadable from None
    if not isinstance(result, dict):
        raise unreadable
    if result.get("status") == "Success":
        return RawResult(0, stdout, stderr)
    if result.get("reason") == "NonZeroExitCode":
        for cause in (result.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                try:
                    code = int(cause.get("message", 1))
                except (TypeError, ValueError):
                    raise unreadable from None
                # docker-based nodes: runc's message on stdout, exit 126
                if code == 126 and (failed := not_started(stdout)) is not None:
                    return RawResult(failed.exit_code, b"", stderr + failed.stderr)
                return RawResult(code, stdout, stderr)
    message = scrub(one_line(result.get("message", ""), 500))
    # containerd / CRI-O nodes: an InternalError Status instead of an exit code
    if (failed := not_started(message.encode())) is not None:
        return RawResult(failed.exit_code, stdout, stderr + failed.stderr)
    raise SandboxError(f"k8s: exec in pod {pod} failed: {message or result}")


class ExecStream(Duplex):
    """``session``: one exec of ``sh`` with stdin held open for the pod's life."""

    def __init__(self, api: Api, pod: str, container: str) -> None:
        self._send_timeout = api.timeout[1]
        self._ws = connect(api, pod, container, list(SHELL), stdin=True, deadline=None)

    def send(self, data: bytes) -> None:
        ws = self._ws
        try:
            ws.settimeout(self._send_timeout)
            for offset in range(0, len(data), STDIN_CHUNK):
                ws.send_binary(bytes([STDIN]) + data[offset : offset + STDIN_CHUNK])
        except (OSError, WebSocketException):
            ws.shutdown()  # receive() reports the end

    def receive(self, timeout: float | None) -> tuple[int, bytes]:
        deadline = None if timeout is None else time.monotonic() + timeout
        ws = self._ws
        while True:
            if deadline is not None:
                ws.settimeout(max(deadline - time.monotonic(), 0.001))
            else:
                ws.settimeout(None)
            try:
                opcode, frame = ws.recv_data_frame(True)
            except (WebSocketTimeoutException, TimeoutError):
                raise TimeoutError from None
            except (OSError, WebSocketException):
                return 0, b""  # the connection broke, or the server closed it
            if opcode == ABNF.OPCODE_CLOSE:
                return 0, b""
            if opcode not in _DATA or not frame.data:
                continue
            data = _bytes(frame.data)
            if data[0] in (STDOUT, STDERR) and len(data) > 1:
                return data[0], data[1:]
            if data[0] == STATUS:
                return 0, b""  # the shell's exit status: it ended

    def close(self) -> None:
        ws = self._ws
        if ws.subprotocol == V5 and ws.connected:
            try:
                ws.settimeout(1.0)
                ws.send_binary(bytes([CLOSE, STDIN]))  # the shell reads its end of input
            except (OSError, WebSocketException):
                pass
        ws.shutdown()


def _bytes(data: bytes | str) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


def _websocket(configuration: Any, request: tuple[Any, ...], timeout: float) -> WebSocket:
    """``ws_client.create_websocket`` for a serialized GET request, with ``timeout`` on the
    connect and the handshake (the client's own takes none, so an unanswered upgrade hangs)."""
    url, headers = ws_client.get_websocket_url(request[1]), request[2] or {}
    header = [f"sec-websocket-protocol: {V5},{V4}"]
    if "authorization" in headers:
        header.insert(0, f"authorization: {headers['authorization']}")
    if url.startswith("wss://") and configuration.verify_ssl:
        ssl_opts: dict[str, Any] = {
            "cert_reqs": ssl.CERT_REQUIRED,
            "ca_certs": configuration.ssl_ca_cert or certifi.where(),
        }
        if configuration.assert_hostname is not None:
            ssl_opts["check_hostname"] = configuration.assert_hostname
    else:
        ssl_opts = {"cert_reqs": ssl.CERT_NONE}
    if configuration.cert_file:
        ssl_opts["certfile"] = configuration.cert_file
    if configuration.key_file:
        ssl_opts["keyfile"] = configuration.key_file
    if configuration.tls_server_name:
        ssl_opts["server_hostname"] = configuration.tls_server_name
    options: dict[str, Any] = {"header": header}
    if configuration.proxy or configuration.proxy_headers:
        options = ws_client.websocket_proxycare(options, configuration, url, headers)
    websocket = WebSocket(sslopt=ssl_opts, skip_utf8_validation=False)
    websocket.connect(url, timeout=timeout, **options)
    return websocket
