"""Outputs behind the ``pytest_rollout_tax_report`` hook: a third party's output is one plugin
of its own, with no edit to this one (pytester)."""

from __future__ import annotations

from pathlib import Path

import pytest

WORKLOAD = """
from pathlib import Path

import pytest

@pytest.mark.trajectory(steps=20, rounds=2)
def test_loop(sandbox):
    assert sandbox.exec("true").exit_code == 0
"""

#: A throwaway output: ten lines, one option, one hook.
THIRD_PARTY = """
def pytest_addoption(parser):
    parser.addoption("--hours-file", default=None)

def pytest_rollout_tax_report(config, report, summary, verdict):
    path = config.getoption("hours_file")
    best = summary.rows[0][0]
    with open(path, "w") as out:
        out.write(f"{report.schema} {best} {len(summary.decision)} {verdict.failed}")
    return [f"hours written to {path}"]
"""


def test_a_third_party_output_receives_the_report_and_the_summary(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_workload=WORKLOAD, hours_output=THIRD_PARTY)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "hours_output", "--hours-file=hours.txt",
        "--rollout-json=run.json",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "hours.txt").read_text() == "rollout-tax/2 local 1 False"
    result.stdout.fnmatch_lines(["report written to run.json", "hours written to hours.txt"])


def test_an_output_that_writes_nothing_prints_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makeconftest(
        "def pytest_rollout_tax_report(config, report, summary, verdict):\n    return None\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert "written to" not in result.stdout.str()


def test_the_hook_is_documented_by_an_example() -> None:
    from pytest_rollout_tax.plugin import hookspecs

    doc = hookspecs.pytest_rollout_tax_report.__doc__
    assert "def pytest_rollout_tax_report(config, report, summary, verdict):" in doc


#: An output of the typed kind: the outcome in, a result out.
TYPED = """
from pytest_rollout_tax.outputs.outcome import OutputResult

def pytest_rollout_tax_report(config, outcome):
    assert outcome.summary.rows[0][0] == "local" and not outcome.interrupted
    saved = ", ".join(path.name for path in outcome.saved)
    if config.getoption("--rollout-json"):
        return OutputResult.error(f"saved {saved}; failing on purpose")
    return OutputResult((f"saved {saved}; report {outcome.report.schema}",))
"""


def test_a_typed_output_receives_the_outcome_and_its_failure_fails_the_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makeconftest(TYPED)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rollout-save=one")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["saved one.json; report rollout-tax/2"])
    failed = pytester.runpytest(
        "-p", "no:cacheprovider", "--rollout-save=two", "--rollout-json=r.json"
    )
    assert failed.ret == pytest.ExitCode.TESTS_FAILED, failed.stdout.str()
    failed.stdout.fnmatch_lines(["rollout-tax: error: saved two.json; failing on purpose"])


def test_a_plain_list_of_lines_still_says_an_output_failed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makeconftest(
        "def pytest_rollout_tax_report(config, report, summary, verdict):\n"
        "    return ['rollout-tax: error: cannot reach my dashboard']\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["rollout-tax: error: cannot reach my dashboard"])


def test_the_documented_output_runs_as_documented(pytester: pytest.Pytester) -> None:
    """docs/json.md's own output, as written there, in a conftest."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    section = page[page.index("## Your own output") :]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("\n```", start)]
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makeconftest(example)
    result = pytester.runpytest("-p", "no:cacheprovider", "--hours-file=h.txt")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "h.txt").read_text().startswith("local ")
    result.stdout.fnmatch_lines(["hours written to h.txt"])
