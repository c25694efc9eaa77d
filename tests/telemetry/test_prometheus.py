"""Prometheus export: pushed to a real Pushgateway, scraped by a real Prometheus, queried as a
dashboard queries agent-sandbox's histograms."""

from __future__ import annotations

import bisect
import json
import math
import re
import statistics
import time
import urllib.request
from http import HTTPStatus
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from support.timelines import record

from pytest_rollout_tax.core.record import Step
from pytest_rollout_tax.telemetry.prometheus import (
    STARTUP_BUCKETS_MS,
    STEP_BUCKETS_MS,
    push,
    registry_of,
    write,
)

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


#: Another substrate name no other test pushes; sub-millisecond steps and no-op probes.
FAST = "local-session-pushed"
STEP_MS = [0.08, 0.3, 0.4, 0.7, 1.6, 3.0, 0.35]
ACTION_MS = [0.06, 0.12, 0.2, 0.15, 0.3]
IMAGE = "rollout-tax/sandbox:bookworm"


def _fast_records() -> list[dict]:
    steps = [Step("exec", ms / 1000, 0, 0, at_s=0.4 + i) for i, ms in enumerate(STEP_MS)]
    with_image = record(
        substrate=FAST,
        steps=steps,
        action_probes_s=[ms / 1000 for ms in ACTION_MS],
        template=IMAGE,
        cold_start_s=0.5,
        teardown_s=0.2,
    )
    plain = record(sandbox_id="plain", substrate=f"{FAST}-plain", cold_start_s=0.5)
    return [with_image, plain]


def _bucket_of(ms: float) -> int:
    return bisect.bisect_left(STEP_BUCKETS_MS, ms)


@pytest.fixture(scope="module")
def pushed_fast(prometheus):
    """One push of a run whose steps and no-op probes all take under 10 ms, scraped."""
    started = time.time()
    assert push(_fast_records(), prometheus.pushgateway) is None
    prometheus.wait_for_push_since(started)
    return prometheus


@pytest.mark.parametrize(
    ("metric", "samples"),
    [("rollout_tax_step_latency_ms", STEP_MS), ("rollout_tax_action_latency_ms", ACTION_MS)],
)
def test_steps_and_the_action_tax_under_10ms_spread_over_buckets(pushed_fast, metric, samples):
    """The step and action histograms start below a millisecond: a local or session step's
    median lies in its own bucket, not in a first one that holds every sample."""
    for q in (0.5, 0.9):
        query = f'histogram_quantile({q}, sum by (le) ({metric}_bucket{{substrate="{FAST}"}}))'
        (sample,) = pushed_fast.query(query)
        rank = sorted(samples)[math.ceil(q * len(samples)) - 1]
        assert _bucket_of(float(sample["value"][1])) == _bucket_of(rank), (q, sample)
    cumulative = pushed_fast.query(f'{metric}_bucket{{substrate="{FAST}"}}')
    assert len({s["value"][1] for s in cumulative}) > 3  # spread, not all in one bucket


def test_the_template_label_is_the_image_and_absent_without_one(pushed_fast):
    metric = "rollout_tax_sandbox_startup_latency_ms_count"
    (with_image,) = pushed_fast.query(f'{metric}{{substrate="{FAST}"}}')
    assert with_image["metric"]["template"] == IMAGE
    (plain,) = pushed_fast.query(f'{metric}{{substrate="{FAST}-plain"}}')
    assert "template" not in plain["metric"]  # an empty label is no label
    (action,) = pushed_fast.query(f'rollout_tax_action_latency_ms_count{{substrate="{FAST}"}}')
    assert action["metric"]["template"] == IMAGE and float(action["value"][1]) == len(ACTION_MS)


def test_every_family_the_exporter_writes_is_documented():
    """The families of the text format, the ``*_created`` ones among them, in telemetry.md."""
    text = generate_latest(registry_of(_fast_records())).decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE))
    assert {f for f in families if f.endswith("_created")} >= {
        "rollout_tax_sandbox_startup_latency_ms_created", "rollout_tax_rollouts_created",
        "rollout_tax_action_latency_ms_created",
    }  # fmt: skip
    documented = Path("docs/telemetry.md").read_text()
    missing = {f for f in families if f"`{f}`" not in documented}
    assert not missing, missing
