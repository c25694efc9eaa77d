"""A real run of the README's workload on local and docker, exported both ways: the span tree,
each step span's duration against the report, the Prometheus p50 in the report p50's bucket,
no canary in any exported byte, and nothing exported or imported unless asked."""

from __future__ import annotations

import bisect
import json
import math
import time

import pytest
from support.workloads import readme_workload

from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.telemetry.prometheus import STARTUP_BUCKETS_MS

CANARY = "canary-5e1b7c0d-env-value"
LEAKY = f"""
import pytest

@pytest.mark.trajectory(rounds=1)
def test_leaks(sandbox):
    sandbox.exec("echo $TOKEN", env={{"TOKEN": "{CANARY}"}})
    sandbox.write_file("note.txt", "{CANARY}")
    assert sandbox.read_file("note.txt") == "{CANARY}"
"""


@pytest.fixture
def exported(pytester, otlp_receiver, prometheus, docker_client, sandbox_image):
    """One run of the README's workload (its two tests) and a leaky one (1 round) on local and
    docker, exported over OTLP and to the Pushgateway, with its JSON report: 4 rollouts a
    substrate."""
    pytester.makepyfile(test_workload=readme_workload(), test_leaks=LEAKY)
    started = time.time()
    result = pytester.runpytest(
        "--substrate=local,docker",
        f"--rollout-otlp={otlp_receiver.endpoint}",
        f"--rollout-prometheus-push={prometheus.pushgateway}",
        "--rollout-json=report.json",
    )
    assert result.ret == 0, result.stdout.str()
    return result, json.loads((pytester.path / "report.json").read_text()), started


def test_each_rollout_is_one_trace_of_its_phases_and_steps_at_their_recorded_times(
    exported, otlp_receiver
):
    result, report, _ = exported
    spans = otlp_receiver.received.spans()
    roots = {s.attributes["rollout_tax.sandbox_id"]: s for s in spans if not s.parent_span_id}
    assert len(roots) == len(report["rollouts"])
    for rollout in report["rollouts"]:
        root = roots[rollout["sandbox_id"]]
        children = [s for s in spans if s.parent_span_id == root.span_id]
        phases = [s.name.removeprefix("cold_start ") for s in children if "cold_start" in s.name]
        assert phases == list(rollout["phases"])
        steps = [s for s in children if s.name.startswith("execute_tool ")]
        walls = [step.wall_s for step in steps_of(rollout["steps"])]
        assert [s.duration_s for s in sorted(steps, key=lambda s: s.start_ns)] == pytest.approx(
            walls, abs=1e-3
        )
        assert {s.trace_id for s in children} == {root.trace_id}
    assert f"traces and metrics sent to {otlp_receiver.endpoint}" in result.stdout.str()


def test_the_prometheus_p50_lies_in_the_bucket_of_the_rollout_its_rank_reads(exported, prometheus):
    """histogram_quantile(0.5) of N samples reads the ceil(N/2)-th smallest one's bucket (the
    median itself for an odd N; for an even N the report's p50 is between two samples, which
    may lie in two buckets)."""
    _, report, started = exported
    prometheus.wait_for_push_since(started)
    for substrate in ("local", "docker"):
        colds = sorted(r["cold_start_s"] for r in report["rollouts"] if r["substrate"] == substrate)
        ranked_ms = colds[math.ceil(len(colds) / 2) - 1] * 1000
        query = (
            "histogram_quantile(0.5, sum by (le) (rollout_tax_sandbox_startup_latency_ms_bucket"
            f'{{substrate="{substrate}"}}))'
        )
        (sample,) = prometheus.query(query)
        assert bisect.bisect_left(STARTUP_BUCKETS_MS, float(sample["value"][1])) == (
            bisect.bisect_left(STARTUP_BUCKETS_MS, ranked_ms)
        )


def test_no_canary_in_any_exported_byte(exported, otlp_receiver):
    sent = b"".join(otlp_receiver.received.raw)
    assert sent and CANARY.encode() not in sent


def test_nothing_is_exported_or_imported_unless_asked(pytester, monkeypatch):
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    pytester.makeconftest(
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        "    loaded = [m for m in ('opentelemetry', 'prometheus_client') if m in sys.modules]\n"
        "    open('loaded.txt', 'w').write(','.join(loaded))\n"
    )
    pytester.makepyfile(test_workload=readme_workload())
    result = pytester.runpytest_subprocess("--substrate=local")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "loaded.txt").read_text() == ""
    assert "OTLP" not in result.stdout.str()


def test_an_unreachable_collector_is_one_warning_line_and_the_run_goes_on(pytester):
    pytester.makepyfile(test_workload=readme_workload())
    result = pytester.runpytest(
        "--substrate=local",
        "--rollout-otlp=http://127.0.0.1:9",
        "--rollout-prometheus-push=127.0.0.1:9",
    )
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    assert text.count("OTLP export to http://127.0.0.1:9 failed") == 1
    assert text.count("Prometheus push to 127.0.0.1:9 failed") == 1
    assert ("rollout tax" in text and "cheapest here" in text) or "local" in text


def test_a_protocol_it_cannot_speak_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    pytester.makepyfile(test_workload=readme_workload())
    result = pytester.runpytest("--substrate=local", "--rollout-otlp=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*OTEL_EXPORTER_OTLP_PROTOCOL='grpc': rollout-tax exports*"])
