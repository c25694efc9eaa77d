"""Trajectories from the wild through the plugin: the formats named in the report, OpenHands'
own output replayed, unreadable actions refused, unknown sizes noted, every skipped file
named."""

import json

from support.trajectories import write_json, write_jsonl, write_mini_batch
from support.wild_trajectories import (
    MINI_TEXT_ROWS,
    OPENHANDS_EVENTS,
    OPENHANDS_OUTPUT,
    OPENHANDS_TEXT_ROWS,
    SWE_AGENT_ROWS,
)

from pytest_rollout_tax.gate import storage


def replays(pytester):
    report = storage.load(pytester.path / "report.json").report
    return {r["replay"]["trajectory_id"]: r["replay"] for r in report.rollouts}


def test_a_folder_of_openhands_output_replays_with_its_recorded_times(pytester):
    """Finding 5: output.jsonl and an event list run (not 'no tests ran'), named openhands."""
    write_jsonl(pytester.path / "oh" / "output.jsonl", OPENHANDS_OUTPUT)
    (pytester.path / "oh" / "events.json").write_text(json.dumps(OPENHANDS_EVENTS))
    result = pytester.runpytest("--rollout-replay", "oh", "--rollout-json=report.json")
    result.assert_outcomes(passed=3)
    seen = replays(pytester)
    assert {name: r["format"] for name, r in seen.items()} == dict.fromkeys(
        ("calc__calc-1", "calc__calc-2", "events"), "openhands"
    )
    assert (seen["calc__calc-1"]["recorded_steps"], seen["calc__calc-1"]["think_time"]) == (
        4, "recorded",
    )  # fmt: skip
    assert "think time: 2.88s per step, recorded" in result.stdout.str()


def test_each_layout_is_named_in_the_report_by_its_own_format(pytester):
    """Findings 1-3: swe-agent-rows, mini-swe-agent-text-rows, openhands-text-rows."""
    write_jsonl(pytester.path / "r" / "nebius.jsonl", SWE_AGENT_ROWS)
    write_jsonl(pytester.path / "r" / "mini.jsonl", MINI_TEXT_ROWS)
    write_jsonl(pytester.path / "r" / "play.jsonl", OPENHANDS_TEXT_ROWS)
    result = pytester.runpytest("--rollout-replay", "r", "--rollout-json=report.json")
    result.assert_outcomes(passed=5)
    assert {name: r["format"] for name, r in replays(pytester).items()} == {
        "calc__calc-1_1": "swe-agent-rows",
        "calc__calc-2_1": "swe-agent-rows",
        "calc.1": "mini-swe-agent-text-rows",
        "calc.2": "mini-swe-agent-text-rows",
        "app-1": "openhands-text-rows",
    }
    result.stdout.fnmatch_lines([
        "rollout-tax: note: 2 step(s) record no output size (mini-swe-agent-text-rows 1, "
        "swe-agent-rows 1): unknown, replayed as 0 bytes in shape mode and never an "
        "output_size divergence",
    ])  # fmt: skip


def test_rows_whose_actions_cannot_be_read_are_a_usage_error_naming_the_harness(pytester):
    """Deliver 2: never 'ended before its first', never a silent skip."""
    row = json.loads(json.dumps(SWE_AGENT_ROWS[1]))
    for turn in row["trajectory"]:
        if turn["role"] == "ai":
            turn["text"] = "no block here"
    write_jsonl(pytester.path / "r" / "nebius.jsonl", [row])
    result = pytester.runpytest("--rollout-replay", "r")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: */r/nebius.jsonl:1: trajectory[[]2[]]: a SWE-agent 0.x row*"]
    )
    assert "ended before" not in result.stdout.str() + result.stderr.str()


def test_the_skip_line_names_every_skipped_file(pytester):
    """Finding 6: no trajectory file hides behind '...'."""
    write_mini_batch(pytester.path / "run")
    for name in ("ORIGIN.md", "a.json", "b.jsonl"):
        (pytester.path / "run" / name).write_text("# not a trajectory\n")
    result = pytester.runpytest("--rollout-replay", "run")
    result.stdout.fnmatch_lines([
        "rollout-tax: skipped 6 file(s) in --rollout-replay folders that are not trajectories: "
        "run/ORIGIN.md, run/a.json, run/b.jsonl, run/exit_statuses_1700000000.yaml, "
        "run/minisweagent.log, run/preds.json",
    ])  # fmt: skip


def test_many_skipped_files_say_how_many_more_and_where_the_list_is(pytester):
    write_json(pytester.path / "run" / "t.traj.json", {"trajectory": [], "environment": "x"})
    names = [f"run/n{i:02d}.json" for i in range(12)]
    for name in names:
        (pytester.path / name).write_text("{}")
    result = pytester.runpytest("--rollout-replay", "run", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        f"rollout-tax: skipped 12 file(s) *: {', '.join(names[:10])}, and 2 more (-v lists "
        "them)",
    ])  # fmt: skip
    verbose = pytester.runpytest("--rollout-replay", "run", "--collect-only", "-v")
    verbose.stdout.fnmatch_lines([f"rollout-tax: skipped 12 file(s) *: {', '.join(names)}"])
