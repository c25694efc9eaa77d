"""A gated pytest run with history (pytester, real local runs): its lines and its page give the
latest change point of this run's testbed, never one from another testbed's saved runs."""

from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest
from support.summary_runs import unwrapped

from pytest_rollout_tax.gate import history

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
    """A real run saved, then a history of it scaled: runs 1-3 and 7-9 at 0.3x on this run's
    testbed, 4-6 at 5x on another (64 CPUs), 10-12 at 1x here; then a gated run (not saved)
    with its page. One real run shared by every assertion."""
    pytester.makepyfile(test_workload=WORKLOAD)
    first = pytester.runpytest("-p", "no:cacheprovider", "--rollout-save=real")
    assert first.ret == 0, first.stdout.str()
    real = pytester.path / STORE / "real.json"
    data = json.loads(real.read_text())
    real.unlink()
    for index in range(1, 13):
        other = 4 <= index <= 6
        factor = (5.0 if other else 0.3 if index < 10 else 1.0) * (1 + 0.1 * (index % 3))
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
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--rollout-compare=0012_old",
        "--rollout-compare-fail=worker_hours.mean:900%", "--rollout-html=page.html",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    lines = unwrapped(result.outlines)
    cold = [line for line in lines if line.startswith("change point: local cold_start.p50 on [")]
    assert len(cold) == 1, lines
    assert re.search(r": \S+ -> \S+ \(\+\d+\.\d%, \S+x the run-to-run noise: beyond it; ", cold[0])
    assert cold[0].endswith("at 0010_old (2026-12-10T00:00:00Z)")
    assert "64 CPUs" not in " ".join(lines)  # the other testbed's runs are not this series

    page = (pytester.path / "page.html").read_text()
    part = page[page.index('<section id="change-points">') :]
    part = part[: part.index("</section>")]
    assert "local.cold_start.p50" in part and "0010_old" in part
    assert "2026-12-10T00:00:00Z" in part and "64 CPUs" not in part
