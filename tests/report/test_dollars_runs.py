"""Dollars in a real run: the example suite on local, docker and a stand-in e2b with the
machine's price set shows cost in the summary, the JSON and the page; ranking by cost can
differ from ranking by worker-hours."""

from __future__ import annotations

import json

import pytest
from support.reports import build_report, rollout
from support.workloads import example_modules

from pytest_rollout_tax.core.price import PriceOptions, Resources
from pytest_rollout_tax.core.prices import rate_for
from pytest_rollout_tax.page import plots
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.terminal import render_summary
from pytest_rollout_tax.text.units import ratio

plots.require()  # before pytester's in-process runs unload what they import


def test_a_priced_run_shows_dollars_in_the_summary_the_json_and_the_page(
    pytester, e2b_env, docker_client, sandbox_image
):
    pytester.makepyfile(**example_modules())
    result = pytester.runpytest(
        "--substrate=local,docker,e2b",
        "--substrate-opt=local.price.instance_hour=0.40",
        "--substrate-opt=local.price.share=8",
        "--substrate-opt=docker.price.instance_hour=0.40",
        "--substrate-opt=docker.price.share=8",
        "--rollout-think-time=5",
        "--rollout-json=report.json",
        "--rollout-html=report.html",
    )
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    for name in ("local", "docker", "e2b"):
        entry = report["substrates"][name]
        assert entry["cost_usd"] == pytest.approx(entry["cost"]["dollars"])
        assert entry["cost"]["environment_dollars"] < entry["cost"]["dollars"]  # think held
        assert f"{name} dollars: ${entry['cost_usd']:,.0f}" in text.replace("\n    ", " ")
    assert report["substrates"]["e2b"]["rate"]["source"].startswith("https://")
    assert report["substrates"]["local"]["rate"]["source"] == "yours"
    assert "(list price of " in text.replace("\n    ", " ")
    page = (pytester.path / "report.html").read_text()
    assert "dollars" in page and f"${report['substrates']['e2b']['cost_usd']:,.0f}" in page


def test_ranking_by_cost_can_differ_from_ranking_by_worker_hours():
    """A fast sandbox on a dear machine against a slower one on a cheap machine."""
    fast, slow = rollout("fast", 0.5), rollout("slow", 1.0)
    fast.rate = rate_for("local", Resources(), PriceOptions(instance_hour=4.0)).to_dict()
    slow.rate = rate_for("local", Resources(), PriceOptions(instance_hour=1.0)).to_dict()
    by_hours = build_report([fast, slow], Scale(), plugin_version="1", machine={}, commit=None)
    by_cost = build_report(
        [fast, slow], Scale(rank_by="cost"), plugin_version="1", machine={}, commit=None
    )
    assert [i.substrate for i in by_hours.ranking] == ["fast", "slow"]
    assert [i.substrate for i in by_cost.ranking] == ["slow", "fast"]
    decision = " ".join(render_summary(by_cost, width=200))
    assert "cheapest that isolates: slow, $" in decision and "worker-hours" in decision
    dollars = {i.substrate: i.dollars for i in by_cost.ranking}
    assert by_cost.ranking[1].ratio == pytest.approx(dollars["fast"] / dollars["slow"])
    assert f"fast at {ratio(by_cost.ranking[1].ratio)} the dollars" in decision


def test_a_stale_list_price_is_flagged():
    stale = rollout("e2b", 1.0)
    rate = rate_for("e2b", Resources(vcpus=2, gib=0.5), PriceOptions())
    stale.rate = rate.to_dict() | {"as_of": "2024-01-01"}
    report = build_report([stale], Scale(), plugin_version="1", machine={}, commit=None)
    text = " ".join(render_summary(report, width=200))
    assert "e2b's list price was read on 2024-01-01, over 365 days ago" in text


def test_a_substrate_without_a_price_is_named_with_how_to_price_it(pytester, docker_client):
    pytester.makepyfile(test_one="def test_one(sandbox):\n    assert sandbox.exec('true').ok\n")
    result = pytester.runpytest(
        "--substrate=local,docker", "--substrate-opt=local.price.instance_hour=0.40"
    )
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str().replace("\n    ", " ")
    assert "local dollars: $" in text and "docker dollars" not in text
    assert "dollars: no price for docker; set one with --substrate-opt " in text
    assert "NAME.price.vcpus=N and NAME.price.gib=G" in text
