"""Outputs behind the ``pytest_rollout_tax_report`` hook: a third party's output is one plugin
of its own, with no edit to this one (pytester)."""

from __future__ import annotations

import pytest

WORKLOAD = """
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
