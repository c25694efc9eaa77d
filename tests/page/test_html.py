"""The HTML page: it leads with the decision (the verdict, then the leaderboard in the JSON's
worker-hours order), says what the terminal says in sections, draws plots that read right, fits
a phone, names the run, stays self-contained and small, and a real browser (headless Chromium)
lays it out without errors."""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from support.browser import Rendered, open_page
from support.reports import build_report, rollout

from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.fleet.burst import BurstLevel
from pytest_rollout_tax.fleet.pool import PoolStats
from pytest_rollout_tax.gate.compare import Check, compare_reports, table_rows
from pytest_rollout_tax.gate.sides import sides
from pytest_rollout_tax.page import html as html_report
from pytest_rollout_tax.page import plots
from pytest_rollout_tax.report.aggregate import Aggregate
from pytest_rollout_tax.report.build import Fleet, summarize
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.summary.lines import few_samples_lines, ranked_names
from pytest_rollout_tax.summary.sections import burst_line, fleet_lines, shares_line
from pytest_rollout_tax.summary.sections import summarize as summarize_lines
from pytest_rollout_tax.summary.variants import comparison_lines
from pytest_rollout_tax.summary.verdicts import judge_of

MACHINE = {"cpu_count": 2, "python": "3.11.7", "platform": "Linux-x86_64"}
COMMIT = {"sha": "0123456789abcdef0123", "branch": "main", "dirty": True}
#: Scientific notation in a tick label: 2.4x10^-1 (the times sign, superscripts), 1e-3, $10^{-1}$.
SCIENTIFIC = re.compile("\u00d7|\\de[-+]?\\d|\\^|\\$|[\u2070-\u209f\u00b9\u00b2\u00b3]")
#: What a phone shows: CSS px.
PHONE = 400


def run(
    *substrates: tuple[str, float, float], factor: float = 1.0, seed: str = "", n: int = 8, **kw
) -> Report:
    """A report of ``n`` rollouts per (name, cold start, step), each scattered by 20%."""
    rng = random.Random(f"{substrates}{seed or factor}")
    records = [
        dataclasses.replace(
            rollout(name, cold * factor * rng.uniform(0.8, 1.2), step=step * factor),
            kind=name.split("-")[0], transport="session" if "session" in name else "exec",
        )
        for name, cold, step in substrates
        for _ in range(n)
    ]  # fmt: skip
    records += kw.pop("extra", [])
    return build_report(
        records, Scale(think_time_s=0.5), plugin_version="1", machine=MACHINE, commit=COMMIT,
        **kw,
    )  # fmt: skip


LOCAL, DOCKER = ("local", 0.002, 0.001), ("docker", 0.3, 0.05)
SESSION = ("docker-session", 0.32, 0.004)


def local_only() -> Report:
    return run(LOCAL)


def docker_only() -> Report:
    """Cold starts 0.24 to 0.36 s: less than a decade, where a log axis had no plain tick."""
    return run(DOCKER)


def fleet_run() -> Report:
    burst_levels = [
        BurstLevel(1, [0.3], 0.3),
        BurstLevel(4, [0.35, 0.4, 0.45, 0.5], 0.5),
        BurstLevel(16, [1.2] * 14, 2.0, Counter({"SandboxStartError: timed out": 2})),
    ]
    fleet = Fleet(
        bursts={"docker": burst_levels},
        pools={"docker-session": PoolStats(size=2, hits=6, misses=2, idle_sandbox_s=3.0,
                                           creation_s=[0.3] * 8)},
        workers=64,
    )  # fmt: skip
    failed = rollout("docker", None, outcome="error", error="SandboxStartError: no image")
    return run(LOCAL, DOCKER, SESSION, fleet=fleet, extra=[failed])


def regressed() -> tuple[Report, Report, object]:
    """A run whose docker cold starts doubled against its baseline: a credible failure."""
    baseline, now = run(LOCAL, DOCKER), run(LOCAL, ("docker", 0.6, 0.1))
    checks = [Check.parse(text) for text in ("cold_start.p50:15%", "worker_hours:900%")]
    verdict = compare_reports(baseline, now, checks, baseline_label="main.json")
    assert verdict.failed
    return now, baseline, verdict


