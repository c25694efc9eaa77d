"""The HTML page: self-contained, every figure and table, the baseline and verdicts, its size at
10,000 rollouts, and a real browser (headless Chromium) laying it out without errors."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from support.browser import open_page
from support.reports import rollout

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.report import html as html_report
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.report.build import build_report, summarize
from pytest_rollout_tax.report.projection import Scale

MACHINE = {"cpu_count": 2, "python": "3.11.7", "platform": "Linux-x86_64"}
COMMIT = {"sha": "0123456789abcdef0123", "branch": "main", "dirty": True}
#: The figures of a run with samples everywhere, by their titles (aria-label).
FIGURES = [
    "Cold start (ECDF)",
    "Cold start by phase (mean seconds)",
    "No-op action (ECDF)",
    "Step (ECDF)",
]


def two_substrates(factor: float = 1.0) -> dict:
    rng = random.Random(factor)
    records = [
        rollout(name, cold * factor * rng.uniform(0.8, 1.2), step=step * factor)
        for name, cold, step in (("local", 0.002, 0.001), ("docker", 0.25, 0.05))
        for _ in range(8)
    ]
    records.append(rollout("docker", None, outcome="error", error="SandboxStartError: no image"))
    return build_report(
        records, Scale(think_time_s=0.5), plugin_version="1", machine=MACHINE, commit=COMMIT
    )


@pytest.fixture(scope="module")
def page() -> str:
    return html_report.render(two_substrates())


def test_the_page_is_self_contained_and_needs_no_script(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    for fetched in ("<script", "<link", "<img", "<iframe", "@import"):
        assert fetched not in page
    # every reference stays inside the page (anchors, the SVGs' own clip paths and marks)
    assert re.findall(r'(?:src|href)="(?!#)[^"]*"|url\((?!#)', page) == []


def test_the_page_shows_every_figure_table_and_fact(page: str) -> None:
    labels = re.findall(r'<svg[^>]* aria-label="([^"]*)"', page)
    assert labels[:4] == FIGURES
    assert labels[4].startswith("Worker-hours by part (spread ")
    for svg in re.findall(r"<svg[^>]*>", page):
        assert 'width="100%"' in svg and "viewBox=" in svg and "pt" not in svg.split("viewBox")[0]
    for section in ("summary", "cold-start", "latency", "worker-hours", "failures", "machine"):
        assert f'<section id="{section}">' in page
    assert 'id="gate"' not in page  # no baseline, no verdict
    assert "<td>SandboxStartError: no image</td><td>1</td>" in page
    assert "docker hours: cold start " in page  # the shares line of the summary
    assert "<td>0123456789abcdef0123 (dirty)</td>" in page and "<td>main</td>" in page
    assert "with 500ms think time per step" in page


def test_a_baseline_is_overlaid_and_the_verdict_shown() -> None:
    verdict = ["baseline: base.json", "FAILED docker cold_start.p95: baseline 1s, now 2s"]
    page = html_report.render(
        two_substrates(), baseline=two_substrates(0.5), baseline_label="base.json",
        verdict=verdict,
    )  # fmt: skip
    assert page.count("docker (baseline)") >= 4  # 3 ECDF legends and the worker-hours bar
    assert "stroke-dasharray" in page  # the baseline's curves are dashed
    assert '<section id="gate">' in page
    assert '<span class="failed">FAILED docker cold_start.p95: baseline 1s, now 2s</span>' in page


def test_text_from_the_run_is_escaped() -> None:
    hostile = rollout("docker", None, outcome="error", error="<script>alert(1)</script>")
    page = html_report.render(
        build_report([hostile], Scale(), plugin_version="1", machine=MACHINE, commit=None)
    )
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "No samples" in page  # a substrate that never started has no curves


def test_ten_thousand_rollouts_make_a_page_under_3_mb(tmp_path: Path) -> None:
    rng = random.Random(10_000)
    aggregate = Aggregate()
    for index in range(10_000):
        substrate = ("local", "docker")[index % 2]
        cold = rng.lognormvariate(-1.5, 0.4)
        aggregate.add(
            Rollout(
                test=f"t.py::test[{substrate}-{index}]", substrate=substrate, round=index,
                outcome="passed", cold_start_s=cold,
                phases={"create": cold * 0.6, "first_exec": cold * 0.4},
                teardown_s=rng.expovariate(20.0), trajectory_s=cold + 1,
                steps=[Step("exec", rng.expovariate(50.0), 0) for _ in range(150)],
                action_probes_s=[rng.expovariate(500.0) for _ in range(5)],
            ).to_dict()
        )  # fmt: skip
    report = summarize(aggregate, Scale(), plugin_version="1", machine=MACHINE, commit=None)
    path = html_report.write(tmp_path / "big.html", html_report.render(report, baseline=report))
    size = path.stat().st_size
    assert size < 3_000_000, size
    print(f"10,000 rollouts x 150 steps with a baseline: {size / 1e6:.2f} MB")


@pytest.mark.parametrize("width", [1000, 500])
def test_chromium_lays_the_page_out_without_errors(tmp_path: Path, width: int) -> None:
    page = html_report.render(
        two_substrates(), baseline=two_substrates(0.5), verdict=["FAILED docker x"]
    )
    path = html_report.write(tmp_path / "report.html", page)
    rendered = open_page(path, width=width)
    assert rendered.console == []
    assert [svg["label"] for svg in rendered.svgs][:4] == FIGURES
    assert len(rendered.svgs) == 5
    for svg in rendered.svgs:
        assert svg["width"] > 100 and svg["height"] > 50 and svg["marks"] > 10, svg
        assert svg["width"] <= rendered.viewport
    assert rendered.scroll_width <= rendered.viewport  # nothing wider than a phone's screen
