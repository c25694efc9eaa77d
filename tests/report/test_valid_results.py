"""Only valid results are ranked or compared, and the floor is named as the floor: a real run
of the example suite's bugfix test on local, docker and a docker variant whose every rollout
fails (its Python broken by PYTHONHOME), and the ranking's rules on partial failures."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from support.summary_runs import ROOT, joined, run_pytest

from pytest_rollout_tax.report.document import Report, SubstrateEntry
from pytest_rollout_tax.report.projection import Projected, Scale
from pytest_rollout_tax.report.ranking import rank
from pytest_rollout_tax.summary.lines import decision_lines

BROKEN = """\
[tool.rollout-tax.substrates.docker-broken]
kind = "docker"
transport = "session"
env = {PYTHONHOME = "/nonexistent"}
"""
NO_RESULT = "docker-broken: no valid result (5 of 5 failed: test failed: AssertionError)"
RATIO = re.compile(r"\d(\.\d+)?x\b")


@pytest.fixture(scope="module")
def broken_run(sandbox_image, tmp_path_factory):
    root = tmp_path_factory.mktemp("broken")
    shutil.copytree(ROOT / "example_suite", root / "example_suite")
    (root / "pyproject.toml").write_text(BROKEN)
    code, lines = run_pytest(
        root, "example_suite/test_swe_bugfix.py", "--substrate=local,docker,docker-broken",
        "--rollout-json=r.json", "--rollout-html=r.html", "-p", "xdist", "-n", "2",
    )  # fmt: skip
    assert code == 1, "\n".join(lines)  # the broken variant's tests fail
    page = (root / "r.html").read_text()
    return lines, json.loads((root / "r.json").read_text()), page


def test_a_substrate_whose_every_rollout_failed_has_no_ratio_anywhere(broken_run):
    lines, report, page = broken_run
    text = joined(lines)
    assert NO_RESULT in text  # the decision
    row = next(line for line in lines if line.startswith("docker-broken "))
    assert "5 (5)  no valid result (why: above)" in row  # the table
    assert text.count("AssertionError") == 2  # said once, and in the variant's comparison
    assert "docker-broken vs docker: docker-broken: no valid result (5 of 5" in text  # variant
    for line in lines:
        if "docker-broken" in line and "rollouts succeeded" not in line:  # 5x: a count
            assert not RATIO.search(line), line
    item = next(i for i in report["ranking"] if i["substrate"] == "docker-broken")
    assert item["ratio"] is None and item["worker_hours"] is None
    assert item["no_valid_result"] == NO_RESULT.split(": ", 1)[1]
    assert "docker-broken" not in json.dumps(report["spread"])
    assert "no valid result (5 of 5 failed: test failed: AssertionError)" in page
    assert max(map(len, lines)) <= 80


def test_the_floor_is_named_as_the_floor_and_one_candidate_is_not_cheapest(broken_run):
    lines, report, _ = broken_run
    assert lines[0].startswith("docker: ") and "cheapest" not in joined(lines[:3])
    local = next(i for i in report["ranking"] if i["substrate"] == "local")
    assert local["floor"] and local["noise"] is None
    assert f"(floor: local, {local['worker_hours']:,.0f} worker-hours)" in joined(lines[:3])
    docker = next(i for i in report["ranking"] if i["substrate"] == "docker")
    assert docker["ratio"] == 1.0  # the reference is the cheapest that isolates


def _entry(kind: str, hours: float, failures: int = 0) -> SubstrateEntry:
    projected = Projected(worker_hours=hours, tax_hours=hours / 2, decomposition=None)
    return SubstrateEntry(kind=kind, rollouts=4, failures=failures, projected=projected,
                          failure_reasons={"test failed: X": failures})  # fmt: skip


def test_partial_failures_are_ranked_beside_their_success_rate_and_flagged():
    substrates = {
        "local": _entry("local", 100.0),
        "docker": _entry("docker", 400.0),
        "docker-session": _entry("docker", 200.0, failures=1),
        "docker-pool": _entry("docker", 500.0),
    }
    ranking = rank(substrates, {}, Scale())
    assert [i.substrate for i in ranking] == ["local", "docker-session", "docker", "docker-pool"]
    report = Report(Scale(), substrates, ranking, plugin_version="test", machine={})
    lines = decision_lines(report)
    assert lines[0].startswith(
        "cheapest that isolates: docker-session, 200 worker-hours and 100 tax-hours (75% "
        "succeeded, below the others' 100%) (floor: local, 100 worker-hours); next docker at 2.00x"
    )
    assert (
        lines[1] == "ranking by worker-hours: docker-session, then docker 2.00x, docker-pool 2.50x"
    )
