"""pytest runs that write reports beyond the terminal (pytester): ``--rollout-html``, and the
rollout summary inside pytest-html's page and pytest-json-report's JSON when they are installed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from pytest_rollout_tax.page import plots

# Imported here, before pytester's in-process runs, which unload the modules they import: a
# C extension such as matplotlib's cannot be imported twice into one process.
plots.require()

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=20, rounds=3)
def test_edit_loop(sandbox):
    sandbox.write_file("calc.py", "def add(a, b):\\n    return a + b\\n")
    assert sandbox.exec("true").exit_code == 0
    assert "add" in sandbox.read_file("calc.py")
"""


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed"
    )


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_workload=WORKLOAD)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def test_rollout_html_writes_the_page_with_the_gate_s_verdict(suite: pytest.Pytester) -> None:
    assert run(suite, "--rollout-save=base", "--rollout-html=base.html").ret == 0
    assert "<title>Rollout tax: base.json</title>" in (suite.path / "base.html").read_text()
    result = run(
        suite, "--rollout-html=out/report.html", "--rollout-compare=base",
        "--rollout-compare-fail=cold_start.p50:1000%",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["HTML report written to out/report.html"])
    page = (suite.path / "out" / "report.html").read_text()
    assert "local (baseline)" in page and '<section id="gate">' in page
    assert "gate passed: 1 check(s): 1 passed" in page
    assert "Gate passed: 1 stayed within the threshold." in page
    assert "<title>Rollout tax: run of " in page  # neither saved nor written as JSON


def test_the_ini_twin_names_the_page(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nrollout_html = from-ini.html\n")
    assert run(suite).ret == 0
    assert (suite.path / "from-ini.html").is_file()


def test_a_page_that_cannot_be_written_is_a_usage_error(suite: pytest.Pytester) -> None:
    (suite.path / "taken").mkdir()
    result = run(suite, "--rollout-html=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rollout-html=taken: is a directory; name a file"])
    result.stdout.no_fnmatch_line("*passed*")  # nothing ran


def test_without_matplotlib_the_page_is_a_usage_error_naming_the_extra(
    suite: pytest.Pytester, no_matplotlib
) -> None:
    result = run(suite, "--rollout-html=report.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --rollout-html=report.html: the HTML report needs matplotlib: "
        "pip install 'pytest-rollout-tax[html]'"
    ])  # fmt: skip


@needs("pytest_html")
def test_pytest_html_s_page_shows_the_summary_and_the_plots(suite: pytest.Pytester) -> None:
    result = run(suite, "--html=tests.html", "--self-contained-html")
    assert result.ret == 0, result.stdout.str()
    page = (suite.path / "tests.html").read_text()
    assert "<h2>Rollout tax</h2>" in page
    assert 'class="cards board"' in page  # the leaderboard, in pytest-html's own style
    assert "local hours: cold start " in page
    assert 'aria-label="Cold start (ECDF)"' in page
    assert 'aria-label="Worker-hours by part"' in page


@needs("pytest_jsonreport")
def test_pytest_json_report_carries_the_rollout_summary(suite: pytest.Pytester) -> None:
    result = run(suite, "--json-report", "--json-report-file=tests.json")
    assert result.ret == 0, result.stdout.str()
    data = json.loads((suite.path / "tests.json").read_text())
    summary = data["rollout_tax"]
    assert summary["schema"] == "rollout-tax/2" and "rollouts" not in summary
    local = summary["substrates"]["local"]
    assert local["rollouts"] == 3 and local["decomposition"]["cold_start"] > 0
    assert len(data["tests"]) == 3


@needs("pytest_jsonreport")
@needs("xdist")
def test_pytest_json_report_under_xdist_has_every_rollout(suite: pytest.Pytester) -> None:
    result = run(suite, "-p", "xdist", "-n", "2", "--json-report", "--json-report-file=t.json")
    assert result.ret == 0, result.stdout.str()
    data = json.loads((suite.path / "t.json").read_text())
    assert data["rollout_tax"]["substrates"]["local"]["rollouts"] == 3
