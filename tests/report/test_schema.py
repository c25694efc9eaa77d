"""The check of a report file (report/schema.py): a wrong value is refused naming its field path
and the value, never a dataclass constructor's TypeError."""

from __future__ import annotations

import json

import pytest
from support.reports import COLD, report, rollouts

from pytest_rollout_tax.report.document import Report

COST = {
    "dollars": 12.5, "environment_dollars": 10.0, "parts": {"cold_start": 1.0, "isolation": -0.5},
    "fee_counted": True,
}  # fmt: skip
FLEET = {
    "workers": 64, "cold_start_from": "burst", "burst_level": 32, "cold_start_s": 1.1,
    "idle_s": 0.0, "wall_clock_hours": 2.0, "worker_hours": 120.0,
}  # fmt: skip
ISOLATION = {"reference": "docker", "per_step_s": -0.001, "command_ratio": 0.9, "tests": 2}


def document() -> dict:
    """A run on e2b whose entry has every nested object: cost, decomposition, fleet, isolation."""
    data = report(rollouts("e2b", COLD)).to_dict()
    data["substrates"]["e2b"] |= {"cost": COST, "cost_usd": 12.5, "fleet": FLEET,
                                  "isolation": ISOLATION}  # fmt: skip
    return json.loads(json.dumps(data))  # a copy, as a file holds it


def test_a_whole_entry_is_read_and_keys_of_a_newer_writer_are_left():
    data = document()
    for key in ("cost", "fleet", "isolation", "decomposition"):
        data["substrates"]["e2b"][key]["from_a_newer_version"] = 1
    entry = Report.from_dict(data).substrates["e2b"]
    assert entry.projected.cost.dollars == 12.5 and entry.projected.fleet.workers == 64
    assert entry.isolation.reference == "docker"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("cost.dollars", "12.5", 'substrates.e2b.cost.dollars: expected a number, got "12.5"'),
        ("cost.environment_dollars", None, "no 'substrates.e2b.cost.environment_dollars'"),
        ("cost.dollars", -1, "substrates.e2b.cost.dollars: negative value -1"),
        ("cost.parts.think", "x", 'substrates.e2b.cost.parts.think: expected a number, got "x"'),
        ("cost.fee_counted", "yes", "substrates.e2b.cost.fee_counted: expected true or false"),
        ("cost", "12.5", 'substrates.e2b.cost: expected an object, got "12.5"'),
        ("decomposition.command", [], "substrates.e2b.decomposition.command: expected a number"),
        ("decomposition.think", None, "no 'substrates.e2b.decomposition.think'"),
        ("fleet.workers", 6.5, "substrates.e2b.fleet.workers: expected an integer, got 6.5"),
        ("fleet.cold_start_from", 3, "substrates.e2b.fleet.cold_start_from: expected a string"),
        ("isolation.tests", "2", 'substrates.e2b.isolation.tests: expected an integer, got "2"'),
        ("isolation.per_step_s", "fast", "substrates.e2b.isolation.per_step_s: expected a number"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_field_path(path, value, message):
    data = document()
    *parents, key = ["substrates", "e2b", *path.split(".")]
    target = data
    for parent in parents:
        target = target[parent]
    if value is None:
        del target[key]
    else:
        target[key] = value
    with pytest.raises(ValueError) as raised:
        Report.from_dict(data)
    assert message in str(raised.value)
    assert "__init__" not in str(raised.value) and "TypeError" not in str(raised.value)
