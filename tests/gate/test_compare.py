"""Unit tests of thresholds, checks and comparisons."""

from __future__ import annotations

import dataclasses
import math

import pytest
from support.reports import COLD, report, rollouts
from support.summary_runs import unwrapped

from pytest_rollout_tax.core.noise import ALPHA
from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.errors import ConfigError
from pytest_rollout_tax.gate import compare, sides
from pytest_rollout_tax.gate.checks import Check, Threshold
from pytest_rollout_tax.gate.compare import compare_reports
from pytest_rollout_tax.gate.lines import brief
from pytest_rollout_tax.report import schema
from pytest_rollout_tax.report.document import Report, SubstrateEntry
from pytest_rollout_tax.report.projection import Scale, project


def checks(*texts: str) -> list[Check]:
    return [Check.parse(text) for text in texts]


# -- thresholds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "relative"),
    [
        ("15%", 0.15, True),
        ("0.5%", 0.005, True),
        (" 15 % ", 0.15, True),
        ("0%", 0.0, True),
        ("5ms", 0.005, False),
        ("0.2s", 0.2, False),
        ("250us", 250e-6, False),
        ("250µs", 250e-6, False),
        ("1min", 60.0, False),
        ("2h", 7200.0, False),
        ("1e-3s", 0.001, False),
        (".5s", 0.5, False),
    ],
)
def test_threshold_parse(text: str, value: float, relative: bool) -> None:
    threshold = Threshold.parse(text)
    assert threshold.value == pytest.approx(value)
    assert threshold.relative is relative


@pytest.mark.parametrize("text", ["", "15", "abc", "-5%", "5kb", "nan%", "inf s", "1e999s", "%"])
def test_threshold_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Threshold.parse(text)


def test_threshold_crossing() -> None:
    relative = Threshold.parse("15%")
    assert not relative.crossed(1.0, 1.15, "cold_start")
    assert relative.crossed(1.0, 1.16, "cold_start")
    assert not relative.crossed(1.0, 0.5, "cold_start")  # faster
    assert not relative.crossed(0.0, 0.0, "cold_start")
    assert relative.crossed(0.0, 0.1, "cold_start")  # from nothing, any growth is > 15%
    absolute = Threshold.parse("5ms")
    assert not absolute.crossed(0.100, 0.105, "action")
    assert absolute.crossed(0.100, 0.1051, "action")
    hours = Threshold.parse("2h")  # worker_hours are in hours
    assert not hours.crossed(100.0, 102.0, "worker_hours")
    assert hours.crossed(100.0, 102.1, "worker_hours")
    assert Threshold.parse("3600s").allowed(0, "worker_hours") == 1.0


# -- checks -------------------------------------------------------------------------------------


def test_check_parse() -> None:
    check = Check.parse("cold_start.p95:15%")
    assert (check.metric, check.stat, check.name) == ("cold_start", "p95", "cold_start.p95")
    assert check.threshold == Threshold(0.15, True, "15%")
    assert Check.parse("worker_hours:10%").stat == "mean"
    assert Check.parse("worker_hours.mean:20h").threshold.value == 72000
    assert Check.parse("cost:10%").name == "cost.mean"
    for metric in compare.SAMPLE_METRICS:
        for stat in compare.STATS:
            assert Check.parse(f"{metric}.{stat}:1ms").name == f"{metric}.{stat}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cold_start.p95", "expected METRIC.STAT:THRESHOLD"),
        ("cold.p95:15%", "unknown metric 'cold'; one of cold_start, action"),
        ("cold_start.p96:15%", "unknown stat 'p96'; one of min, mean, p50"),
        ("cold_start:15%", "missing STAT after 'cold_start'"),
        ("cold_start.p95:15", "needs a unit"),
        ("cold_start.p95:fast", "malformed threshold 'fast'"),
        ("cold_start.p95:", "malformed threshold ''"),
        ("action.p50:-5ms", "malformed threshold '-5ms'"),
        ("worker_hours.p95:10%", "worker_hours is projected from means"),
        ("cost.p50:10%", "cost is projected from means; use cost.mean:10%"),
        ("cost.mean:5ms", "cost takes a percentage, e.g. cost.mean:10%"),
    ],
)
def test_check_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Check.parse(text)
    assert message in str(info.value)
    assert str(info.value).startswith(f"check={text!r}: ")  # names the value
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_check_parse_names_the_cli_option() -> None:
    with pytest.raises(ConfigError, match=r"^--fail='x\.p50:1%'"):
        Check.parse("x.p50:1%", option="--fail")


