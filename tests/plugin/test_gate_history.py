"""A gated pytest run with history (pytester, real local runs): its lines and its page give the
latest change point of this run's testbed, never one from another testbed's saved runs."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from support.summary_runs import unwrapped

from pytest_rollout_tax.gate import history, latest
from pytest_rollout_tax.gate.storage import Storage
from pytest_rollout_tax.report.document import Report

try:  # once, here: pytester's in-process runs drop the modules they import
    history.require()
except history.HistoryUnavailable:
    pytest.skip("the [history] extra is not installed", allow_module_level=True)
if importlib.util.find_spec("matplotlib") is None:
    pytest.skip("the [html] extra is not installed", allow_module_level=True)

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=5, rounds=4)
def test_loop(sandbox):
    assert sandbox.exec("true").exit_code == 0
"""
STORE = ".rollout-tax"


def scaled(data, factor: float, key: str = ""):
    """Every duration (a float, or a step's whole microseconds) times ``factor``."""
    if isinstance(data, dict):
        return {name: scaled(value, factor, name) for name, value in data.items()}
    if isinstance(data, list):
        return [scaled(value, factor, key) for value in data]
    if key == "wall_us":
        return round(data * factor)
    return data * factor if isinstance(data, float) else data


def test_a_gated_run_gives_the_latest_change_point_of_its_testbed_in_its_lines_and_page(
    pytester: pytest.Pytester,
) -> None:
    """A real run saved, then a history of it scaled: runs 1-3 and 7-9 at 0.05x on this run's
    testbed, 4-6 at 5x on another (64 CPUs), 10-24 at 1x here, 25-27 as saved before testbeds;
    then a gated run (not saved) with its page. One real run shared by every assertion."""
    pytester.makepyfile(test_workload=WORKLOAD)
    first = pytester.runpytest("-p", "no:cacheprovider", "--rollout-save=real")
    assert first.ret == 0, first.stdout.str()
    real = pytester.path / STORE / "real.json"
    data = json.loads(real.read_text())
    real.unlink()
    for index in range(1, 25):
        other = 4 <= index <= 6
        factor = (5.0 if other else 0.05 if index < 10 else 1.0) * (1 + 0.1 * (index % 3))
        run = {**data, "substrates": scaled(data["substrates"], factor)}
        run["rollouts"] = scaled(data["rollouts"], factor)
        run["created"] = f"2026-12-{index:02d}T00:00:00Z"
        if other:
            machine = json.loads(json.dumps(data["machine"]))
            machine["testbeds"]["local"]["cpus"] = 64
            run["machine"] = machine
        path = pytester.path / STORE / f"{index:04d}_old.json"
        path.write_text(json.dumps(run))
        os.utime(path, ns=(index * 10**9, index * 10**9))
    for index in range(25, 28):  # saved before testbeds were recorded: the unknown testbed's
        machine = {k: v for k, v in data["machine"].items() if k != "testbeds"}
        path = pytester.path / STORE / f"{index:04d}_pre.json"
        path.write_text(json.dumps({**data, "machine": machine}))
        os.utime(path, ns=(index * 10**9, index * 10**9))
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--rollout-compare=0024_old",
        "--rollout-compare-fail=worker_hours.mean:900%", "--rollout-html=page.html",
        "--rollout-json=now.json",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    lines = unwrapped(result.outlines)
    # this run is real, the history its copies: this run may start a change point of its own
    # (it is the newest), so the lines are checked against the history read back with it
    now = Report.from_dict(json.loads((pytester.path / "now.json").read_text()))
    store = Storage.at(pytester.path / STORE)
    expected = latest.latest(history.of_storage(store, extra=(("this run", now),)), now)
    said = [line for line in lines if line.startswith("change point")]
    assert said == expected.lines() and expected.points, lines
    for point in expected.points:
        assert point.run in ("0010_old", "this run") and "64 CPUs" not in point.testbed
    before = history.of_storage(store)  # without this run: every series steps at run 10
    steps = {c.metric: c.run for c in before.change_points if "64 CPUs" not in c.testbed}
    assert steps["local.cold_start.p50"] == "0010_old" and set(steps.values()) == {"0010_old"}
    assert "64 CPUs" not in " ".join(lines)  # the other testbed's runs are not this series

    page = (pytester.path / "page.html").read_text()
    part = page[page.index('<section id="change-points">') :]
    part = part[: part.index("</section>")]
    for point in expected.points:
        assert f">{point.metric}</td>" in part and f">{point.run}</td>" in part
    assert "64 CPUs" not in part

    assert before.unusable == [] and len(before.runs) == 27  # the old runs load
    assert before.counts[("unknown", "local.cold_start.p50")] == 3
