"""report/merge.py: shards' reports into one, from the raw samples; what it refuses."""

from __future__ import annotations

import copy
import dataclasses
import io
import json

import pytest
from support.reports import COLD, report, rollouts

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.errors import MergeRefused
from pytest_rollout_tax.fleet.burst import BurstLevel
from pytest_rollout_tax.report.merge import Part, merge, write
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.records import Burst
from pytest_rollout_tax.summary.clients import client_lines


def shard(index: int, count: int, made: list, scale: Scale | None = None, **client) -> Part:
    """A shard's report of ``made`` rollouts, as a run of this version writes it."""
    data = report(made, scale=scale)
    data.machine = {**data.machine, "hostname_sha256": f"host{index}"}
    data.client = {
        "shard": {"index": index, "count": count},
        "workload": {"fingerprint": "sha256:same", "items": 8},
        "projection": {"rollouts": 1_000_000, "steps": 150, "think_time_s": 0.0,
                       "think_time_source": "none"},
        "start_at": None,
        "saturation": None,
    } | client  # fmt: skip
    return Part(f"shard{index}.json", data)


def split(count: int) -> list[Part]:
    made = rollouts("local", COLD)
    return [shard(k, count, made[k::count]) for k in range(count)]


def test_the_merge_recomputes_percentiles_and_hours_from_the_raw_samples():
    parts = split(3)
    merged = merge(parts)
    whole = report(rollouts("local", COLD))
    entry, expected = merged.substrates["local"], whole.substrates["local"]
    for metric in ("cold_start", "action", "step", "teardown"):
        assert getattr(entry, metric) == getattr(expected, metric)
    assert entry.worker_hours == pytest.approx(expected.worker_hours)
    averaged = sum(p.report.substrates["local"].cold_start.p95 for p in parts) / 3
    assert entry.cold_start.p95 != pytest.approx(averaged)  # not an average of shards
    assert sorted(r["shard"] for r in merged.rollouts) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert {r["client"] for r in merged.rollouts} == {"host0", "host1", "host2"}
    assert [c["shard"] for c in merged.clients] == [0, 1, 2]


def test_a_rollout_in_two_reports_is_refused():
    part = split(2)[0]
    with pytest.raises(MergeRefused, match=r"shard0.json: rollout .* is also in shard0.json"):
        merge([part, part], force=True)  # never forced


def test_another_workload_is_refused():
    first, second = split(2)
    second.report.client["workload"]["fingerprint"] = "sha256:other"
    with pytest.raises(MergeRefused, match=r"shard1\.json: a different workload than shard0\.json"):
        merge([first, second], force=True)
    second.report.client = None
    with pytest.raises(MergeRefused, match=r"shard1\.json: no workload fingerprint"):
        merge([first, second])


def test_other_projection_settings_are_refused_unless_forced():
    first, second = split(2)
    second.report.client["projection"]["steps"] = 40
    with pytest.raises(MergeRefused, match=r"different projection settings .* \(steps\)"):
        merge([first, second])
    forced = merge([first, second], force=True)
    assert forced.projection.steps == 150 and forced.merge["forced"]


@pytest.mark.parametrize("kept", [True, False], ids=["client-kept", "older-shard"])
def test_shards_ranked_by_cost_merge_into_a_run_ranked_by_cost(kept):
    by_cost = Scale(rank_by="cost")
    made = rollouts("local", COLD)
    parts = [shard(index, 2, made[index::2], by_cost) for index in range(2)]
    if kept:  # this version keeps the whole configured scale in the client's facts
        for part in parts:
            part.report.client["projection"] = {
                **part.report.client["projection"],
                "rank_by": "cost",
            }
    merged = merge(parts)
    assert merged.projection.rank_by == "cost"
    assert merged.to_dict()["projection"]["rank_by"] == "cost"


