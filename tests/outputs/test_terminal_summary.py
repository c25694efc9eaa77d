"""The terminal summary as an output: the summary's lines first, every output's after them,
the gate's last."""

from __future__ import annotations

import json
import re

import pytest

WORKLOAD = "def test_a(sandbox):\n    sandbox.exec('true')\n"
OUTPUT = """
import json
import pytest
from pytest_rollout_tax.summary.terminal import render

@pytest.hookimpl(tryfirst=True)
def pytest_rollout_tax_report(config, report, summary, verdict):
    with open("rendered.json", "w") as out:
        json.dump(render(summary), out)
    return ["an output's line"]
"""


def test_the_summary_comes_first_and_the_gate_last(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makeconftest(OUTPUT)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rollout-compare=main")
    assert result.ret == 0, result.stdout.str()
    rendered = json.loads((pytester.path / "rendered.json").read_text())
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ rollout tax =+", line))
    after = lines[start + 1 :]
    assert after[: len(rendered)] == rendered
    assert after[len(rendered)] == "an output's line"
    assert after[len(rendered) + 1].startswith("rollout-tax: no baseline 'main' in .rollout-tax/")


def test_nothing_is_printed_without_a_rollout(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    pytester.makeconftest(OUTPUT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0
    assert "rollout tax" not in result.stdout.str()
    assert not (pytester.path / "rendered.json").exists()
