"""The gate's calibration: A/A false-alarm rate at its design level, power against a reference,
rounds for 95 % power, reproducibility, and the ``calibrate`` command."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import pytest
from support.reports import build_report

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.core.noise import ALPHA, MIN_SAMPLES
from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.gate import calibrate
from pytest_rollout_tax.gate.calibrate import Calibrator, populations, wilson
from pytest_rollout_tax.gate.compare import Check
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale

EXAMPLE_SUITE = Path(__file__).resolve().parents[2] / "example_suite"
SIGMA = 0.3  #: the log-normal cold starts' shape


def run_of(cold: list[float], substrate: str = "local", steps: int = 0) -> Report:
    """A report whose rollouts have these cold starts (and ``steps`` steps of cold/100 each)."""
    rollouts = [
        Rollout(
            test=f"t.py::test_x[{substrate}-{i}]",
            substrate=substrate,
            round=i,
            outcome="passed",
            cold_start_s=c,
            teardown_s=c / 4,
            trajectory_s=c * 2,
            steps=[Step("exec", c / 100, 0)] * steps,
            action_probes_s=[c / 50],
        )
        for i, c in enumerate(cold, start=1)
    ]
    return build_report(rollouts, Scale(), plugin_version="t", machine={}, commit=None)


def lognormal_draws(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.lognormvariate(0, SIGMA) for _ in range(n)]


def lognormal_quantiles(n: int) -> list[float]:
    """n evenly spaced quantiles of the log-normal: a sample without sampling error."""
    return [math.exp(SIGMA * NormalDist().inv_cdf((i - 0.5) / n)) for i in range(1, n + 1)]


ANY_GROWTH = [Check.parse("cold_start.p50:0%")]  #: the noise test alone decides


@pytest.mark.parametrize("n", [8, 30, 100])
def test_false_alarm_rate_of_a_over_a_is_the_design_level(n):
    """With a 0% threshold the gate is the one-sided Mann-Whitney test at ALPHA, so A/A
    resamples of a known distribution fail at ALPHA, within the rate's binomial interval."""
    comparisons = 2000
    rates = Calibrator(run_of(lognormal_draws(n, seed=n)), ANY_GROWTH, seed=1).rates(comparisons)
    low, high = wilson(rates.alarms, comparisons, z=2.576)  # 99 %
    assert low <= ALPHA <= high, (rates.rate, low, high)


def reference_power(n: int, slowdown: float, trials: int = 4000) -> float:
    """Fresh draws from the log-normal, scipy's Mann-Whitney and the p50 threshold: the power
    the gate should have, computed without any of this package's code."""
    np = pytest.importorskip("numpy")
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    a = rng.lognormal(0, SIGMA, (trials, n))
    b = rng.lognormal(0, SIGMA, (trials, n)) * (1 + slowdown)
    crossed = np.percentile(b, 50, axis=1) > np.percentile(a, 50, axis=1)
    p = stats.mannwhitneyu(b, a, alternative="greater", method="asymptotic", axis=1).pvalue
    hits = int(np.sum(crossed & (p < ALPHA)))
    return hits / trials


@pytest.mark.parametrize("n", [30, 100])
def test_power_for_a_known_shift_matches_the_reference(n):
    reference = reference_power(n, 0.2)
    calibrator = Calibrator(run_of(lognormal_quantiles(n)), ANY_GROWTH, seed=2)
    measured = calibrator.rates(2000, slowdown=0.2).rate
    # Monte-Carlo error of both (sd ~0.012 at n=30) plus the bootstrap's own bias
    assert measured == pytest.approx(reference, abs=0.04)


def test_power_grows_with_the_slowdown_and_the_rounds():
    calibrator = Calibrator(run_of(lognormal_quantiles(30)), ANY_GROWTH, seed=3)
    assert calibrator.rates(500, 0.1).rate < calibrator.rates(500, 0.3).rate
    assert calibrator.rates(500, 0.2, rounds=10).rate < calibrator.rates(500, 0.2, rounds=60).rate