# -- comparing reports --------------------------------------------------------------------------

ALL_CHECKS = (
    "cold_start.p95:15%",
    "cold_start.mean:15%",
    "action.p50:5%",
    "step.p50:5%",
    "teardown.p95:5%",
    "trajectory.max:5%",
    "worker_hours:5%",
)


def test_ten_times_slower_fails() -> None:
    verdict = compare_reports(
        report(rollouts("local", COLD)), report(rollouts("local", COLD, 10)), checks(*ALL_CHECKS)
    )
    assert verdict.failed and verdict.exit_status == 1
    failed = [line for line in unwrapped(verdict.regression) if line.startswith("FAILED ")]
    assert len(failed) == len(ALL_CHECKS)
    line = next(x for x in failed if "cold_start.p95" in x)
    assert line.startswith("FAILED local cold_start.p95: baseline ")
    assert "now " in line and "+900.0%" in line and "threshold 15%" in line
    assert "permutation test of one test p=" in line
    assert "permutation test of one test p=" in next(x for x in failed if "worker_hours" in x)
    assert verdict.lines[len(verdict.summary)] == compare.heading("rollout tax regression")
    assert unwrapped(verdict.regression)[-1] == "gate failed: 7 check(s): 7 failed"


def test_a_failed_outcome_in_brief_names_its_change_and_threshold() -> None:
    slower = report(rollouts("local", COLD, 10))
    verdict = compare_reports(
        report(rollouts("local", COLD)), slower, checks("cold_start.p95:15%", "step.p50:1ms")
    )
    briefs = [brief(o) for o in verdict.outcomes]
    assert briefs[0] == "local cold_start.p95 +900.0% (threshold 15%)"
    assert briefs[1].startswith("local step.p50 +") and briefs[1].endswith("s (threshold 1ms)")


def test_equal_run_passes() -> None:
    same = report(rollouts("local", COLD))
    verdict = compare_reports(same, same, checks(*ALL_CHECKS, "cold_start.p95:0%"))
    assert not verdict.failed and verdict.exit_status == 0
    assert not verdict.regression
    assert unwrapped(verdict.summary)[-1] == "gate passed: 8 check(s): 8 passed"


def test_faster_run_passes() -> None:
    verdict = compare_reports(
        report(rollouts("local", COLD)), report(rollouts("local", COLD, 0.1)), checks(*ALL_CHECKS)
    )
    assert not verdict.failed
    assert "-90.0%" in "\n".join(verdict.summary)


def test_crossing_that_is_noise_does_not_fail() -> None:
    noisy = [*COLD[:-1], 1.6]  # one slow outlier: p95 and max up, the distribution not
    verdict = compare_reports(
        report(rollouts("local", COLD)),
        report(rollouts("local", noisy)),
        checks("cold_start.p95:15%", "cold_start.p50:15%"),
    )
    assert not verdict.failed
    line = next(x for x in unwrapped(verdict.summary) if x.startswith("not credible: "))
    assert "local cold_start.p95" in line and "crossed, but permutation test of one test p=" in line
    assert f">= {ALPHA}" in line
    assert unwrapped(verdict.summary)[-1] == (
        "gate passed: 2 check(s): 1 passed, 1 crossed inside the noise (not failed)"
    )


def test_too_few_samples_fall_back_to_the_threshold() -> None:
    few = COLD[:3]
    verdict = compare_reports(
        report(rollouts("local", few)),
        report(rollouts("local", few, 1.3)),
        checks("cold_start.p50:15%"),
    )
    assert verdict.failed
    assert (
        "threshold alone: 3/3 rollouts, the noise test needs 5 a side"
        in unwrapped(verdict.regression)[0]
    )


def test_baseline_without_raw_samples_uses_the_threshold() -> None:
    baseline = dataclasses.replace(report(rollouts("local", COLD)), rollouts=[])
    verdict = compare_reports(baseline, report(rollouts("local", COLD, 2)), checks("step.p50:5%"))
    assert verdict.failed and "threshold alone: 0/8 rollouts" in unwrapped(verdict.regression)[0]


def test_a_rise_must_credibly_exceed_the_threshold_not_just_zero() -> None:
    """20% slower against a 15% threshold crosses it, but the samples cannot tell 20% from
    15%: not credible. Twice as slow is."""
    base = report(rollouts("local", COLD))
    check = checks("cold_start.p50:15%")
    little = compare_reports(base, report(rollouts("local", COLD, 1.2)), check)
    assert not little.failed
    assert any(line.startswith("not credible: local cold_start.p50") for line in little.summary)
    assert compare_reports(base, report(rollouts("local", COLD, 2)), check).failed


