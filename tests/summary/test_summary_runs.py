"""The summary's answer, from real runs: the example suite on local, docker, a docker-session
variant and a docker-pool variant (and k8s, selected with no cluster), the example trajectory
replayed in shape and exact mode. Each test checks one promise of the summary on that output
and on the JSON report it wrote.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys

import pytest
from support.summary_runs import ROOT, joined, run_pytest

from pytest_rollout_tax.core.noise import ALPHA
from pytest_rollout_tax.replay.load import load
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.summary.terminal import render_summary
from pytest_rollout_tax.text.units import hours, ratio, seconds

VARIANTS = """\
[tool.rollout-tax.substrates.docker-session]
kind = "docker"
transport = "session"

[tool.rollout-tax.substrates.docker-pool]
kind = "docker"
pool = 2
"""
LOOP = "example_suite/test_agent_loop.py::test_agent_loop"
SUBSTRATES = ("local", "docker", "docker-session", "docker-pool")


@pytest.fixture(scope="module")
def suite_run(sandbox_image, tmp_path_factory):
    """The example suite on local, docker, docker-session, docker-pool and k8s (no cluster) at
    80 columns, under xdist; the 150-step loop runs one round per substrate (of 3)."""
    root = tmp_path_factory.mktemp("suite")
    shutil.copytree(ROOT / "example_suite", root / "example_suite")
    (root / "pyproject.toml").write_text(VARIANTS)
    skip = [f"--deselect={LOOP}[{name}-{r}]" for name in SUBSTRATES for r in (2, 3)]
    code, lines = run_pytest(
        root, "example_suite", f"--substrate={','.join(SUBSTRATES)},k8s",
        "--rollout-json=r.json", *skip, "-p", "xdist", "-n", "2",
    )  # fmt: skip
    assert code == 0, "\n".join(lines)
    return lines, json.loads((root / "r.json").read_text())


def test_the_table_is_ranked_and_the_decision_comes_first(suite_run):
    lines, report = suite_run
    substrates = report["substrates"]
    ranked = sorted(SUBSTRATES, key=lambda n: substrates[n]["worker_hours"])
    assert [item["substrate"] for item in report["ranking"]] == ranked
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    rows = lines[rule + 1 : rule + 1 + len(ranked)]
    assert [row.split()[0] for row in rows] == ranked  # the rows, cheapest first
    floor = next(item for item in report["ranking"] if item["floor"])
    assert floor["substrate"] == "local"  # the unisolated floor
    cheapest, following = [item for item in report["ranking"] if not item["floor"]][:2]
    assert joined(lines[:3]).startswith(
        f"cheapest that isolates: {cheapest['substrate']}, {hours(cheapest['worker_hours'])} "
        f"worker-hours and {hours(cheapest['tax_hours'])} tax-hours (floor: local, "
        f"{hours(floor['worker_hours'])} worker-hours)"
    )
    first = joined(lines[: next(i for i, line in enumerate(lines) if line.startswith("ranking"))])
    ratio_next = following["worker_hours"] / cheapest["worker_hours"]
    assert following["ratio"] == pytest.approx(ratio_next)
    assert f"next {following['substrate']} at {ratio(ratio_next)} the worker-hours" in first
    # the gate's own noise test decided, and the line says what it said
    p_value = float(re.search(r"p=([0-9.e-]+)", following["why"]).group(1))
    assert following["noise"] == ("resolved" if p_value < ALPHA else "within noise")
    words = "beyond the noise" if p_value < ALPHA else "within the noise"
    assert f"{words}" in first and following["why"] in first


def test_the_ranking_names_every_substrate_with_its_ratio(suite_run):
    lines, report = suite_run
    assert len([line for line in lines if line.startswith("ranking by worker-hours:")]) == 1
    text = joined(lines)
    after = text.split("ranking by worker-hours: ", 1)[1]
    candidates = [item for item in report["ranking"] if not item["floor"]]
    assert after.startswith(candidates[0]["substrate"] + ", then ")
    for item in candidates[1:]:
        assert f"{item['substrate']} {ratio(item['ratio'])}" in after


def test_the_spread_names_both_pairs(suite_run):
    lines, report = suite_run
    spread, substrates = report["spread"], report["substrates"]
    by_hours = sorted(SUBSTRATES, key=lambda n: substrates[n]["worker_hours"])
    by_cold = sorted(SUBSTRATES, key=lambda n: substrates[n]["cold_start"]["p50"])
    assert (spread["cheapest"], spread["dearest"]) == (by_hours[0], by_hours[-1])
    assert (spread["fastest"], spread["slowest"]) == (by_cold[0], by_cold[-1])
    assert spread["worker_hours"] == pytest.approx(
        substrates[by_hours[-1]]["worker_hours"] / substrates[by_hours[0]]["worker_hours"]
    )
    assert (
        f"spread: cold start p50 {ratio(spread['cold_start_p50'])} ({by_cold[-1]} vs "
        f"{by_cold[0]}); worker-hours {ratio(spread['worker_hours'])} ({by_hours[-1]} vs "
        f"{by_hours[0]})"
    ) in joined(lines)


def test_a_report_saved_before_the_pairs_still_loads_and_renders(suite_run, tmp_path):
    _, report = suite_run
    old = json.loads(json.dumps(report))
    for key in ("cheapest", "dearest"):
        del old["spread"][key]
    del old["ranking"], old["not_run"]
    text = joined(render_summary(Report.from_dict(old), width=80))
    assert "worker-hours " + ratio(old["spread"]["worker_hours"]) in text
    (tmp_path / "old.json").write_text(json.dumps(old))
    done = subprocess.run(
        [sys.executable, "-m", "pytest_rollout_tax", "project", str(tmp_path / "old.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cheapest that isolates: " in done.stdout and "Traceback" not in done.stderr


def test_without_think_time_the_hours_say_they_are_environment_time_only(suite_run):
    lines, report = suite_run
    assert report["projection"]["think_time_source"] == "none"
    assert "think time: none known: worker-hours are environment time only (no model time)" in (
        joined(lines)
    )


def test_a_pool_is_compared_as_a_pool_and_a_transport_as_a_transport(suite_run):
    lines, report = suite_run
    text = joined(lines)
    pool, docker = report["substrates"]["docker-pool"], report["substrates"]["docker"]
    extra = pool["worker_hours"] - docker["worker_hours"]
    assert "docker-pool vs docker, pool of 2 vs none: cold start p50 " in text
    assert f"per rollout, {extra:+,.0f} worker-hours" in text
    claim, create = pool["cold_start"]["p50"], docker["cold_start"]["p50"]  # signed, issue 30
    word = "faster" if claim < create else "slower"
    assert f"(create) ({seconds(abs(claim - create))} {word})" in text
    saves = pool["pool"]["creations"]["mean"] >= pool["cold_start"]["mean"]
    assert f"per rollout a claim {'saves' if saves else 'costs'} " in text
    assert "docker-session vs docker, transport session vs exec: step overhead " in text
    assert "docker-pool vs docker, transport" not in text
    assert "docker-pool vs docker: action" not in text


def test_a_selected_substrate_that_ran_nothing_is_named_with_why(suite_run):
    lines, report = suite_run
    assert "k8s" not in report["substrates"]
    assert report["not_run"]["k8s"].startswith("CredentialsMissing: k8s: no kubeconfig")
    assert f"k8s: ran no rollout: {report['not_run']['k8s']}" in joined(lines)


def test_the_summary_fits_80_columns_and_warns_once_about_sample_sizes(suite_run):
    lines, _ = suite_run
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    warnings = [line for line in lines if line.startswith("warning: too few samples")]
    assert len(warnings) == 1
    text = joined(lines)
    for name in SUBSTRATES:  # 6 cold starts each, fewer than a p95 needs
        assert re.search(rf"[:,;] {name}[ ,]", text.split("warning: too few samples", 1)[1])
    assert "has 6 cold-start sample(s)" not in text


def test_at_80_columns_the_local_and_docker_summary_has_no_wider_line(sandbox_image, tmp_path):
    """The issue's acceptance: ``COLUMNS=80 pytest example_suite --substrate=local,docker``."""
    shutil.copytree(ROOT / "example_suite", tmp_path / "example_suite")
    skip = [f"--deselect={LOOP}[{name}-{r}]" for name in ("local", "docker") for r in (2, 3)]
    code, lines = run_pytest(tmp_path, "example_suite", "--substrate=local,docker", *skip)
    assert code == 0, "\n".join(lines)
    assert lines and max(map(len, lines)) <= 80, "\n".join(lines)
    assert any(line.startswith("substrate ") for line in lines)