def render(report: Report, tmp_path: Path, width: int, **kw) -> tuple[str, Rendered]:
    page = html_report.render(report, title=html_report.run_title(report, "now.json"), **kw)
    path = html_report.write(tmp_path / f"report-{width}.html", page)
    return page, open_page(path, width=width)


PAGES = {
    "local-only": lambda: (local_only(), {}),
    "docker-only": lambda: (docker_only(), {}),
    "fleet": lambda: (fleet_run(), {}),
    "regressed": lambda: against(*regressed()),
}


def against(report: Report, baseline: Report, verdict) -> tuple[Report, dict]:
    return report, {"baseline": baseline, "baseline_label": "main.json", "verdict": verdict}


@pytest.fixture(scope="module", params=[(name, w) for name in PAGES for w in (1000, PHONE)],
                ids=lambda p: f"{p[0]}-{p[1]}px")  # fmt: skip
def rendered(request, tmp_path_factory) -> tuple[Report, str, Rendered, int]:
    name, width = request.param
    report, options = PAGES[name]()
    page, shown = render(report, tmp_path_factory.mktemp(name), width, **options)
    return report, page, shown, width


def test_the_leaderboard_ranks_as_the_json_and_comes_first(rendered) -> None:
    report, _page, shown, _width = rendered
    by_hours = sorted(report.substrates, key=lambda n: report.substrates[n].worker_hours)
    assert ranked_names(report) == by_hours
    assert [row["name"].lstrip("0123456789") for row in shown.board] == by_hours
    assert shown.sections[0] == "leaderboard"
    first_plot = min(svg["top"] for svg in shown.svgs)
    assert all(row["nameBox"]["bottom"] < first_plot for row in shown.board)


def test_no_console_message_and_every_plot_laid_out(rendered) -> None:
    _report, _page, shown, _width = rendered
    assert shown.console == []
    assert len(shown.svgs) >= 5
    for svg in shown.svgs:
        assert svg["width"] > 100 and svg["height"] > 50 and svg["marks"] > 10, svg


def test_no_axis_label_is_in_scientific_notation(rendered) -> None:
    _report, _page, shown, _width = rendered
    for svg in shown.svgs:
        assert [t for t in svg["texts"] if SCIENTIFIC.search(t)] == [], svg["label"]
        ticks = [t for t in svg["texts"] if re.fullmatch(r"[\d.,]+(µs|ms|s| h)", t)]
        assert len(ticks) >= 2, (svg["label"], svg["texts"])  # plain ticks, at least two


def test_the_page_fits_the_screen_and_no_table_is_clipped(rendered) -> None:
    _report, _page, shown, width = rendered
    assert shown.viewport == width
    assert shown.scroll_width <= width  # nothing scrolls sideways
    for table in shown.tables:
        assert table["scrollWidth"] <= table["clientWidth"] <= table["containerWidth"], table
        assert table["right"] <= width, table
    for svg in shown.svgs:
        assert svg["right"] <= width


def test_on_a_phone_the_substrate_and_worker_hours_show_and_plot_text_is_readable(
    rendered,
) -> None:
    report, _page, shown, width = rendered
    if width != PHONE:
        pytest.skip("the phone's rules")
    for row in shown.board:  # on screen without scrolling sideways
        assert row["nameBox"]["left"] >= 0 and row["hoursBox"]["right"] <= width, row
        hours = report.substrates[row["name"][1:]].worker_hours
        assert row["hours"].startswith(f"{hours:,.0f}")
    for svg in shown.svgs:
        assert svg["minFontPx"] >= 11, svg["label"]


def test_the_title_names_the_run_and_its_commit(rendered) -> None:
    _report, page, shown, _width = rendered
    assert shown.title == "Rollout tax: now.json @ 0123456789ab-dirty"
    assert "<h1>Rollout tax: now.json @ 0123456789ab-dirty</h1>" in page