def test_absolute_thresholds_raise_the_baseline_by_their_amount() -> None:
    figures = [1.0, 2.0]
    assert Threshold.parse("10%").raised(figures, 1.5, "cold_start") == [1.1, 2.2]
    assert Threshold.parse("5ms").raised(figures, 1.5, "action") == [1.005, 2.005]
    hours = Threshold.parse("100h").raised(figures, 1000.0, "worker_hours")  # 10 % of 1,000 h
    assert hours == pytest.approx([1.1, 2.2])


def test_the_noise_test_counts_rollouts_not_steps() -> None:
    """Steps of one rollout share a sandbox: each rollout gives one figure, the check's STAT
    over its own steps; worker_hours gives each rollout's projected worker time."""
    (side,) = sides.sides(report(rollouts("local", COLD)), Scale()).values()
    assert len(side.units("step", "p50")) == len(COLD)
    assert side.units("step", "max") == pytest.approx([c / 10 for c in COLD])
    assert side.units("step", "min") == pytest.approx([c / 20 for c in COLD])
    assert side.units("cold_start", "p95") == pytest.approx(COLD)
    worker = side.units("worker_hours", "mean")
    assert worker[0] == pytest.approx(COLD[0] + 150 * (COLD[0] * 0.15 / 2) + COLD[0] / 2)


def test_a_check_on_a_percentile_of_too_few_samples_warns() -> None:
    base = report(rollouts("local", COLD))  # 8 cold starts, 16 steps
    verdict = compare_reports(base, base, checks("cold_start.p95:15%", "cold_start.p50:15%",
                                                 "step.p90:5%", "step.max:5%"))  # fmt: skip
    warnings = [line for line in unwrapped(verdict.summary) if "is quoted from" in line]
    assert warnings == [
        "warning: local cold_start.p95 is quoted from 8/8 sample(s); a p95 needs 20 or more"
    ]
    assert unwrapped(verdict.summary)[-1] == "gate passed: 4 check(s): 4 passed"


def test_substrates_on_one_side_are_listed_not_errors() -> None:
    verdict = compare_reports(
        report(rollouts("local", COLD), rollouts("docker", COLD)),
        report(rollouts("local", COLD), rollouts("k8s", COLD)),
        checks("cold_start.p95:15%"),
    )
    assert not verdict.failed
    assert "only in the baseline (not compared): docker" in unwrapped(verdict.summary)
    assert "only in this run (no baseline): k8s" in unwrapped(verdict.summary)
    assert unwrapped(verdict.summary)[-1] == "gate passed: 1 check(s): 1 passed"


def test_no_common_substrate_applies_no_check() -> None:
    verdict = compare_reports(
        report(rollouts("docker", COLD)), report(rollouts("local", COLD, 10)), checks("step.p50:1%")
    )
    assert not verdict.failed and verdict.state == "not applicable"
    assert "no substrate in common" in unwrapped(verdict.summary)[-2]
    assert unwrapped(verdict.summary)[-1] == "gate not applicable: 1 check(s): 1 not judged"


def test_missing_metric_is_skipped() -> None:
    baseline = report(rollouts("local", COLD))
    current = report(
        [Rollout(**{**r.__dict__, "action_probes_s": []}) for r in rollouts("local", COLD)]
    )
    verdict = compare_reports(baseline, current, checks("action.p50:5%", "cold_start.p50:5%"))
    assert not verdict.failed
    assert "not judged: local action.p50 (no action in the current run)" in unwrapped(
        verdict.summary
    )
    assert unwrapped(verdict.summary)[-1] == "gate passed: 2 check(s): 1 passed, 1 not judged"


def test_worker_hours_are_reprojected_at_the_current_scale() -> None:
    baseline = report(rollouts("local", COLD), scale=Scale(rollouts=10, steps=3))
    current = report(rollouts("local", COLD))
    verdict = compare_reports(baseline, current, checks("worker_hours:0%"))
    assert not verdict.failed
    row = next(x for x in unwrapped(verdict.summary) if x.startswith("worker-hours"))
    assert row.split()[1:3] == row.split()[3:5]  # baseline == now: same latencies, same scale


