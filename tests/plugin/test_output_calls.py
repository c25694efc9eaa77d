"""Each output hook implementation called on its own (plugin/output_calls.py): one that raises,
returns what is not lines or tries to change the report costs only itself, in one line."""

from __future__ import annotations

import json

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
            "rollout-tax: error: output conftest.py failed: TypeError: returned str, not a list "
            "of lines (str)",
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
