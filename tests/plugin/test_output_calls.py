"""Each output hook implementation called on its own (plugin/output_calls.py): one that raises,
returns what is not lines or tries to change the report costs only itself, in one line."""

from __future__ import annotations

import json
import urllib.request

import pytest

WORKLOAD = """
def test_x(sandbox):
    sandbox.exec("true")
"""
OUTPUTS = ("--rollout-json=run.json", "--rollout-html=run.html", "--rollout-save=run",
           "--rollout-probes=0")  # fmt: skip


def hook(body: str, decorator: str = "") -> str:
    return f"{decorator}\ndef pytest_rollout_tax_report(config, report, summary, verdict):\n{body}"


def run(pytester: pytest.Pytester, conftest: str) -> pytest.RunResult:
    pytester.makepyfile(test_x=WORKLOAD)
    pytester.makeconftest(conftest)
    return pytester.runpytest_subprocess(*OUTPUTS)


def assert_everything_else_appears(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    """The summary whole, every other output's file and line, no traceback."""
    output = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            "*= rollout tax =*",
            "local: * worker-hours*",
            "substrate  rollouts*",
            "local  *",
            "report written to run.json",
            "HTML report written to *run.html",
            "run saved to *run.json",
        ]
    )
    assert json.loads((pytester.path / "run.json").read_text())["substrates"]["local"]
    assert (pytester.path / "run.html").read_text().startswith("<!DOCTYPE html>")
    assert "Traceback" not in output and "INTERNALERROR" not in output


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            "    raise RuntimeError('collector down\\nsecond line')",
            "rollout-tax: error: output conftest.py failed: RuntimeError: collector down "
            "second line",
        ),
        (
            "    return 'hours written'",
            "rollout-tax: error: output conftest.py failed: TypeError: returned str, not a result "
            "or a list of lines",
        ),
        (
            "    return ['hours', 3]",
            "rollout-tax: error: output conftest.py failed: TypeError: returned a list holding "
            "int, not only lines (str)",
        ),
        (
            "    report.rollouts.clear()",
            "rollout-tax: error: output conftest.py tried to change the report, which is "
            "read-only (AttributeError: 'RolloutRows' object has no attribute 'clear')",
        ),
        (
            "    report.projection.rollouts = 5",
            "rollout-tax: error: output conftest.py tried to change the report, which is "
            "read-only (FrozenInstanceError: cannot assign to field 'rollouts')",
        ),
    ],
)
def test_a_broken_third_party_output_costs_only_itself(pytester, body, line):
    result = run(pytester, hook(body))
    assert_everything_else_appears(pytester, result)
    errors = [text for text in result.stdout.lines if "conftest.py" in text]
    assert errors == [line]
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # an output failed, as a failed write
    result.stdout.fnmatch_lines(["rollout-tax gate: FAILED (exit status 1): an output *"])


def test_a_builtin_output_that_raises_costs_only_itself(pytester):
    """The OTLP output, its telemetry broken in the process: the other outputs stay."""
    conftest = (
        "import pytest_rollout_tax.telemetry.otel as otel\n\n"
        "def pytest_configure(config):\n"
        "    def broken(records, endpoint):\n"
        "        raise KeyError('gen_ai.tool.name')\n"
        "    otel.export = broken\n"
    )
    pytester.makepyfile(test_x=WORKLOAD)
    pytester.makeconftest(conftest)
    result = pytester.runpytest_subprocess(*OUTPUTS, "--rollout-otlp=http://127.0.0.1:9")
    assert_everything_else_appears(pytester, result)
    result.stdout.fnmatch_lines(
        [
            "rollout-tax: error: output pytest_rollout_tax.outputs.otlp failed: "
            "KeyError: 'gen_ai.tool.name'"
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


WRAPPERS = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_rollout_tax_report(config, report, summary, verdict):
    outcome = yield
    outcome.force_result([*outcome.get_result(), ["old-style wrapper saw the outputs"]])


class Broken:
    @pytest.hookimpl(wrapper=True)
    def pytest_rollout_tax_report(self, config, report, summary, verdict):
        yield
        raise ValueError("wrapper broke after the outputs")


def pytest_configure(config):
    config.pluginmanager.register(Broken(), "broken-wrapper")
"""


def test_wrappers_wrap_the_outputs_and_a_broken_one_costs_only_itself(pytester):
    result = run(pytester, WRAPPERS)
    assert_everything_else_appears(pytester, result)
    result.stdout.fnmatch_lines(
        [
            "old-style wrapper saw the outputs",
            "rollout-tax: error: output broken-wrapper failed: ValueError: wrapper broke after "
            "the outputs",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_an_output_that_works_changes_nothing(pytester):
    result = run(pytester, hook("    return ['hours written to hours.txt']"))
    assert_everything_else_appears(pytester, result)
    result.stdout.fnmatch_lines(["hours written to hours.txt"])
    assert result.ret == pytest.ExitCode.OK


PASSWORD = "acceptance-pa55-03c9"
#: The endpoint's variable changed to a malformed URL while the run goes on.
CHANGES_THE_ENDPOINT = """
import os


def test_x(sandbox):
    sandbox.exec("true")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://[::1"
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://[::1"
"""


def test_a_run_with_a_raising_output_a_url_changed_mid_run_and_credentials_loses_nothing(
    pytester, monkeypatch, otlp_receiver, prometheus
):
    """The issue's acceptance: a third party's output raises, the collector's variable turns
    malformed while the run goes on, and both exporters' URLs carry a password: the summary
    prints whole, the password is in no byte of output, file or export, and the exit status
    says an output failed."""
    pytester.makepyfile(test_x=CHANGES_THE_ENDPOINT)
    pytester.makeconftest(hook("    raise RuntimeError('collector down')"))
    collector = otlp_receiver.endpoint.replace("http://", f"http://ci:{PASSWORD}@")
    gateway = prometheus.pushgateway.replace("http://", f"http://ci:{PASSWORD}@")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector)
    result = pytester.runpytest_subprocess(
        *OUTPUTS, f"--rollout-prometheus-push={gateway}", "--rollout-prometheus-file=run.prom"
    )
    assert_everything_else_appears(pytester, result)
    result.stdout.fnmatch_lines(
        [
            "rollout-tax: error: output conftest.py failed: RuntimeError: collector down",
            f"metrics pushed to {prometheus.pushgateway}",
            f"traces and metrics sent to {otlp_receiver.endpoint} (OTLP/HTTP)",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert otlp_receiver.received.spans()
    with urllib.request.urlopen(f"{prometheus.pushgateway}/metrics", timeout=10) as response:
        pushed = response.read()
    files = [path.read_bytes() for path in pytester.path.rglob("*") if path.is_file()]
    everything = [result.stdout.str().encode(), result.stderr.str().encode(), pushed, *files,
                  *otlp_receiver.received.raw]  # fmt: skip
    assert not [blob for blob in everything if PASSWORD.encode() in blob]