def hours(entry: SubstrateEntry, scale: Scale) -> tuple[float | None, float | None]:
    """Worker-hours and tax-hours of a report's entry re-projected at ``scale``."""
    projected = project(entry.means(), scale)
    return projected.worker_hours, projected.tax_hours


def test_project_entry_matches_a_live_run() -> None:
    """A saved entry re-projected at its own scale gives the hours the live run reported."""
    scale = Scale(rollouts=1000, steps=40, think_time_s=0.5)
    entry = report(rollouts("local", COLD), scale=scale).substrates["local"]
    worker, tax = hours(entry, scale)
    assert worker == pytest.approx(entry.worker_hours)
    assert tax == pytest.approx(entry.tax_hours)
    assert hours(entry, Scale(rollouts=2000, steps=40, think_time_s=0.5)) == (
        pytest.approx(2 * worker),
        pytest.approx(2 * tax),
    )
    assert hours(dataclasses.replace(entry, action=None), scale) == (worker, None)
    assert hours(dataclasses.replace(entry, cold_start=None), scale) == (None, None)


def test_a_saved_run_with_recorded_think_time_reprojects_each_substrate_with_its_own() -> None:
    scale = Scale(rollouts=3600, steps=10, think_time_s=0.0, think_time_source="none")
    entry = report(rollouts("local", COLD), scale=scale).substrates["local"]
    free, _ = hours(entry, scale)
    recorded = dataclasses.replace(entry, think=dataclasses.replace(entry.step, mean=2.0))
    assert hours(recorded, scale)[0] == pytest.approx(free + 10 * 2.0)
    given = Scale(rollouts=3600, steps=10, think_time_s=1.0)  # the option wins
    assert hours(recorded, given)[0] == pytest.approx(free + 10 * 1.0)


def test_sample_metrics_are_defined_once() -> None:
    assert compare.SAMPLE_METRICS is schema.SAMPLE_METRICS
    assert sides.SAMPLE_METRICS is schema.SAMPLE_METRICS
    assert (*schema.SAMPLE_METRICS, "worker_hours", "cost", "infra_failed") == compare.METRICS


def test_table_per_substrate_fits_100_columns() -> None:
    verdict = compare_reports(
        report(rollouts("local", COLD), rollouts("docker-gvisor", COLD, 3)),
        report(rollouts("local", COLD, 2), rollouts("docker-gvisor", COLD, 40)),
    )
    text = "\n".join(verdict.summary)
    assert all(len(line) <= 80 for line in verdict.summary)
    for metric in ("cold_start", "action", "step", "teardown"):
        for stat in ("p50", "p95"):
            assert text.count(f"{metric} {stat}") == 2  # one row per substrate table
    assert sum(line.startswith("worker-hours ") for line in unwrapped(verdict.summary)) == 2
    header = next(x for x in unwrapped(verdict.summary) if x.startswith("local "))
    assert header.split() == ["local", "baseline", "now", "change", "change", "%", "n", "base/now"]
    assert "+100.0%" in text and "+1233.3%" in text


def test_notes_on_another_machine_and_other_workloads() -> None:
    baseline = report(rollouts("local", COLD))
    current = report(rollouts("local", COLD))
    current.machine = {**current.machine, "cpu_count": 8, "hostname_sha256": "cd"}
    current.rollouts[0]["test"] = "t.py::test_other[local-1]"
    lines = compare_reports(baseline, current).summary
    assert "note: the baseline ran on another machine (cpu_count 2 -> 8, hostname differ)" in lines
    assert any(x.startswith("note: the runs ran different workloads (0 only") for x in lines)


def test_change_and_percent_formatting() -> None:
    assert compare.change("action", 0.001, 0.0015) == "+500us"
    assert compare.change("action", 0.002, 0.001) == "-1ms"
    assert compare.change("action", 1.0, 1.0) == "0"
    assert compare.change("worker_hours", 100.0, 150.0) == "+50 h"
    assert compare.percent(1.0, 1.5) == "+50.0%"
    assert compare.percent(0.0, 1.0) == "n/a"
    assert compare.percent(None, 1.0) == "-"
    assert compare.value("worker_hours", 12345.0) == "12,345 h"


def test_verdict_lines_order() -> None:
    verdict = compare.Verdict(["a"], ["b"], failed=True)
    assert verdict.lines == ["a", compare.heading("rollout tax regression"), "b"]
    assert compare.heading("x", 20) == "======== x ========"
    assert math.isclose(ALPHA, 0.05)


