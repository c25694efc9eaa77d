"""The training section: projected from whole measured rollouts, ranked by the step with the
noise verdict, and kept in the JSON without breaking older reports."""

import dataclasses
import json
import math
import random

import pytest
from support.reports import build_report

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.resample import simulate
from pytest_rollout_tax.report.train_model import TrainModel
from pytest_rollout_tax.report.training import project_training, training_model, with_training
from pytest_rollout_tax.report.training_units import Units, measured_units
from pytest_rollout_tax.summary.sections import summarize as summary_of

SCALE = Scale(rollouts=1_000_000, steps=2, think_time_source="none")


def made(substrate, index, cold, step, *, outcome="passed", think=None, teardown=0.0):
    steps = [Step("exec", step, 0, think_s=think), Step("exec", 0.0, 0, think_s=think)]
    return Rollout(
        test=f"t.py::t[{substrate}-{index}]", substrate=substrate, kind="local",
        round=index, outcome=outcome, cold_start_s=cold, teardown_s=teardown, steps=steps,
        action_probes_s=[0.0],
    )  # fmt: skip


def variant(substrate, n, heavy, seed=7):
    """Rollouts of equal mean: ``heavy`` sleeps 2s in a step of 5% of them, the other 0.1s in
    every one; the cold start varies as much on both (uniform 0.5-3.5s)."""
    rng = random.Random(seed)
    return [
        made(substrate, i, rng.uniform(0.5, 3.5), (2.0 if i % 20 == 0 else 0.0) if heavy else 0.1)
        for i in range(n)
    ]


def report_of(rollouts, scale=SCALE):
    return build_report(rollouts, scale, plugin_version="t", machine={}, commit=None)


def test_equal_means_with_a_heavy_tail_rank_even_by_worker_hours_and_behind_by_training():
    report = report_of(variant("heavy", 100, True) + variant("light", 100, False))
    by_hours = {item.substrate: item for item in report.ranking}
    assert by_hours["heavy"].worker_hours == pytest.approx(by_hours["light"].worker_hours)
    second = report.ranking[1]
    assert second.noise == "within noise", second.why
    report = with_training(
        dataclasses.replace(report, projection=dataclasses.replace(SCALE, rank_by="train")),
        TrainModel.parse("batch=64,train=10"),
    )
    ranking = report.training.ranking
    assert [item.substrate for item in ranking] == ["light", "heavy"]
    assert ranking[1].noise == "resolved" and ranking[1].why.startswith("bootstrap p=")
    heavy, light = report.training.substrates["heavy"], report.training.substrates["light"]
    assert heavy.phase_s > light.phase_s + 1.0
    assert heavy.straggler["command"] > 0.25 > 0.1 > light.straggler["command"]
    lines = summary_of(report)
    differs = [line for line in lines.decision if line.startswith("the rankings differ")]
    hours = {n: e.worker_hours for n, e in report.substrates.items()}
    if report.ranking[0].substrate == "heavy":  # the worker-hours put the heavy tail first
        assert len(differs) == 1 and "by training step light is ahead" in differs[0]
        assert f"{hours['heavy']:,.0f} vs light's" in differs[0]
    else:
        assert differs == []
    assert lines.decision[0].startswith("fastest training step: light, ")
    assert [name for name, _ in lines.rows] == ["light", "heavy"]


def test_the_rankings_differ_line_appears_exactly_when_the_orders_do():
    light = [made("light", i, 1.0, 0.1) for i in range(20)]
    heavy = [made("heavy", i, 1.0, 2.0 if i % 20 == 0 else 0.0) for i in range(20)]
    report = with_training(report_of(heavy + light), TrainModel.parse("batch=16"))
    # heavy: 0.1s less worker time per rollout on average, its tail the step's
    assert report.ranking[0].substrate == "heavy"
    assert report.training.ranking[0].substrate == "light"
    differs = [line for line in summary_of(report).decision if "rankings differ" in line]
    assert len(differs) == 1 and "heavy is ahead" in differs[0] and "worker-hours" in differs[0]
    same = with_training(
        report_of(light + [made("slow", i, 2.0, 0.2) for i in range(20)]), TrainModel()
    )
    assert not [line for line in summary_of(same).decision if "rankings differ" in line]


def test_the_bootstrap_of_exponential_rollouts_finds_the_closed_forms_makespan():
    rng = random.Random(11)
    units = Units()
    for _ in range(4_000):
        seconds = rng.expovariate(1.0)
        units.add(seconds, False, (seconds, 0.0, 0.0, 0.0, 0.0))
    # 32 rollouts on 8 slots: (n - k) / k + H_k
    expected = 24 / 8 + math.fsum(1 / i for i in range(1, 9))
    found = simulate(units, TrainModel(batch=32, slots=8), seed=1)
    assert found.phase_s == pytest.approx(expected, rel=0.03)
    low, high = found.interval()
    assert low < expected < high
    # as many slots as rollouts: the batch's maximum, H_32
    found = simulate(units, TrainModel(batch=32), seed=1)
    assert found.phase_s == pytest.approx(math.fsum(1 / i for i in range(1, 33)), rel=0.03)


def test_the_bootstrap_is_seeded():
    report = report_of(variant("heavy", 40, True))
    first = project_training(report, TrainModel(batch=16))
    assert project_training(report, TrainModel(batch=16)) == first


