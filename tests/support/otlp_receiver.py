"""An OTLP/HTTP receiver on loopback that decodes what crosses the wire (test infrastructure).

It answers ``POST /v1/traces`` and ``POST /v1/metrics`` as a collector does, decoding each
protobuf body with ``opentelemetry-proto`` (gzip or not), and keeps the raw bytes too, so a
test can check the span tree and the metric points, and search every exported byte for a
secret.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

ROUTES = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


@dataclass(frozen=True)
class Span:
    """One received span, its ids as hex and its attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class Received:
    """Everything a receiver was sent."""

    raw: list[bytes] = field(default_factory=list)
    #: Each request's ``Authorization`` header (None: it had none).
    authorizations: list[str | None] = field(default_factory=list)
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)

    def spans(self) -> list[Span]:
        return [
            Span(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                attributes={a.key: value_of(a.value) for a in span.attributes},
                status_code=span.status.code,
            )
            for request in self.traces
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def metric(self, name: str) -> list[Any]:
        """Every received metric of that name (the protobuf ``Metric`` messages)."""
        return [
            metric
            for request in self.metrics
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
        ]


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


class OTLPReceiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received = Received()
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: OTLPReceiver

    def do_POST(self) -> None:
        path = self.path.partition("?")[0]  # a collector's token may come as a query
        route = ROUTES.get(path)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if route is None:
            self.send_error(404, f"no OTLP route {path}")
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request_type, response_type = route
        request = request_type.FromString(body)
        with self.server.lock:
            self.server.received.raw.append(body)
            self.server.received.authorizations.append(self.headers.get("Authorization"))
            kind = "traces" if path == "/v1/traces" else "metrics"
            getattr(self.server.received, kind).append(request)
        reply = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    """A fresh receiver on a free loopback port, for one test."""
    server = OTLPReceiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
