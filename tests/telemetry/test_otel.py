"""OTLP export: the bytes cross the wire to a receiver that decodes them (opentelemetry-proto)."""

from __future__ import annotations

import base64

import pytest
from support.otlp_receiver import value_of
from support.timelines import record

from pytest_rollout_tax.core.record import Step
from pytest_rollout_tax.telemetry.otel import TOOL_BUCKETS, export

CHILDREN = [
    "cold_start create", "cold_start start", "cold_start first_exec",
    "execute_tool exec", "execute_tool write_file", "teardown",
]  # fmt: skip


def test_one_root_span_per_rollout_whose_children_are_its_phases_steps_and_teardown(
    otlp_receiver,
):
    assert export([record(), record(sandbox_id="beef")], otlp_receiver.endpoint) is None
    spans = otlp_receiver.received.spans()
    roots = [span for span in spans if not span.parent_span_id]
    assert len(roots) == 2
    for root in roots:
        children = [s for s in spans if s.parent_span_id == root.span_id]
        assert {s.trace_id for s in children} == {root.trace_id}
        assert sorted(s.name for s in children) == sorted(CHILDREN)
        assert root.attributes["rollout_tax.substrate"] == "docker"
        assert root.attributes["rollout_tax.launch_type"] == "cold"


def test_a_step_spans_its_recorded_wall_time_within_a_millisecond(otlp_receiver):
    walls = [0.0123, 0.4567, 1.25]
    steps = [Step("exec", wall, 0, at_s=0.4 + i * 2) for i, wall in enumerate(walls)]
    export([record(steps=steps)], otlp_receiver.endpoint)
    spans = [s for s in otlp_receiver.received.spans() if s.name.startswith("execute_tool")]
    assert [s.duration_s for s in spans] == pytest.approx(walls, abs=1e-3)


def test_the_tool_duration_histogram_has_the_conventions_buckets(otlp_receiver):
    export([record()], otlp_receiver.endpoint)
    (metric,) = otlp_receiver.received.metric("gen_ai.execute_tool.duration")
    assert metric.unit == "s"
    points = metric.histogram.data_points
    tools = {value_of(a.value) for p in points for a in p.attributes if a.key == "gen_ai.tool.name"}
    assert tools == {"exec", "write_file"}
    assert all(tuple(p.explicit_bounds) == TOOL_BUCKETS for p in points)
    assert sum(p.count for p in points) == 2


def test_an_unreachable_collector_is_one_warning_line(unused_port_url):
    warning = export([record()], unused_port_url, timeout=1)
    assert warning.startswith("rollout-tax: OTLP export to ") and "\n" not in warning


def test_the_sandbox_histograms_carry_startup_teardown_and_action(otlp_receiver):
    export([record(action_probes_s=[0.002, 0.003])], otlp_receiver.endpoint)
    (action,) = otlp_receiver.received.metric("rollout_tax.sandbox.action.duration")
    assert sum(p.count for p in action.histogram.data_points) == 2
    (startup,) = otlp_receiver.received.metric("rollout_tax.sandbox.startup.duration")
    phases = {value_of(a.value) for p in startup.histogram.data_points for a in p.attributes
              if a.key == "rollout_tax.phase"}  # fmt: skip
    assert phases == {"create", "start", "first_exec", "cold_start"}
    assert otlp_receiver.received.metric("rollout_tax.sandbox.teardown.duration")


PASSWORD = "otlp-pa55-4d2b"


def test_a_collector_behind_basic_auth_gets_the_urls_user_and_password(otlp_receiver):
    endpoint = otlp_receiver.endpoint.replace("http://", f"http://ci-bot:{PASSWORD}@")
    assert export([record()], endpoint) is None
    token = base64.b64encode(f"ci-bot:{PASSWORD}".encode()).decode()
    assert otlp_receiver.received.authorizations == [f"Basic {token}"] * 2  # traces, metrics


@pytest.mark.parametrize(
    "endpoint", ["http://ci-bot:{password}@[::1", "http://ci-bot:{password}@127.0.0.1:{port}"]
)
def test_a_collector_that_cannot_be_reached_is_a_warning_without_the_credentials(
    endpoint, unused_port_url
):
    port = unused_port_url.rsplit(":", 1)[1]
    warning = export([record()], endpoint.format(password=PASSWORD, port=port), timeout=1)
    assert warning.startswith("rollout-tax: OTLP export to http://") and "\n" not in warning
    assert PASSWORD not in warning and "ci-bot" not in warning