def test_shards_ranked_differently_are_refused_unless_forced():
    first, second = split(2)
    second.report.client["projection"]["rank_by"] = "cost"
    with pytest.raises(MergeRefused, match=r"different projection settings .* \(rank_by\)"):
        merge([first, second])
    assert merge([first, second], force=True).projection.rank_by == "worker_hours"


def test_other_shard_counts_and_missing_step_times_are_refused():
    first, _ = split(2)
    other = split(3)[1]
    with pytest.raises(MergeRefused, match="different shard counts"):
        merge([first, other])
    stripped = copy.deepcopy(first)
    for rollout in stripped.report.rollouts:
        del rollout["steps"]
    with pytest.raises(MergeRefused, match="carry 0 of the 8 step times"):
        merge([stripped])


def test_a_missing_or_failed_shard_makes_the_merge_incomplete():
    parts = split(3)
    merged = merge(parts[:2])
    assert merged.merge["missing"] == [2] and merged.merge["incomplete"]
    failed = merge(parts[:2], failed={2: "pytest exited 3: boom"})
    assert failed.merge["missing"] == [] and failed.merge["failed"] == {
        "2": "pytest exited 3: boom"
    }
    assert "warning: incomplete: shard 2 of 3 failed: pytest exited 3: boom" in client_lines(failed)


def test_bursts_merge_by_epoch_time_into_fleet_wide_levels():
    parts = split(2)
    levels = [
        BurstLevel(2, [0.5, 0.7], ready_all_s=0.8, released_at=1000.0),
        BurstLevel(2, [0.6, 0.9], ready_all_s=1.0, released_at=1000.1),
    ]
    for part, level in zip(parts, levels, strict=True):
        part.report.substrates["local"].burst = [Burst.of(level)]
    (level,) = merge(parts).substrates["local"].burst
    assert level.concurrency == 4
    assert level.cold_start == Stats.of([0.5, 0.7, 0.6, 0.9])
    assert level.ready_all_s == pytest.approx(1.1)  # first release to the last ready
    assert level.creates_per_s == pytest.approx(4 / 1.1)
    assert level.release_spread_s == pytest.approx(0.1)
    older = parts[1].report.substrates["local"].burst[0]
    parts[1].report.substrates["local"].burst = [dataclasses.replace(older, cold_start_s=None)]
    with pytest.raises(MergeRefused, match="no raw cold starts"):
        merge(parts)


def test_a_saturated_client_is_named():
    busy = {"cpu_count": 2, "process_cpu_share": 0.5, "machine_cpu_share": 0.97,
            "load_start": 1.0, "load_end": 2.5, "saturated": True}  # fmt: skip
    made = rollouts("local", COLD)
    parts = [shard(0, 2, made[::2], saturation=busy), shard(1, 2, made[1::2])]
    lines = client_lines(merge(parts))
    assert (
        "warning: client host0 (shard 0) was saturated: CPU 97% of 2 cores (this process 50%), "
        "load 1.00 -> 2.50 (> 90%); its timings include client-side queueing: spread the run "
        "over more machines"
    ) in lines
    assert not any("host1 (shard 1) was saturated" in line for line in lines)


def test_compare_project_html_and_history_read_the_merged_report_unchanged(tmp_path):
    out = tmp_path / "merged.json"
    write(split(2), str(out))
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(report(rollouts("local", COLD)).to_dict()))
    printed = io.StringIO()
    assert main(["compare", str(whole), str(out), "--fail", "cold_start.p50:1%"], out=printed) == 0
    assert main(["project", str(out), "--rollouts", "10"], out=printed) == 0
    assert main(["html", str(out), str(whole), "-o", str(tmp_path / "m.html")], out=printed) == 0
    assert "10 rollouts x 150 steps" in printed.getvalue()
    pytest.importorskip("ruptures")
    assert main(["history", "--storage", str(tmp_path)], out=printed) == 0
    assert "history of 2 saved run(s)" in printed.getvalue()