def test_a_regression_is_the_first_thing_said(tmp_path: Path) -> None:
    report, baseline, verdict = regressed()
    page, shown = render(report, tmp_path, 1000, baseline=baseline, baseline_label="main.json",
                         verdict=verdict)  # fmt: skip
    assert shown.verdict is not None
    assert shown.verdict["top"] < min(svg["top"] for svg in shown.svgs)
    assert shown.verdict["text"].startswith(
        "Gate failed: 1 of 4 check(s) found a credible slowdown beyond the threshold: docker "
        "cold_start.p50 +"
    )
    assert "3 stayed within the threshold" in shown.verdict["text"]
    assert page.count('class="change credible"') == 1  # docker's cold start p50, and only it
    assert "local cold_start.p50" not in shown.verdict["text"]
    assert re.search(r'class="change credible"[^>]*>\+\d+\.\d% credible<', page)
    assert '<section id="gate">' in page
    assert '<li class="failed">FAILED docker cold_start.p50' in page
    assert page.count("(baseline)") >= 4  # 3 ECDF legends and the worker-hours bars
    assert "stroke-dasharray" in page  # the baseline's curves are dashed


def test_a_change_inside_the_noise_is_said_to_be_one_and_not_marked() -> None:
    baseline, now = run(DOCKER, seed="same"), run(DOCKER, factor=1.03, seed="same")
    verdict = compare_reports(baseline, now, [Check.parse("cold_start.p50:1%")],
                              baseline_label="main")  # fmt: skip
    assert [o.status for o in verdict.outcomes] == ["noise"]
    page = html_report.render(now, baseline=baseline, baseline_label="main", verdict=verdict)
    assert (
        "Gate passed: 1 crossed the threshold by a change inside the noise, not a failure: "
        "docker cold_start.p50 +"
    ) in page
    assert 'class="change noise"' not in page and 'class="change credible"' not in page
    assert "noise</span>" not in page  # a change inside the noise is not marked on the board


def test_every_section_the_terminal_has_is_there_with_the_terminals_lines() -> None:
    report = fleet_run()
    page = html_report.render(report)
    for section in ("leaderboard", "comparisons", "figures", "cold-start", "latency",
                    "worker-hours", "fleet", "failures", "machine"):  # fmt: skip
        assert f'<section id="{section}">' in page
    substrates = report.substrates
    expected = [
        *comparison_lines(substrates, judge_of(report)),  # docker-session vs docker
        burst_line("docker", substrates["docker"].burst),
        *fleet_lines("docker-session", substrates["docker-session"]),  # pool and fleet
        *few_samples_lines(substrates),
        *[line for n, s in substrates.items() if (line := shares_line(n, s))],
    ]
    for line in expected:
        assert html_report.e(line) in page, line
    assert '<td data-label="rollouts">9</td><td data-label="failed">1</td>' in page  # docker
    assert "knee at 16" in page and '<td data-label="concurrency">16 (knee)</td>' in page
    assert '<td data-label="success">88%</td>' in page  # 2 of 16 failed at that level
    assert "warm pool of 2" in page and '<td data-label="hits">6</td>' in page
    assert "fleet of 64 workers" in page
    assert '<td data-label="reason">SandboxStartError: no image</td>' in page


def test_a_section_without_its_data_is_left_out() -> None:
    page = html_report.render(local_only())
    for absent in ("comparisons", "fleet", "gate"):
        assert f'id="{absent}"' not in page
    assert "No rollout failed." in page


def test_the_tax_cap_note_stands_beside_the_bars_it_explains() -> None:
    """A probe slower than the mean step leaves no command part: the note says why."""
    report = run(("docker", 0.3, 0.05))
    entry = report.substrates["docker"]
    entry.action = dataclasses.replace(entry.action, mean=entry.step.mean * 2)
    page = html_report.render(report)
    worker_hours = page[page.index('<section id="worker-hours">') :]
    assert "its per-step tax is capped at the step" in worker_hours.split("</section>")[0]


