"""A summary on every run: the e2b page's command without a key ran nothing, and says why."""

from __future__ import annotations

import os
import shutil

from support.summary_runs import ROOT, joined, run_pytest


def test_a_run_where_nothing_ran_names_each_selected_substrate_with_its_reason(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    assert "E2B_API_KEY" not in os.environ
    code, lines = run_pytest(tmp_path, "example_suite", "--substrate=e2b,local", "-k", "e2b")
    assert code == 0, lines
    text = joined(lines)
    assert lines[0] == "no rollout ran: nothing measured"
    assert "e2b: ran no rollout: CredentialsMissing: e2b: E2B_API_KEY is not set" in text
    assert "local: ran no rollout: no rollout ran on it" in text
    assert max(map(len, lines)) <= 80
