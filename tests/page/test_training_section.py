"""The page's training section: the summary's training lines beside the leaderboard, and the
makespan's distribution per substrate."""

import random
import re

from support.reports import build_report

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.page import html as html_report
from pytest_rollout_tax.page import plots
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.train_model import TrainModel
from pytest_rollout_tax.report.training import with_training


def tailed(substrate, heavy):
    rng = random.Random(3)
    return [
        Rollout(
            test=f"t.py::t[{substrate}-{i}]",
            substrate=substrate,
            kind=substrate,
            round=i + 1,
            outcome="passed",
            cold_start_s=rng.uniform(0.5, 1.5),
            teardown_s=0.1,
            steps=[Step("exec", 2.0 if heavy and i % 10 == 0 else 0.2, 0)],
            action_probes_s=[0.01],
        )
        for i in range(30)
    ]


def page_of(model):
    report = build_report(
        tailed("docker", True) + tailed("e2b", False),
        Scale(rollouts=100_000, steps=1),
        plugin_version="t",
        machine={},
        commit=None,
    )
    return html_report.render(with_training(report, model))


def test_the_training_section_follows_the_leaderboard_with_its_plot():
    page = page_of(TrainModel.parse("batch=16,train=5"))
    sections = re.findall(r'<section id="([^"]+)">', page)
    assert sections[:2] == ["leaderboard", "training"]
    training = page.split('<section id="training">')[1].split("</section>")[0]
    assert "training: sync steps of 16 rollouts on 16 slots" in training
    assert "ranking by training step: e2b, then docker at" in training
    assert "docker stragglers (the rollout that ends the batch): cold start" in training
    assert training.count("<svg") == 1 and "Makespan per training step" in training
    assert "the box holds the middle half of the steps" in training


def test_no_training_no_section():
    assert '<section id="training">' not in page_of(None)


def test_the_makespan_plot_draws_one_box_per_substrate():
    quantiles = {name: [float(i + k) for i in range(21)] for k, name in enumerate(("a", "b"))}
    svg = plots.makespans(quantiles, palette=plots.colors(["a", "b"]))
    assert svg.count("<svg") == 1 and ">a<" in svg and ">b<" in svg
    assert plots.makespans({"a": [1.0]}, palette={}) is None
