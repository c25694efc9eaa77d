"""Every comparison carries its noise verdict: a real run of the example suite's bugfix test on
docker and docker-session; the transport line says what the gate's noise test said."""

from __future__ import annotations

import json
import re
import shutil

from support.summary_runs import ROOT, joined, run_pytest

from pytest_rollout_tax.core.noise import ALPHA, evidence
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.ranking import report_units


def test_the_transport_line_carries_the_gate_s_noise_verdict(sandbox_image, tmp_path):
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.rollout-tax.substrates.docker-session]\nkind = "docker"\ntransport = "session"\n'
    )
    code, lines = run_pytest(
        tmp_path, "example_suite/test_swe_bugfix.py", "--substrate=docker,docker-session",
        "--rollout-json=r.json", "-p", "xdist", "-n", "2",
    )  # fmt: skip
    assert code == 0, lines
    report = Report.from_dict(json.loads((tmp_path / "r.json").read_text()))
    text = joined(lines)
    line = re.search(r"docker-session vs docker, transport session vs exec: [^;]*; (.*)", text)
    assert line, text
    units = report_units(report, report.projection)
    mine, theirs = units["docker-session"], units["docker"]
    slower = sum(mine) / len(mine) > sum(theirs) / len(theirs)
    found = evidence(theirs, mine) if slower else evidence(mine, theirs)
    words = "beyond the noise" if found.p_value < ALPHA else "within the noise, not a finding"
    assert line.group(1).startswith(f"{words} ({found.why})")
