"""report/records.py: each sub-record of a substrate's entry is a dataclass whose JSON is the
one the report always wrote, and which reads what older versions wrote."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from pytest_rollout_tax.core.control_plane import ControlPlane
from pytest_rollout_tax.core.price import Rate
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.fleet.burst import BurstLevel
from pytest_rollout_tax.fleet.pool import PoolStats
from pytest_rollout_tax.report.document import SubstrateEntry
from pytest_rollout_tax.report.records import (
    Burst,
    Command,
    Divergence,
    LaunchType,
    Pool,
    RateLimited,
)

STATS = Stats.of([0.1, 0.2, 0.3]).to_dict()
#: One entry's sub-records as the report's JSON has them (docs/json.md), each key there.
SUB_RECORDS = {
    "launch_types": {"warm": {"rollouts": 3, "share": 0.75, "cold_start": STATS},
                     "cold": {"rollouts": 1, "share": 0.25, "cold_start": STATS}},
    "command": {"source": "recorded", "mean_s": 0.2, "recorded_steps": 8, "steps": 10},
    "divergence": {"replayed_steps": 10, "divergent_steps": 2, "kinds": {"exit_code": 2}},
    "rate_limited": {"rollouts": 2, "messages": {"HTTP 429": 2}},
    "burst": [BurstLevel(4, [0.1, 0.2, 0.3], 0.5, released_at=1.0).to_dict(),
              BurstLevel(8, [0.4] * 8, 1.0, release_spread_s=0.01).to_dict()],
    "pool": PoolStats(size=2, hits=3, misses=1, idle_sandbox_s=4.0, creation_s=[0.3]).to_dict(),
    "rate": Rate(vcpu_hour=0.05, vcpus=2, source="sheet", as_of="2026-01-01").to_dict(),
    "control_plane": ControlPlane("http://127.0.0.1:1", 0.002, True, "reused").to_dict(),
}  # fmt: skip
TYPES = {
    "command": Command, "divergence": Divergence, "rate_limited": RateLimited, "pool": Pool,
    "rate": Rate, "control_plane": ControlPlane,
}  # fmt: skip


def entry_json() -> dict:
    entry = SubstrateEntry(kind="docker", rollouts=4).to_dict()
    return json.loads(json.dumps(entry | SUB_RECORDS))


def test_every_sub_record_is_a_dataclass_and_its_json_does_not_move():
    data = entry_json()
    entry = SubstrateEntry.from_dict(copy.deepcopy(data))
    for key, cls in TYPES.items():
        assert type(getattr(entry, key)) is cls, key
    assert all(type(t) is LaunchType for t in entry.launch_types.values())
    assert all(type(level) is Burst for level in entry.burst)
    assert entry.launch_types["warm"].cold_start == Stats.from_dict(STATS)
    assert entry.pool.creations.n == 1 and entry.burst[1].release_spread_s == 0.01
    assert json.loads(json.dumps(entry.to_dict())) == data


def test_no_sub_record_of_an_entry_is_a_dict():
    entry = SubstrateEntry.from_dict(entry_json())
    plain = [f.name for f in dataclasses.fields(entry) if isinstance(getattr(entry, f.name), dict)]
    assert plain == ["failure_reasons", "phases", "launch_types"]  # names to records, not records
    assert not [key for key, value in entry.launch_types.items() if isinstance(value, dict)]


def test_older_sub_records_load_and_keep_their_shape():
    data = entry_json()
    del (
        data["burst"][0]["cold_start_s"],
        data["pool"]["creation_s"],
        data["control_plane"]["connection"],
    )
    entry = SubstrateEntry.from_dict(copy.deepcopy(data))
    assert entry.burst[0].cold_start_s is None and entry.pool.creation_s is None
    assert entry.to_dict() == data  # what an older version wrote is written back as it was
    with pytest.raises(ValueError, match="no raw cold starts"):
        entry.burst[0].level()
    assert entry.means().bursts == ((4, pytest.approx(0.2)), (8, pytest.approx(0.4)))
