"""--rollout-train and --rollout-rank-by=train through a real pytest run: two local variants of
equal mean rollout time, one with a heavy tail (a step that sleeps 2s in 5% of rollouts)."""

import json

import pytest

VARIANTS = """
[tool.rollout-tax.substrates.local-heavy]
kind = "local"

[tool.rollout-tax.substrates.local-light]
kind = "local"
"""

#: 20 rounds each: the heavy variant sleeps 2s in round 1 (5%), the light one 0.1s in each.
WORKLOAD = """
import pytest

@pytest.mark.trajectory(rounds=20)
def test_step(sandbox, substrate, rollout):
    heavy = substrate.name == "local-heavy"
    seconds = (2 if rollout.round == 1 else 0) if heavy else 0.1
    sandbox.exec(f"sleep {seconds}")
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyprojecttoml(VARIANTS)
    pytester.makepyfile(test_tail=WORKLOAD)
    return pytester


def test_training_ranks_the_heavy_tail_behind_where_worker_hours_call_them_even(suite):
    result = suite.runpytest(
        "--substrate=local-heavy,local-light",
        "--rollout-train=batch=16,slots=8,train=1",
        "--rollout-rank-by=train",
        "--rollout-json=out.json",
    )
    result.assert_outcomes(passed=40)
    report = json.loads((suite.path / "out.json").read_text())
    hours = {n: e["worker_hours"] for n, e in report["substrates"].items()}
    assert hours["local-heavy"] == pytest.approx(hours["local-light"], rel=0.15)
    training = report["training"]
    assert training["model"]["batch"] == 16 and training["model"]["given"] == [
        "batch", "slots", "train",
    ]  # fmt: skip
    assert [item["substrate"] for item in training["ranking"]] == ["local-light", "local-heavy"]
    heavy = training["substrates"]["local-heavy"]
    assert heavy["phase_s"] > training["substrates"]["local-light"]["phase_s"]
    assert heavy["straggler"]["command"] > 0.5
    summary = result.stdout.str()
    assert "fastest training step: local-light" in summary
    assert "training: sync steps of 16 rollouts on 8 slots" in summary
    assert "(defaults: mode=sync, lag=1, gpus=8, gpu_price=none, failed=retry)" in summary
    assert "ranking by training step: local-light, then local-heavy at" in summary
    differs = "the rankings differ: by training step local-light is ahead" in summary
    # the worker-hours order of two equal means is the run's: the line says whenever it differs
    assert differs == (report["ranking"][0]["substrate"] == "local-heavy")


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("batch=0", "batch=0: expected a whole number from 1 to 65,536"),
        ("batch=4,slots=8", "slots=8: more sandboxes than the batch's 4 rollouts"),
        ("mode=maybe", "mode=maybe: expected sync or async"),
        ("train=-1", "train=-1: expected a number from 0 to 86400"),
    ],
)
def test_a_bad_training_value_is_one_usage_line(pytester, value, named):
    result = pytester.runpytest(f"--rollout-train={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line] == [
        f"ERROR: --rollout-train={value!r}: {named}"
    ]


def test_no_training_option_no_training_section(pytester):
    pytester.makepyfile("def test_a(sandbox):\n    sandbox.exec('true')\n")
    result = pytester.runpytest("--rollout-json=out.json")
    result.assert_outcomes(passed=1)
    assert "training" not in json.loads((pytester.path / "out.json").read_text())
    assert not [line for line in result.outlines if line.startswith(("training", "fastest"))]
