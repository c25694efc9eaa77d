"""Change points over saved runs: a planted step is found at its run, a flat history has none,
the newest run can start one, a lone outlier is not one; the ``history`` command."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("ruptures")

from support.reports import build_report

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.gate import history
from pytest_rollout_tax.gate import testbed as beds
from pytest_rollout_tax.gate.storage import Storage
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Scale


def noisy(n: int, seed: int, level: float = 1.0, noise: float = 0.03) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.gauss(1, noise) for _ in range(n)]


@pytest.mark.parametrize(("n", "at"), [(20, 12), (10, 3), (30, 25)])
def test_a_planted_step_is_found_at_its_run(n, at):
    values = [v * (1.25 if i >= at else 1.0) for i, v in enumerate(noisy(n, seed=at))]
    (shift,) = history.shifts(values)
    assert shift.index == at
    assert shift.after / shift.before == pytest.approx(1.25, abs=0.06)
    assert shift.p < history.MAX_P


def test_no_change_point_in_histories_without_one():
    for seed in range(40):
        assert history.shifts(noisy(25, seed)) == [], seed


def test_a_constant_or_short_history_has_none():
    assert history.shifts([1.0] * 10) == []
    assert history.shifts([1.0, 5.0]) == []


def test_the_newest_run_can_start_a_change_point():
    values = [*noisy(12, seed=1), 1.5]
    (shift,) = history.shifts(values)
    assert shift.index == 12 and shift.after == 1.5


def test_a_lone_outlier_in_the_middle_is_not_a_change_point():
    values = noisy(20, seed=2)
    values[9] = 1.6
    assert history.shifts(values) == []


def test_two_steps_are_both_found():
    values = [v * (1.3 if 8 <= i < 16 else 1.0) for i, v in enumerate(noisy(24, seed=3))]
    assert [s.index for s in history.shifts(values)] == [8, 16]


# -- saved runs and the command -----------------------------------------------------------------


def saved_report(cold: float, seed: int) -> Report:
    rng = random.Random(seed)
    rollouts = [
        Rollout(
            test=f"t.py::test_x[docker-{i}]",
            substrate="docker",
            round=i,
            outcome="passed",
            cold_start_s=cold * rng.gauss(1, 0.02),
            teardown_s=0.1,
            trajectory_s=1.0,
            steps=[Step("exec", 0.01 * rng.gauss(1, 0.02), 0)] * 3,
            action_probes_s=[0.005],
        )
        for i in range(1, 6)
    ]
    return build_report(rollouts, Scale(), plugin_version="t", machine={}, commit=None)


def write_history(store: Path, colds: list[float]) -> list[str]:
    """Autosave-like files, their modification times in order; returns their names."""
    store.mkdir(parents=True, exist_ok=True)
    names = []
    for index, cold in enumerate(colds, start=1):
        path = store / f"{index:04d}_run.json"
        path.write_text(json.dumps(saved_report(cold, seed=index).to_dict()))
        os.utime(path, ns=(index * 10**9, index * 10**9))
        names.append(path.stem)
    return names


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_history_command_finds_the_planted_step(tmp_path):
    store = tmp_path / "runs"
    names = write_history(store, [0.5] * 8 + [0.7] * 6)
    report = tmp_path / "cp.json"
    status, out, err = cli("history", "--storage", str(store), "--json", str(report))
    assert status == 0, err
    assert "history of 14 saved run(s)" in out
    assert "testbed unknown:" in out  # saved before testbeds were recorded
    row = next(line for line in out.splitlines() if line.startswith("docker.cold_start.p50"))
    assert row.split()[1] == names[8] and "+3" in row.split()[4]  # +40% planted
    data = json.loads(report.read_text())
    cold = [c for c in data["change_points"] if c["metric"] == "docker.cold_start.p50"]
    assert len(cold) == 1
    assert cold[0]["run"] == names[8]
    assert cold[0]["before"] == pytest.approx(0.5, rel=0.03)
    assert cold[0]["after"] == pytest.approx(0.7, rel=0.03)
    assert cold[0]["p"] < history.MAX_P
    assert cold[0]["testbed"] == "unknown" and cold[0]["beyond_noise"] is True
    assert cold[0]["created"] and cold[0]["change"] == pytest.approx(0.4, abs=0.03)
    assert data["testbeds"] == {"unknown": 14}
    assert not [c for c in data["change_points"] if ".step." in c["metric"]]


def test_history_command_without_a_change(tmp_path):
    store = tmp_path / "runs"
    write_history(store, [0.5] * 10)
    (store / "broken.json").write_text("{")
    status, out, _ = cli("history", "--storage", str(store))
    assert status == 0
    assert "no change point" in out
    assert "skipped, unusable:" in out and "broken.json" in out


def test_history_bad_input_is_exit_4(tmp_path):
    status, _, err = cli("history", "--storage", str(tmp_path), "--max-p", "2")
    assert status == 4 and "expected a number in (0, 1)" in err


def test_history_without_the_extra_is_a_clear_error(monkeypatch, tmp_path):
    def missing() -> None:
        raise history.HistoryUnavailable("change-point detection needs ruptures: pip install x")

    monkeypatch.setattr(history, "require", missing)
    status, _, err = cli("history", "--storage", str(tmp_path))
    assert status == 4 and "needs ruptures" in err


# -- per testbed --------------------------------------------------------------------------------


def on_testbed(report: Report, cpus: int | None) -> Report:
    """``report`` as saved on a testbed of ``cpus`` CPUs (None: saved before testbeds)."""
    if cpus is None:
        return report
    machine = {"cpu_count": cpus, "platform": "Linux-6", "machine": "x86_64", "ci": None}
    return beds.stamped(dataclasses.replace(report, machine=machine))


def named(colds: list[tuple[float, int | None]]) -> list[tuple[str, Report]]:
    """Runs ``NNNN`` oldest first, each (cold start, testbed CPUs)."""
    return [
        (f"{index:04d}", on_testbed(saved_report(cold, seed=index), cpus))
        for index, (cold, cpus) in enumerate(colds, start=1)
    ]


def cold_points(found: history.History) -> list[history.ChangePoint]:
    return [c for c in found.change_points if c.metric == "docker.cold_start.p50"]


def test_a_step_on_one_testbed_is_found_there_and_not_on_the_other():
    # odd runs on 4 CPUs, their level up 40% from the 8th of them; even runs on 8 CPUs, flat
    runs = named([(0.7 if i >= 14 else 0.5, 4) if i % 2 else (0.5, 8) for i in range(28)])
    found = history.analyze(runs)
    four, eight = (history.testbed_key(runs[i][1], "docker") for i in (1, 0))
    assert "4 CPUs" in four and "8 CPUs" in eight
    (point,) = cold_points(found)  # the 4-CPU testbed's; none on the 8-CPU one
    assert point.testbed == four and point.run == "0016"
    assert point.after / point.before == pytest.approx(1.4, abs=0.05)
    assert found.counts[(four, "docker.cold_start.p50")] == 14
    assert not [c for c in found.change_points if c.testbed == eight]


def test_a_mixed_testbed_history_has_no_change_point_its_testbeds_alone_do_not():
    """Runs moved from a 4-CPU testbed to a slower 8-CPU one: each testbed's own history is
    flat, so the mixed history is too; the same runs as one series (no testbed recorded)
    would show the move as a change point."""
    colds = [(0.5, 4)] * 10 + [(0.8, 8)] * 10
    mixed = cold_points(history.analyze(named(colds)))
    alone = [cold_points(history.analyze(named([c for c in colds if c[1] == n]))) for n in (4, 8)]
    assert mixed == [] and alone == [[], []]
    (pooled,) = cold_points(history.analyze(named([(cold, None) for cold, _ in colds])))
    assert pooled.run == "0011" and pooled.testbed == "unknown"  # what one series would say


def test_runs_saved_before_testbeds_are_the_unknown_testbed_and_still_load(tmp_path):
    store = tmp_path / "runs"
    write_history(store, [0.5] * 4)  # no testbed recorded
    for index, (_, report) in enumerate(named([(0.5, 4)] * 3), start=5):
        path = store / f"{index:04d}_new.json"
        path.write_text(json.dumps(report.to_dict()))
        os.utime(path, ns=(index * 10**9, index * 10**9))
    found = history.of_storage(Storage.at(store))
    assert len(found.runs) == 7 and found.unusable == []
    beds_seen = {bed for bed, _ in found.counts}
    assert beds_seen == {"unknown", history.testbed_key(named([(0.5, 4)])[0][1], "docker")}
    assert found.counts[("unknown", "docker.cold_start.p50")] == 4