def test_a_substrate_keeps_its_colour_whatever_else_ran() -> None:
    alone = plots.colors(["docker"])
    together = plots.colors(["local", "docker", "docker-session", "my-custom"])
    assert alone["docker"] == together["docker"]
    assert plots.colors(["my-custom"]) == {"my-custom": together["my-custom"]}
    assert len({together[n] for n in ("local", "docker", "docker-session")}) == 3
    parts = set(plots.PART_COLORS.values()) | set(plots.PHASE_PALETTE)
    assert parts.isdisjoint(plots.SUBSTRATE_PALETTE)  # no colour means two things


def test_the_page_is_self_contained_and_needs_no_script() -> None:
    page = html_report.render(fleet_run())
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    for fetched in ("<script", "<link", "<img", "<iframe", "@import"):
        assert fetched not in page
    assert re.findall(r'(?:src|href)="(?!#)[^"]*"|url\((?!#)', page) == []


def test_text_from_the_run_is_escaped() -> None:
    hostile = rollout("docker", None, outcome="error", error="<script>alert(1)</script>")
    page = html_report.render(
        build_report([hostile], Scale(), plugin_version="1", machine=MACHINE, commit=None)
    )
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "No samples" in page  # a substrate that never started has no curves


def test_a_run_without_a_name_or_commit_is_named_by_when_it_ran() -> None:
    report = dataclasses.replace(local_only(), created="2026-03-01T12:00:00+00:00", commit=None)
    assert html_report.run_title(report, None) == "Rollout tax: run of 2026-03-01T12:00:00+00:00"


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


def test_on_a_phone_each_comparison_card_names_its_substrate_and_figure(tmp_path: Path) -> None:
    report, baseline, verdict = regressed()
    _page, shown = render(report, tmp_path, PHONE, baseline=baseline, verdict=verdict)
    cards = [card["text"] for card in shown.cards if "compare" in card["css"]]
    now = sides(report, report.projection)
    figures = [row[0] for row in table_rows(now["docker"], now["docker"])]
    assert len(cards) == 2 * len(figures)
    named = [f"{name} {figure}" for name in now for figure in figures]
    assert [card.splitlines()[0] for card in cards] == named


def test_on_a_wide_screen_the_comparison_names_its_substrate_once_in_the_header(
    tmp_path: Path,
) -> None:
    report, baseline, verdict = regressed()
    _page, shown = render(report, tmp_path, 1000, baseline=baseline, verdict=verdict)
    rows = [row["text"] for row in shown.cards if "compare" in row["css"]]
    assert rows and not [row for row in rows if row.startswith(("docker", "local"))]


def test_each_line_of_the_decision_and_the_header_is_its_own_paragraph() -> None:
    report = run(LOCAL, DOCKER, SESSION, ("e2b", 0.5, 0.02))
    summary = summarize_lines(report)
    assert len(summary.decision) == 2 and summary.decision[1].startswith("ranking by")
    assert len(summary.header) == 2 and summary.header[1].startswith("think time")
    page = html_report.render(report)
    assert re.findall(r'<p class="decision">([^<]*)</p>', page) == [
        html_report.e(line) for line in summary.decision
    ]
    assert re.findall(r'<p class="lead">([^<]*)</p>', page) == [
        html_report.e(line) for line in [report.created, *summary.header]
    ]


def test_the_machine_and_commit_never_say_none() -> None:
    report = local_only()
    report.machine = {**report.machine, "ci": None}
    report.commit = {**report.commit, "branch": None}
    machine = html_report.render(report).split('<section id="machine">')[1]
    assert "None" not in machine
    assert '<td data-label="fact">ci</td><td data-label="value">not in CI</td>' in machine
    assert "branch" not in machine  # a detached head has none
    report.machine["ci"] = "github-actions"
    machine = html_report.render(report).split('<section id="machine">')[1]
    assert '<td data-label="value">github-actions</td>' in machine
