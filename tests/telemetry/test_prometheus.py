"""Prometheus export: pushed to a real Pushgateway, scraped by a real Prometheus, queried as a
dashboard queries agent-sandbox's histograms."""

from __future__ import annotations

import bisect
import json
import re
import statistics
import time
import urllib.request
from http import HTTPStatus
from pathlib import Path

import pytest
from support.timelines import record

from pytest_rollout_tax.telemetry.prometheus import STARTUP_BUCKETS_MS, push, registry_of, write

COLD_S = [0.31, 0.42, 0.55, 0.61, 0.72, 0.93, 1.3, 2.2, 0.48]
#: A name no real run in the session pushes: the Pushgateway and Prometheus are shared, and a
#: query must not read another test's push from the scrape before this one's.
SUBSTRATE = "docker-pushed"


def _records() -> list[dict]:
    return [
        record(sandbox_id=f"s{i}", cold_start_s=cold, substrate=SUBSTRATE)
        for i, cold in enumerate(COLD_S)
    ]


def _bucket(ms: float) -> int:
    return bisect.bisect_left(STARTUP_BUCKETS_MS, ms)


def test_histogram_quantile_lands_in_the_bucket_of_the_reports_p50(prometheus):
    started = time.time()
    assert push(_records(), prometheus.pushgateway) is None
    query = (
        "histogram_quantile(0.5, sum by (le) "
        f'(rollout_tax_sandbox_startup_latency_ms_bucket{{substrate="{SUBSTRATE}"}}))'
    )
    prometheus.wait_for_push_since(started)
    (sample,) = prometheus.query(query)
    p50_ms = statistics.median(COLD_S) * 1000
    assert _bucket(float(sample["value"][1])) == _bucket(p50_ms)


def test_the_histogram_carries_agent_sandboxs_buckets_and_labels():
    text = registry_of(_records())
    (family,) = [m for m in text.collect() if m.name == "rollout_tax_sandbox_startup_latency_ms"]
    buckets = [s for s in family.samples if s.name.endswith("_bucket")]
    assert [float(s.labels["le"]) for s in buckets][:-1] == list(map(float, STARTUP_BUCKETS_MS))
    assert {key for s in buckets for key in s.labels} == {
        "substrate", "launch_type", "template", "le",
    }  # fmt: skip


def test_the_textfile_is_written_for_the_node_exporter(tmp_path):
    path = tmp_path / "rollout_tax.prom"
    assert write(_records(), str(path)) is None
    expected = f'rollout_tax_rollouts_total{{outcome="passed",substrate="{SUBSTRATE}"}} 9.0'
    assert expected in path.read_text()


def test_an_unwritable_textfile_is_one_warning_line(tmp_path):
    warning = write(_records(), str(tmp_path / "missing" / "x.prom"))
    assert warning.startswith("rollout-tax: cannot write Prometheus metrics to ")


def test_an_unreachable_gateway_is_one_warning_line(unused_port_url):
    warning = push(_records(), unused_port_url, timeout=2)
    assert warning.startswith(f"rollout-tax: Prometheus push to {unused_port_url} failed")


def test_the_dashboard_queries_only_metrics_the_exporter_writes():
    dashboard = json.loads(Path("docs/dashboards/rollout-tax.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {m for expr in exprs for m in re.findall(r"rollout_tax_[a-z_]+", expr)}
    written = {f"{m.name}_bucket" if m.type == "histogram" else f"{m.name}_total"
               for m in registry_of(_records()).collect()}  # fmt: skip
    assert used and used <= written


PASSWORD = "pushgw-pa55-9c1e"


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://ci-bot:{PASSWORD}@")


def test_a_gateway_behind_basic_auth_gets_the_urls_user_and_password(http_recorder):
    assert push(_records(), _with_credentials(http_recorder.url)) is None
    (request,) = http_recorder.requests
    assert (request.method, request.path) == ("PUT", "/metrics/job/rollout_tax")
    assert request.basic_auth == f"ci-bot:{PASSWORD}"
    assert b"rollout_tax_sandbox_startup_latency_ms_bucket" in request.body


def test_a_real_gateway_takes_a_push_whose_url_carries_credentials(prometheus):
    records = [record(sandbox_id="cred", substrate="docker-credentialed")]
    assert push(records, _with_credentials(prometheus.pushgateway)) is None
    with urllib.request.urlopen(f"{prometheus.pushgateway}/metrics", timeout=10) as response:
        assert 'substrate="docker-credentialed"' in response.read().decode()


@pytest.mark.parametrize("status", [401, 503])
def test_a_refused_push_is_one_warning_line_without_the_credentials(http_recorder, status):
    http_recorder.status = status
    warning = push(_records(), _with_credentials(http_recorder.url) + "/?token=tok-123456")
    assert warning == (
        f"rollout-tax: Prometheus push to {http_recorder.url}/?token=[REDACTED] failed: "
        f"HTTP Error {status}: {HTTPStatus(status).phrase}"
    )


@pytest.mark.parametrize(
    "gateway", ["http://ci-bot:{password}@[::1", "http://ci-bot:{password}@127.0.0.1:99999"]
)
def test_a_gateway_url_that_cannot_be_used_is_a_warning_never_a_raise(gateway):
    warning = push(_records(), gateway.format(password=PASSWORD), timeout=2)
    assert warning.startswith("rollout-tax: Prometheus push to http://") and "\n" not in warning
    assert PASSWORD not in warning
