"""Real runs through the plugin, round three: a folder of good files and one file of each
problem replays every readable one and says in one line per file what was unknown, numbered
or unreadable; only a folder with nothing readable, or --rollout-replay-strict, stops."""

import json

from support.trajectories import write_all, write_json, write_jsonl
from support.wild_runs import (
    MINI_CLOCK_BACK,
    MINI_TEXT_CLOCK_BACK,
    NEBIUS_ATTEMPT_IDS,
    NEBIUS_ATTEMPTS,
    OPENHANDS_CLOCK_BACK,
    SWE_SMITH_ATTEMPT_IDS,
    SWE_SMITH_ATTEMPTS,
    V1_EVENTS,
    V1_OUTPUT,
    V1_OUTPUT_IDS,
)

from pytest_rollout_tax.gate import storage
from pytest_rollout_tax.replay import load

BAD = '{"trajectory_id": "a", "messages": []}\n{"x": 1}\n'


def write_problems(directory):
    """One file of each problem, by name."""
    (directory / "bad.jsonl").parent.mkdir(parents=True, exist_ok=True)
    (directory / "bad.jsonl").write_text(BAD)
    return {
        "ntp": write_json(directory / "ntp.traj.json", MINI_CLOCK_BACK),
        "ntp117": write_json(directory / "ntp117.traj.json", MINI_TEXT_CLOCK_BACK),
        "openhands": write_jsonl(directory / "events.jsonl", OPENHANDS_CLOCK_BACK),
        "smith": write_jsonl(directory / "smith.jsonl", SWE_SMITH_ATTEMPTS),
        "nebius": write_jsonl(directory / "nebius.jsonl", NEBIUS_ATTEMPTS),
        "v1": write_jsonl(directory / "output.jsonl", V1_OUTPUT),
        "v1-events": directory / "v1-events.json",
    }


def test_a_folder_of_each_problem_replays_every_readable_file_with_one_line_each(pytester):
    """Acceptance; finding 5: nothing refused for its clock, attempts numbered, V1 read, the
    one unreadable file named with its reason while the rest replay."""
    good = write_all(pytester.path / "runs")
    problems = write_problems(pytester.path / "runs")
    problems["v1-events"].write_text(json.dumps(V1_EVENTS))
    expected = sum(
        len([t for t in load(p) if t.steps]) for p in [*good.values(), *problems.values()]
    )
    result = pytester.runpytest("--rollout-replay", "runs", "--rollout-json=report.json")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=expected)
    rollouts = storage.load(pytester.path / "report.json").report.rollouts
    replayed = {r["replay"]["trajectory_id"]: r for r in rollouts}
    names = {*SWE_SMITH_ATTEMPT_IDS, *NEBIUS_ATTEMPT_IDS, *V1_OUTPUT_IDS, "ntp", "v1-events"}
    assert names <= set(replayed)
    ntp = replayed["ntp"]
    assert (ntp["replay"]["clock_back_steps"], ntp["replay"]["think_time"]) == (2, "partial")
    assert ntp["steps"]["think_us"] == [3_000_000, 2_500_000, None]  # unknown, not 0
    assert ntp["steps"]["recorded_us"] == [500_000, None, 1_000_000]
    result.stdout.fnmatch_lines_random([
        "rollout-tax: not replayed: */runs/bad.jsonl:2: expected a row like the first one; *",
        "rollout-tax: note: runs/ntp.traj.json: 2 step(s) stamped before the timestamp before "
        "them (the clock stepped back 1.92 s in all): 1 think time(s) and 1 command time(s) "
        "unknown, *",
        "rollout-tax: note: runs/ntp117.traj.json: 1 step(s) stamped before *",
        "rollout-tax: note: runs/events.jsonl: 1 step(s) stamped before *",
        "rollout-tax: note: runs/smith.jsonl: 3 rows repeat 1 instance_id(s): replayed as "
        "attempts of one task, numbered in file order (calc__calc.1#1..#3)",
        "rollout-tax: note: runs/nebius.jsonl: 2 rows repeat 1 instance_id(s): *",
        "rollout-tax: note: runs/output.jsonl: 1 step(s) stamped before *; 2 rows repeat 1 "
        "instance_id(s): * (app__app-1#1..#2)",
        "rollout-tax: note: runs/v1-events.json: 1 step(s) stamped before *",
    ])  # fmt: skip


def test_replaying_a_file_of_attempts_twice_gives_the_same_names(pytester):
    write_jsonl(pytester.path / "r" / "smith.jsonl", SWE_SMITH_ATTEMPTS)
    runs = [pytester.runpytest("--rollout-replay", "r", "--collect-only", "-q") for _ in "12"]
    first, again = ([line for line in run.outlines if "::" in line] for run in runs)
    assert first == again == [f"r/smith.jsonl::{name}[local-1]" for name in SWE_SMITH_ATTEMPT_IDS]


def test_a_folder_with_nothing_readable_is_a_usage_error_naming_each_file(pytester):
    (pytester.path / "r").mkdir()
    (pytester.path / "r" / "bad.jsonl").write_text(BAD)
    (pytester.path / "r" / "worse.jsonl").write_text(BAD)
    result = pytester.runpytest("--rollout-replay", "r")
    assert result.ret == 4
    result.stderr.fnmatch_lines([
        "ERROR: */r/bad.jsonl:2: expected a row like the first one; *",
        "*/r/worse.jsonl:2: expected a row like the first one; *",
    ])  # fmt: skip


def test_strict_stops_on_one_unreadable_file(pytester):
    write_all(pytester.path / "r")
    (pytester.path / "r" / "bad.jsonl").write_text(BAD)
    result = pytester.runpytest("--rollout-replay", "r", "--rollout-replay-strict")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: */r/bad.jsonl:2: expected a row like the first one; *"])
    assert "passed" not in result.stdout.str()