def test_rounds_for_95_reaches_the_target_and_one_fewer_does_not():
    calibrator = Calibrator(run_of(lognormal_quantiles(30)), ANY_GROWTH, seed=4)
    rounds = calibrator.rounds_for(0.2)
    assert rounds is not None and 30 < rounds < 200  # power at 30 is ~0.75
    assert calibrator.rates(1000, 0.2, rounds=rounds + 10).rate >= 0.93
    assert calibrator.rates(1000, 0.2, rounds=rounds // 2).rate < 0.9


def test_the_same_seed_gives_the_same_figures():
    report = run_of(lognormal_draws(20, seed=5))
    first = Calibrator(report, ANY_GROWTH, seed=11).run(500, 0.2).to_dict()
    again = Calibrator(report, ANY_GROWTH, seed=11).run(500, 0.2).to_dict()
    other = Calibrator(report, ANY_GROWTH, seed=12).run(500, 0.2).to_dict()
    assert first == again
    assert first != other


def test_resamples_draw_whole_rollouts_per_workload():
    """Every resampled rollout keeps its own steps; each workload keeps its own count."""
    report = run_of([1.0, 2.0, 3.0], steps=4)
    other = run_of([10.0, 20.0], steps=1)
    for item in other.rollouts:
        item["test"] = item["test"].replace("test_x", "test_y")
    report = dataclasses.replace(report, rollouts=[*report.rollouts, *other.rollouts])
    (population,) = populations(report).values()
    assert sorted(len(group) for group in population.workloads) == [2, 3]
    drawn = population.resample(random.Random(0))
    assert len(drawn) == 5
    assert sum(len(d["step"]) for d in drawn) in range(5, 4 * 3 + 2 * 1 + 1)
    for draw in drawn:  # each rollout keeps its own steps: cold/100 each
        assert draw["step"] == (draw["cold_start"][0] / 100,) * len(draw["step"])
    slower = population.resample(random.Random(0), rounds=7, factor=2.0)
    assert len(slower) == 14
    assert min(d["cold_start"][0] for d in slower) >= 2.0
    assert slower[0]["step"][0] == pytest.approx(slower[0]["cold_start"][0] / 100)


def test_default_slowdown_is_twice_the_largest_threshold():
    report = run_of([1.0] * 10)  # action = cold/50 = 20ms
    checks = [Check.parse("cold_start.p50:15%"), Check.parse("action.p50:5ms")]
    assert Calibrator(report, checks).default_slowdown() == pytest.approx(2 * 0.25)
    assert Calibrator(report, checks[:1]).default_slowdown() == pytest.approx(0.30)


def test_a_run_without_raw_samples_or_checks_is_refused():
    report = run_of([1.0] * 5)
    with pytest.raises(ConfigError, match="at least one check"):
        Calibrator(report, [])
    with pytest.raises(ConfigError, match="no rollouts"):
        Calibrator(dataclasses.replace(report, rollouts=[]), ANY_GROWTH)
    with pytest.raises(ConfigError, match="at least 500"):
        Calibrator(report, ANY_GROWTH).run(100)


@pytest.mark.parametrize(("text", "value"), [("20%", 0.2), ("0.35", 0.35), (" 5 % ", 0.05)])
def test_slowdown_parses(text, value):
    assert calibrate.parse_slowdown(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0%", "-5%", "fast", "nan"])
def test_bad_slowdown_is_refused(text):
    with pytest.raises(ConfigError, match="slowdown"):
        calibrate.parse_slowdown(text)


# -- the command ------------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def saved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_of(lognormal_draws(30, seed=9)).to_dict()))
    return path


def test_calibrate_prints_and_writes_the_figures(saved, tmp_path):
    out_json = tmp_path / "cal.json"
    status, out, err = cli(
        "calibrate", str(saved), "--fail", "cold_start.p50:10%", "--slowdown", "30%",
        "--comparisons", "500", "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    assert "false-alarm rate (A/A):" in out
    assert "power at +30% slowdown:" in out
    assert "rounds for 95% power at +30%:" in out
    data = json.loads(out_json.read_text())
    assert set(data) >= {
        "comparisons", "false_alarm_rate", "power", "slowdown", "rounds_for_95", "checks"
    }  # fmt: skip
    assert data["comparisons"] == 500
    assert data["slowdown"] == pytest.approx(0.3)
    assert data["checks"][0]["check"] == "cold_start.p50:10%"
    assert 0 <= data["false_alarm_rate"] < 0.05 < data["power"]
    # issue 42: the rounds each substrate needs to see each threshold, from its own noise
    [need] = data["rounds_needed"]
    assert need["check"] == "cold_start.p50:10%" and need["cv"] > 0 and need["rounds"] >= 2
    assert (
        f"  {need['substrate']} cold_start.p50:10%: noise CV {need['cv']:.0%}, "
        f"{need['rounds']} rounds"
    ) in out.splitlines()
    again = cli(
        "calibrate", str(saved), "--fail", "cold_start.p50:10%", "--slowdown", "30%",
        "--comparisons", "500",
    )  # fmt: skip
    assert again[1].splitlines()[:6] == out.splitlines()[:6]  # seeded: the same figures


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail", "cold_start.p50:10%", "--comparisons", "100"], "at least 500"),
        (["--fail", "cold_start.p50:10%", "--slowdown", "0"], "slowdown"),
        (["--fail", "cold.p50:10%"], "unknown metric"),
        ([], "--fail"),
    ],
)
def test_calibrate_bad_input_is_one_line_and_exit_4(saved, args, message):
    status, _, err = cli("calibrate", str(saved), *args)
    assert status == 4
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_calibrate_a_missing_run_is_exit_4(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = cli("calibrate", "nope", "--fail", "cold_start.p50:10%")
    assert status == 4
    assert "RUN" in err


# -- its advice, on a real run -----------------------------------------------------------------


def test_the_advised_rounds_are_ones_the_gate_can_judge_on_a_real_run(tmp_path):
    """A 6-round run of the example bug fix on local; a wide threshold makes 95% power cheap.
    The advice never goes below the noise test's minimum a side, and A/A resamples at the
    advised rounds fail no more often than the gate's ALPHA (its 99% interval reaches it);
    below the minimum, the threshold alone decides and fails far more often."""
    shutil.copytree(EXAMPLE_SUITE, tmp_path / "example_suite")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         "example_suite/test_swe_bugfix.py", "--rollout-rounds=6", "--rollout-json=run.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = Report.from_dict(json.loads((tmp_path / "run.json").read_text()))
    checks = [Check.parse("cold_start.p50:0%"), Check.parse("step.p50:0%")]
    calibrator = Calibrator(report, checks, seed=5)
    result = calibrator.run(500, slowdown=1.0)
    assert result.rounds_for_95 is not None and result.rounds_for_95 >= MIN_SAMPLES
    rerun = Calibrator(report, checks, seed=6).rates(1000, rounds=result.rounds_for_95)
    low, _ = wilson(rerun.alarms, 1000, z=2.576)
    assert low <= len(checks) * ALPHA, rerun.rate  # any of 2 checks at ALPHA each
    assert result.advised_false_alarms is not None
    below = Calibrator(report, checks, seed=6).rates(1000, rounds=2)
    assert below.rate > 2 * rerun.rate  # what the old advice of 2 rounds would have given
    lines = calibrate.render(result, "run", calibrator.populations)
    assert f"false-alarm rate (A/A) at {result.rounds_for_95} rounds: " in "\n".join(lines)
