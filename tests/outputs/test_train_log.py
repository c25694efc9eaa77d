"""``--rollout-train-log``: the training section in the session's summary, its JSON report and
its page, against the substrates this session measured; a bad log stops the run before any
test (exit 4, one line)."""

from __future__ import annotations

import json
import re

import pytest
from support.train_logs import hand_checked_log

WORKLOAD = "def test_a(sandbox):\n    sandbox.exec('true')\n"


def test_the_section_is_in_the_summary_the_json_and_the_page(pytester: pytest.Pytester):
    pytester.makepyfile(test_workload=WORKLOAD)
    log = hand_checked_log(pytester.path / "run.jsonl")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--rollout-train-log={log}", "--rollout-train-gpus=8",
        "--rollout-json=r.json", "--rollout-html=p.html",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "training log: verl, 10 steps" in out
    assert "idle GPU-hours: 2.2 over this run on 8 GPUs" in out
    found = re.search(r"on local it would be (\d+\.\d) %", out)
    assert found and float(found[1]) > 20.0  # a measured tax on top of a tax-free run
    training = json.loads((pytester.path / "r.json").read_text())["train_log"]
    assert training["stack"] == "verl"
    assert training["what_if"]["report"] == "this session"
    assert [s["substrate"] for s in training["what_if"]["substrates"]] == ["local"]
    page = (pytester.path / "p.html").read_text()
    assert '<section id="train-log">' in page and "on local it would be" in page


def test_without_the_option_nothing_changes(pytester: pytest.Pytester):
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rollout-json=r.json")
    assert result.ret == 0
    assert "training log" not in result.stdout.str()
    assert "train_log" not in json.loads((pytester.path / "r.json").read_text())


def test_a_bad_log_is_a_usage_error_before_any_test(pytester: pytest.Pytester):
    pytester.makepyfile(test_workload=WORKLOAD)
    (pytester.path / "bad.jsonl").write_text('{"loss": 1}\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "--rollout-train-log=bad.jsonl")
    assert result.ret == 4
    errors = [line for line in result.errlines if "bad.jsonl" in line]
    assert len(errors) == 1 and "no key of a known stack" in errors[0]
    assert "Traceback" not in result.stderr.str()


def test_a_run_substrate_the_session_did_not_measure_is_an_output_error(
    pytester: pytest.Pytester,
):
    pytester.makepyfile(test_workload=WORKLOAD)
    log = hand_checked_log(pytester.path / "run.jsonl")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--rollout-train-log={log}", "--rollout-train-ran-on=e2b"
    )
    assert result.ret != 0
    assert "rollout-tax: error: --rollout-train-ran-on: ran on 'e2b'" in result.stdout.str()