def test_a_long_substrate_name_moves_above_its_table_to_fit() -> None:
    """Issue 30, item 10: every line of the comparison fits the width, a long name's too."""
    name = "docker-gvisor-session-pool-of-four"
    verdict = compare_reports(
        report(rollouts(name, COLD)),
        report(rollouts(name, COLD, 10)),
        checks("cold_start.p95:15%", "step.p50:5%"),
        width=80,
    )
    assert max(len(line) for line in verdict.lines) <= 80, "\n".join(verdict.lines)
    assert f"{name}:" in verdict.summary
    assert any(line.split()[:2] == ["figure", "baseline"] for line in verdict.summary)
    assert verdict.lines[len(verdict.summary)] == compare.heading("rollout tax regression", 80)
    wide = compare_reports(report(rollouts(name, COLD)), report(rollouts(name, COLD)), width=120)
    assert any(line.split()[:2] == [name, "baseline"] for line in wide.summary)


def _two_tests(factor_a: float, factor_b: float) -> Report:
    """One substrate's report of two tests, 8 rollouts each, scaled apart."""
    a = rollouts("local", COLD, factor_a)
    b = [Rollout(**{**r.__dict__, "test": r.test.replace("test_x", "test_y")})
         for r in rollouts("local", COLD, factor_b)]  # fmt: skip
    return report(a + b)


def test_a_change_in_one_test_fails_like_with_like_naming_the_test() -> None:
    """Issue 42, finding 1: one test 10x slower, the other unchanged. Pooled, the rank test
    called it noise; judged test by test, the total fails, and the line names the test that
    carries it and the one that does not."""
    verdict = compare_reports(_two_tests(1, 1), _two_tests(10, 1), checks("cold_start.p50:15%"))
    assert verdict.failed and verdict.state == "failed"
    lines = unwrapped(verdict.lines)
    assert [x.split(":")[0] for x in lines if x.startswith("local t.py::")] == [
        "local t.py",
        "local t.py",
    ]
    failed = next(x for x in lines if x.startswith("FAILED local cold_start.p50"))
    assert "permutation test within 2 tests p=" in failed
    [named] = [x for x in lines if " carried by: " in x]
    assert named.startswith("local cold_start.p50 carried by: t.py::test_x +900.0%, p=")
    assert "; not alone: t.py::test_y +0.0%" in named
    (outcome,) = verdict.outcomes
    assert [t.test for t in outcome.carriers] == ["t.py::test_x"]
    assert brief(outcome) == "local cold_start.p50 +395.8% (threshold 15%, in t.py::test_x)"


def test_a_test_on_one_side_only_is_named_and_kept_out() -> None:
    """A test only in this run does not enter the like-with-like figure: the check compares
    test_x with test_x alone, and says test_y was kept out."""
    baseline = report(rollouts("local", COLD))
    verdict = compare_reports(baseline, _two_tests(1, 10), checks("cold_start.p50:15%"))
    assert not verdict.failed
    (outcome,) = verdict.outcomes
    assert outcome.only_now == ("t.py::test_y",) and outcome.baseline == outcome.now
    assert (
        "local: tests kept out of the like-with-like figures (in this run only: t.py::test_y)"
        in unwrapped(verdict.lines)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("infra_failed.p50:5%", "infra_failed is a share of rollouts; use infra_failed.rate"),
        ("infra_failed.rate:5ms", "infra_failed.rate takes percentage points"),
    ],
)
def test_an_infra_failed_check_takes_its_rate_in_points(text, message):
    assert Check.parse("infra_failed:5%").name == "infra_failed.rate"
    assert Check.parse("infra_failed.rate:5%").threshold.allowed(0.10, "infra_failed") == 0.05
    with pytest.raises(ConfigError, match=message):
        Check.parse(text)


def test_the_gate_fails_a_raised_infra_failed_rate_and_passes_a_steady_one():
    """A rate that rose by more than the points fails, on 6 rollouts a side; one that held
    passes: each rollout a 0 or a 1 in the noise test."""

    def run(lost: int) -> Report:
        made = rollouts("docker", COLD[:6])
        for item in made[:lost]:
            item.outcome, item.infra_cause = "infra_failed", "lost"
        return report(made)

    [steady] = compare_reports(run(0), run(0), checks("infra_failed.rate:10%")).outcomes
    [raised] = compare_reports(run(0), run(6), checks("infra_failed.rate:10%")).outcomes
    assert steady.status == "passed" and (steady.baseline, steady.now) == (0.0, 0.0)
    assert raised.status == "failed" and raised.now == 1.0, raised
    assert "+100 points" in brief(raised)