def test_every_rollout_failed_says_so_instead_of_run_more_rounds(sandbox_image, tmp_path):
    (tmp_path / "test_work.py").write_text("def test_work(sandbox):\n    sandbox.exec('true')\n")
    code, lines = run_pytest(
        tmp_path, "test_work.py", "--substrate=docker", "--rollout-rounds=2",
        "--substrate-opt=docker.image=rollout-tax/missing:nope",
        "--substrate-opt=docker.pull=never",
    )  # fmt: skip
    assert code == 1
    text = joined(lines)
    assert "warning: every rollout failed on docker: nothing measured" in text
    assert "run more rounds" not in text


EXAMPLE_TRAJECTORIES = ROOT / "example_trajectories"


def recorded_times() -> list[float | None]:
    """The example trajectory's recorded command time per step, as the file holds it."""
    [trajectory] = load(EXAMPLE_TRAJECTORIES / "fix-rounding.traj.json")
    return [step.recorded_s for step in trajectory.steps]


def command_per_step(report: dict, name: str) -> float:
    """docs/measurement.md's command time per step of a shape replay: the recorded time where
    the recording has one; the other steps' measured time less their overhead (never below 0)."""
    entry = report["substrates"][name]
    overhead = min(entry["action"]["mean"], entry["step"]["mean"])
    recorded, rest, steps = [], [], 0
    for item in report["rollouts"]:
        if item["substrate"] != name:
            continue
        columns = item["steps"]
        for wall, time in zip(columns["wall_us"], columns["recorded_us"], strict=True):
            steps += 1
            if time is None:
                rest.append(wall / 1e6 - overhead)
            else:
                recorded.append(time / 1e6)
    return (math.fsum(recorded) + max(math.fsum(rest), 0.0)) / steps


