"""--rollout-shard K/N and --rollout-start-at: a deterministic deal, every rollout once, a
synchronized start; the shards' merge."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter

import pytest
from support.workloads import example_modules

from pytest_rollout_tax.cli import main
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.plugin.shard import Shard, parse_start


def keys(workloads: int, rounds: int) -> list[tuple[str, int, str]]:
    return [(f"w{w}", r, f"t{w}[{r}]") for w in range(workloads) for r in range(1, rounds + 1)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
@pytest.mark.parametrize(("workloads", "rounds"), [(1, 4), (2, 4), (7, 3), (3, 1), (1, 1)])
def test_the_shards_hold_every_item_once_and_none_holds_more_than_its_share(
    count, workloads, rounds
):
    items = keys(workloads, rounds)
    owners = [Shard(index, count).owners(items) for index in range(count)]
    assert all(o == owners[0] for o in owners)  # every shard computes the same deal
    sizes = Counter(owners[0])
    assert sum(sizes.values()) == len(items)
    held = [sizes.get(index, 0) for index in range(count)]
    assert max(held) - min(held) <= 1  # no shard empty while another holds more than share + 1
    for w in range(workloads):  # a workload's rounds are spread: on min(rounds, count) shards
        mine = {owners[0][i] for i, key in enumerate(items) if key[0] == f"w{w}"}
        assert len(mine) == min(rounds, count)


def test_the_deal_does_not_depend_on_the_collection_order():
    items = keys(5, 3)
    shard = Shard(1, 3)
    dealt = dict(zip((k[2] for k in items), shard.owners(items), strict=True))
    backwards = items[::-1]
    assert dict(zip((k[2] for k in backwards), shard.owners(backwards), strict=True)) == dealt


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1", "a/b", "1/0", "2/1", "1/2/3", ""])
def test_a_malformed_or_out_of_range_shard_names_the_value(text):
    with pytest.raises(ValueError, match=rf"^--rollout-shard='{text}': expected K/N"):
        Shard.parse(text, "--rollout-shard")


def test_start_times_are_iso_8601_or_epoch_and_at_most_a_day_ahead():
    now = 1_800_000_000.0
    assert parse_start("1800000010.5", "x", now) == 1800000010.5
    assert parse_start("2027-01-15T08:00:00Z", "x", now) == 1800000000.0
    assert parse_start("2027-01-15T08:00:00", "x", now) == 1800000000.0  # no offset: UTC
    assert parse_start("2027-01-15T09:00:00+01:00", "x", now) == 1800000000.0
    with pytest.raises(ValueError, match="expected an ISO 8601 time"):
        parse_start("tomorrow", "--rollout-start-at", now)
    with pytest.raises(ValueError, match="more than 24 hours from now"):
        parse_start(str(now + 90_000), "--rollout-start-at", now)


def test_a_bad_shard_or_start_is_a_usage_error(pytester):
    pytester.makepyfile(**example_modules())
    for flag, value in (("--rollout-shard", "2/2"), ("--rollout-start-at", "soon")):
        result = pytester.runpytest(f"{flag}={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {flag}='{value}': expected *"])


def run_shards(pytester, count: int, *args: str) -> list[dict]:
    reports = []
    for index in range(count):
        path = f"shard{index}.json"
        result = pytester.runpytest(
            *args, f"--rollout-shard={index}/{count}", f"--rollout-json={path}"
        )
        assert result.ret == 0, result.stdout.str()
        reports.append(json.loads((pytester.path / path).read_text()))
    return reports


def ids(report: dict) -> list[str]:
    return sorted(f"{r['substrate']}:{r['test']}" for r in report["rollouts"])


def test_three_shards_hold_exactly_the_rollouts_of_one_run_and_merge_into_its_percentiles(
    pytester,
):
    pytester.makepyfile(**example_modules())
    pytester.makeini("[pytest]\nrollout_probes = 1\n")
    args = ("--rollout-rounds=4",)
    whole = pytester.runpytest(*args, "--rollout-json=whole.json")
    assert whole.ret == 0
    shards = run_shards(pytester, 3, *args)
    held = [ids(report) for report in shards]
    together = sorted(itertools.chain.from_iterable(held))
    assert all(held) and max(map(len, held)) - min(map(len, held)) <= 1
    assert together == ids(json.loads((pytester.path / "whole.json").read_text()))
    fingerprints = {report["client"]["workload"]["fingerprint"] for report in shards}
    assert len(fingerprints) == 1

    out = pytester.path / "merged.json"
    paths = [str(pytester.path / f"shard{k}.json") for k in range(3)]
    assert main(["merge", *paths, "-o", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert ids(merged) == together
    assert {r["shard"] for r in merged["rollouts"]} == {0, 1, 2}
    raw = Stats.of([r["cold_start_s"] for s in shards for r in s["rollouts"]])
    steps = Stats.of(
        [w / 1e6 for s in shards for r in s["rollouts"] for w in r["steps"]["wall_us"]]
    )
    entry = merged["substrates"]["local"]
    assert entry["cold_start"] == raw.to_dict()
    assert entry["step"] == steps.to_dict()
    assert merged["merge"]["incomplete"] is False and len(merged["clients"]) == 3

    assert main(["merge", paths[0], paths[0], "-o", str(out)]) == 4  # a shard with itself


def test_a_shard_runs_under_xdist(pytester):
    pytester.makepyfile(
        test_two="def test_a(sandbox):\n    sandbox.exec('true')\n\n\n"
        "def test_b(sandbox):\n    sandbox.exec('true')\n"
    )
    result = pytester.runpytest(
        "-p", "xdist", "-n", "2", "--rollout-rounds=3", "--rollout-shard=1/2",
        "--rollout-json=r.json",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "r.json").read_text())
    assert len(report["rollouts"]) == 3
    assert report["client"]["workload"]["items"] == 6  # the whole collection, from a worker


def test_a_burst_over_two_shards_started_together_merges_into_one_fleet_wide_level(pytester):
    pytester.makepyfile(test_one="def test_x(sandbox):\n    sandbox.exec('true')\n")
    at = time.time() + 3  # both shards have started and are waiting by then
    shards = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rollout-burst=3",
             "--rollout-rounds=2", f"--rollout-start-at={at}", f"--rollout-shard={k}/2",
             f"--rollout-json=shard{k}.json"],
            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for k in range(2)
    ]  # fmt: skip
    for shard in shards:
        output, _ = shard.communicate(timeout=120)
        assert shard.returncode == 0, output
    reports = [json.loads((pytester.path / f"shard{k}.json").read_text()) for k in range(2)]
    for report in reports:
        level = report["substrates"]["local"]["burst"][0]
        assert level["released_at"] >= at  # nothing was created before the start
        assert report["client"]["start_at"]["at"] == at
        assert min(r["epoch"]["create"] for r in report["rollouts"]) >= at
    out = pytester.path / "merged.json"
    assert main(["merge", "shard0.json", "shard1.json", "-o", str(out)]) == 0
    (level,) = json.loads(out.read_text())["substrates"]["local"]["burst"]
    parts = [r["substrates"]["local"]["burst"][0] for r in reports]
    first = min(p["released_at"] for p in parts)
    last = max(p["released_at"] + p["ready_all_s"] for p in parts)
    assert level["concurrency"] == 6 and level["cold_start"]["n"] == 6
    assert level["ready_all_s"] == pytest.approx(last - first)
    assert level["creates_per_s"] == pytest.approx(6 / (last - first))
    assert level["release_spread_s"] == pytest.approx(
        abs(parts[0]["released_at"] - parts[1]["released_at"])
    )


def test_the_ini_twins_select_the_shard_and_the_start(pytester):
    pytester.makepyfile(test_one="def test_x(sandbox):\n    sandbox.exec('true')\n")
    at = time.time() - 1  # already past: no wait, and a start in the report
    pytester.makeini(
        f"[pytest]\nrollout_shard = 1/2\nrollout_start_at = {at}\nrollout_rounds = 4\n"
    )
    result = pytester.runpytest("--rollout-json=r.json")
    result.assert_outcomes(passed=2, deselected=2)
    client = json.loads((pytester.path / "r.json").read_text())["client"]
    assert client["shard"] == {"index": 1, "count": 2} and client["start_at"]["at"] == at
    result.stdout.fnmatch_lines(["shard 1/2 of workload sha256:* (4 items); merge the shards'*"])
