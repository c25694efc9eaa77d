"""``--rollout-otlp`` as an output: its endpoint, from the option or the standard variables,
checked when the session starts and read only then, and never shown with its credentials."""

from __future__ import annotations

import base64

import pytest

PASSWORD = "otlp-run-pa55-7e3f"
#: Each test writes a file when it runs: a usage error must leave none.
WORKLOAD = """
from pathlib import Path


def test_x(sandbox):
    Path("ran").write_text("yes")
    sandbox.exec("true")
"""


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ("--rollout-otlp=http://[::1", "ERROR: --rollout-otlp='http://[::1': not a URL (Invalid"),
        ("--rollout-otlp=notaurl", "ERROR: --rollout-otlp='notaurl': no scheme; expected http"),
        ("--rollout-otlp=ftp://c:21", "ERROR: --rollout-otlp='ftp://c:21': scheme 'ftp'"),
        (
            f"--rollout-otlp=http://bot:{PASSWORD}@c:99999",
            "ERROR: --rollout-otlp='http://c:99999': its port is not a number from 1 to 65535",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT=http://[::1",
            "ERROR: OTEL_EXPORTER_OTLP_ENDPOINT='http://[::1': not a URL",
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector:4318",
            "ERROR: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT='collector:4318': scheme 'collector'",
        ),
        ("rollout_otlp=http://", "ERROR: rollout_otlp (ini)='http://': no valid host"),
    ],
)
def test_an_endpoint_that_can_never_work_is_one_usage_line_before_any_test(
    pytester, monkeypatch, given, line
):
    pytester.makepyfile(test_x=WORKLOAD)
    name, _, value = given.partition("=")
    args = []
    if name.startswith("--"):
        args = [given]
    elif name.startswith("OTEL_"):
        monkeypatch.setenv(name, value)
    else:
        pytester.makeini(f"[pytest]\n{name} = {value}\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [text for text in result.stderr.lines if text.strip()]
    assert len(errors) == 1 and errors[0].startswith(line), errors
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "ran").exists()


def test_the_credentials_reach_the_collector_and_no_output(pytester, otlp_receiver):
    pytester.makepyfile(test_x=WORKLOAD)
    endpoint = otlp_receiver.endpoint.replace("http://", f"http://ci-bot:{PASSWORD}@")
    result = pytester.runpytest_subprocess(
        f"--rollout-otlp={endpoint}/?api_key={PASSWORD}", "--rollout-probes=0"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"traces and metrics sent to {otlp_receiver.endpoint}/?api_key=[[]REDACTED[]] (OTLP/HTTP)"]
    )
    token = base64.b64encode(f"ci-bot:{PASSWORD}".encode()).decode()
    assert set(otlp_receiver.received.authorizations) == {f"Basic {token}"}
    assert PASSWORD not in result.stdout.str() + result.stderr.str()


#: A test that changes the standard variable while the run goes on.
CHANGES_THE_VARIABLE = """
import os


def test_x(sandbox):
    sandbox.exec("true")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://[::1"
"""


def test_the_endpoint_is_the_one_checked_when_the_session_started(
    pytester, monkeypatch, otlp_receiver
):
    pytester.makepyfile(test_x=CHANGES_THE_VARIABLE)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.endpoint)
    result = pytester.runpytest_subprocess("--rollout-probes=0")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"traces and metrics sent to {otlp_receiver.endpoint} (*"])
    assert otlp_receiver.received.spans()
