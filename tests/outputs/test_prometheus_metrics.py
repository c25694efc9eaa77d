"""``--rollout-prometheus-push`` and ``-file`` as an output: the gateway's URL checked when the
session starts, its credentials sent as basic auth and never shown."""

from __future__ import annotations

import pytest

PASSWORD = "push-run-pa55-51aa"
WORKLOAD = """
from pathlib import Path


def test_x(sandbox):
    Path("ran").write_text("yes")
    sandbox.exec("true")
"""


@pytest.mark.parametrize(
    ("url", "line"),
    [
        ("http://[::1", "'http://[::1': not a URL (Invalid IPv6 URL); expected http://HOST"),
        ("ftp://gw:21", "'ftp://gw:21': scheme 'ftp'; expected http://HOST[:PORT][/PATH], e.g."),
        ("gw:90a1", "'gw:90a1': its port is not a number from 1 to 65535; expected http://"),
        (f"https://bot:{PASSWORD}@:9091", "'https://:9091': no valid host"),
    ],
)
@pytest.mark.parametrize("given", ["option", "environment", "ini"])
def test_a_gateway_that_can_never_work_is_one_usage_line_before_any_test(
    pytester, monkeypatch, url, line, given
):
    pytester.makepyfile(test_x=WORKLOAD)
    if given == "environment":  # given at run time, through PYTEST_ADDOPTS
        monkeypatch.setenv("PYTEST_ADDOPTS", f"--rollout-prometheus-push={url}")
    elif given == "ini":
        pytester.makeini(f"[pytest]\nrollout_prometheus_push = {url}\n")
    args = [f"--rollout-prometheus-push={url}"] if given == "option" else []
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [text for text in result.stderr.lines if text.strip()]
    name = "rollout_prometheus_push (ini)" if given == "ini" else "--rollout-prometheus-push"
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: {name}={line}"), errors
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "ran").exists()


def test_the_credentials_reach_the_gateway_and_no_output(pytester, http_recorder):
    pytester.makepyfile(test_x=WORKLOAD)
    gateway = http_recorder.url.replace("http://", f"http://ci-bot:{PASSWORD}@")
    result = pytester.runpytest_subprocess(f"--rollout-prometheus-push={gateway}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"metrics pushed to {http_recorder.url}"])
    assert [r.basic_auth for r in http_recorder.requests] == [f"ci-bot:{PASSWORD}"]
    assert PASSWORD not in result.stdout.str() + result.stderr.str()


def test_a_refused_push_is_a_warning_without_the_credentials(pytester, http_recorder):
    pytester.makepyfile(test_x=WORKLOAD)
    http_recorder.status = 401
    gateway = http_recorder.url.replace("http://", f"http://ci-bot:{PASSWORD}@")
    result = pytester.runpytest_subprocess(f"--rollout-prometheus-push={gateway}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()  # a warning, as documented
    result.stdout.fnmatch_lines(
        [f"rollout-tax: Prometheus push to {http_recorder.url} failed: HTTP Error 401: *"]
    )
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