def test_failed_rollouts_are_retried_on_their_slot_or_dropped_for_a_replacement():
    ok = [made("x", i, 1.0, 0.0) for i in range(10)]
    failed = [made("x", 10 + i, 1.0, 0.0, outcome="failed") for i in range(10)]
    report = report_of(ok + failed)
    retried = project_training(report, TrainModel(batch=4, failed="retry")).substrates["x"]
    dropped = project_training(report, TrainModel(batch=4, failed="drop")).substrates["x"]
    clean = project_training(report_of(ok), TrainModel(batch=4)).substrates["x"]
    assert clean.phase_s == pytest.approx(1.0) and clean.straggler["retries"] == 0
    assert (retried.rollouts, retried.failed) == (20, 10)
    # half the tries fail and each costs 1s more on its slot: the batch waits for them
    assert retried.phase_s > 2.0 and retried.straggler["retries"] > 0.3
    # dropped: the replacements run on any free slot, so the batch ends sooner than retried
    assert clean.phase_s < dropped.phase_s < retried.phase_s


def test_recorded_think_time_is_in_each_rollouts_tail_and_unknown_think_says_so():
    rollouts = [made("x", i, 0.1, 0.0, think=3.0 if i == 0 else 0.5) for i in range(10)]
    training = project_training(report_of(rollouts), TrainModel(batch=10))
    assert training.think == "recorded"
    assert training.substrates["x"].straggler["think"] > 0.9
    units = measured_units(report_of(rollouts).rollouts, SCALE, {})["x"]
    assert max(units.seconds) == pytest.approx(0.1 + 2 * 3.0)
    bare = project_training(report_of([made("x", i, 0.1, 0.0) for i in range(10)]), TrainModel())
    assert bare.think == "none"
    header = summary_of(with_training(report_of(rollouts[:1]), TrainModel())).header
    assert "training think time: recorded per rollout" in header[-1]
    header = summary_of(with_training(report_of([made("x", 1, 0.1, 0.0)]), TrainModel())).header
    assert header[-1].endswith("the rollouts' tail is the environment's alone (no model time)")


def test_the_header_states_every_default():
    report = with_training(report_of([made("x", 1, 0.1, 0.0)]), TrainModel.parse("batch=8,train=5"))
    line = summary_of(report).header[-2]
    assert line.startswith("training: sync steps of 8 rollouts on 8 slots, the trainer's own 5s")
    assert line.endswith(
        "125,000 steps for 1,000,000 rollouts (defaults: slots=batch, mode=sync, lag=1, "
        "gpus=8, gpu_price=none, failed=retry)"
    )


def test_idle_gpu_hours_and_dollars_follow_the_wait_and_the_projection():
    rollouts = [made("x", i, 1.0, 0.0) for i in range(10)]
    training = project_training(
        report_of(rollouts, dataclasses.replace(SCALE, rollouts=3600 * 8)),
        TrainModel.parse("batch=8,train=3,gpus=2,gpu_price=2.5"),
    )
    entry = training.substrates["x"]
    # 3,600 steps of 1s waiting on 2 GPUs: 2 GPU-hours, $5; the trainer waits 1s of 4s
    assert training.steps == 3600
    assert entry.idle_gpu_hours == pytest.approx(2.0) and entry.dollars == pytest.approx(5.0)
    assert entry.wait_share == pytest.approx(0.25) and entry.step_s == pytest.approx(4.0)


def test_a_substrate_with_too_few_rollouts_is_not_tested_against_the_noise():
    report = report_of(
        [made("a", i, 1.0, 0.0) for i in range(3)] + [made("b", i, 2.0, 0.0) for i in range(3)]
    )
    ranking = project_training(report, TrainModel(batch=4)).ranking
    assert ranking[1].noise == "untested" and "needs 5 a side" in ranking[1].why


def test_the_section_survives_its_json_and_older_reports_load_without_it():
    report = with_training(
        report_of(variant("heavy", 20, True)), TrainModel.parse("batch=8,gpu_price=1")
    )
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert set(data["training"]) == {
        "model", "seed", "confidence", "rollouts", "steps", "think", "substrates", "ranking",
        "not_projected",
    }  # fmt: skip
    again = Report.from_dict(data)
    assert again.training == report.training
    del data["training"]
    assert Report.from_dict(data).training is None
    assert "training" not in report_of(variant("heavy", 4, True)).to_dict()


def test_a_broken_training_section_is_named():
    data = with_training(report_of(variant("x", 4, True)), TrainModel(batch=2)).to_dict()
    data["training"]["substrates"]["x"]["step_s"] = -1
    with pytest.raises(ValueError, match=r"training.substrates.x.step_s: negative value -1"):
        Report.from_dict(json.loads(json.dumps(data)))


def test_a_reprojection_keeps_the_saved_model_unless_another_is_asked():
    saved = with_training(report_of(variant("x", 4, True)), TrainModel(batch=2))
    assert training_model(None, saved, None) == TrainModel(batch=2)
    assert training_model(TrainModel(batch=3), saved, None) == TrainModel(batch=3)
    bare = report_of(variant("x", 4, True))
    assert training_model(None, bare, None) is None
    assert training_model(None, bare, "train") == TrainModel()