@pytest.fixture(scope="module")
def replay_runs(sandbox_image, tmp_path_factory):
    """The example trajectory replayed on local and docker: shape mode without think time,
    shape mode with the recorded think time, exact mode."""
    runs = {}
    for label, args in {
        "shape-0": ["--rollout-think-time=0"],
        "shape": [],
        "exact": ["--rollout-replay-mode=exact"],
    }.items():
        root = tmp_path_factory.mktemp(label)
        shutil.copytree(EXAMPLE_TRAJECTORIES, root / "example_trajectories")
        code, lines = run_pytest(
            root, "--rollout-replay", "example_trajectories", "--substrate=local,docker",
            "--rollout-rounds=2", "--rollout-json=r.json", *args,
        )  # fmt: skip
        assert code == 0, "\n".join(lines)
        runs[label] = lines, json.loads((root / "r.json").read_text())
    return runs


def test_a_shape_replay_projects_the_recorded_command_time(replay_runs):
    lines, report = replay_runs["shape-0"]
    recorded = recorded_times()
    known = sum(time is not None for time in recorded)
    assert known > 0
    for name in ("local", "docker"):
        entry = report["substrates"][name]
        command = command_per_step(report, name)
        assert entry["command"] == {
            "source": "recorded", "mean_s": pytest.approx(command), "recorded_steps": 2 * known,
            "steps": 2 * len(recorded),
        }  # fmt: skip
        steps = 1_000_000 * report["projection"]["steps"] / 3600
        assert entry["decomposition"]["command"] == pytest.approx(steps * command)
        overhead = min(entry["action"]["mean"], entry["step"]["mean"])
        assert entry["decomposition"]["overhead"] == pytest.approx(steps * overhead)
        assert math.fsum(entry["decomposition"].values()) == pytest.approx(entry["worker_hours"])
    # the recorded work dominates both: the spread is the substrates' overhead on top of it
    assert report["spread"]["worker_hours"] < 3  # the stand-in commands alone made it ~28x
    assert (
        f"command time: as recorded (shape replay; {4 * known} of {4 * len(recorded)} steps "
        "recorded it)"
    ) in joined(lines)


def test_recorded_think_time_is_named_and_the_hours_without_it_are_shown(replay_runs):
    lines, report = replay_runs["shape"]
    text = joined(lines)
    assert report["projection"]["think_time_source"] == "recorded"
    assert "think time: 3.19s per step, recorded in the replayed trajectories" in text
    without = ", ".join(
        f"{item['substrate']} "
        + hours(
            report["substrates"][item["substrate"]]["worker_hours"]
            - report["substrates"][item["substrate"]]["decomposition"]["think"]
        )
        for item in report["ranking"]
    )
    assert f"worker-hours without think time (environment only): {without}" in text
    zero = replay_runs["shape-0"][1]["substrates"]
    for name in ("local", "docker"):  # the same figure as a run at think time 0, about
        entry = report["substrates"][name]
        free = entry["worker_hours"] - entry["decomposition"]["think"]
        assert free == pytest.approx(zero[name]["worker_hours"], rel=0.5)


def test_an_exact_replay_shows_its_divergence_per_substrate(replay_runs):
    lines, report = replay_runs["exact"]
    text = joined(lines)
    for name in ("local", "docker"):
        divergence = report["substrates"][name]["divergence"]
        assert divergence["replayed_steps"] == 70  # 2 rounds of 35 steps
        per_rollout = [
            r["replay"]["divergent_steps"] for r in report["rollouts"] if r["substrate"] == name
        ]
        assert divergence["divergent_steps"] == sum(per_rollout) > 0
        kind, count = next(iter(divergence["kinds"].items()))
        label = kind.replace("_", " ")
        assert (
            f"{name} exact replay: {divergence['divergent_steps']} of 70 replayed steps diverged "
            f"from the recording, most often in {label} ({count})"
        ) in text
    assert "command time: as measured (exact replay)" in text
