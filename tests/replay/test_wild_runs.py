"""Real runs, round three: a host clock stepped back (every reader with timestamps),
attempts of one task under one instance_id, OpenHands V1 events."""

import copy

import pytest
from support.trajectories import write_json, write_jsonl
from support.wild_runs import (
    MINI_CLOCK_BACK,
    MINI_CLOCK_BACK_STEPS,
    MINI_TEXT_CLOCK_BACK,
    MINI_TEXT_CLOCK_BACK_STEPS,
    NEBIUS_ATTEMPT_IDS,
    NEBIUS_ATTEMPTS,
    OPENHANDS_CLOCK_BACK,
    OPENHANDS_CLOCK_BACK_STEPS,
    SWE_SMITH_ATTEMPT_IDS,
    SWE_SMITH_ATTEMPTS,
    V1_EVENTS,
    V1_OUTPUT,
    V1_OUTPUT_IDS,
    V1_STEPS,
    V1_WALL_S,
)

from pytest_rollout_tax.replay import NotATrajectory, TrajectoryError, load
from pytest_rollout_tax.replay.notes import file_note


def column(trajectory, name):
    return [getattr(step, name) for step in trajectory.steps]


def test_a_mini_swe_agent_2_run_whose_clock_stepped_back_is_read_with_unknown_intervals(
    tmp_path,
):
    """Findings 1-2: 0.44 s back across a command, 1.48 s back across a think time."""
    [trajectory] = load(write_json(tmp_path / "ntp.traj.json", MINI_CLOCK_BACK))
    assert len(trajectory.steps) == 3
    for name, values in MINI_CLOCK_BACK_STEPS.items():
        expected = values if name == "clock_back" else pytest.approx(values)
        assert column(trajectory, name) == expected, name
    assert trajectory.wall_s == pytest.approx(7.0)  # the steps back count as no time
    assert file_note([trajectory]).startswith(
        "2 step(s) stamped before the timestamp before them (the clock stepped back 1.92 s in "
        "all): 1 think time(s) and 1 command time(s) unknown"
    )


def test_a_mini_swe_agent_1_17_text_run_applies_the_same_policy_to_command_time(tmp_path):
    [trajectory] = load(write_json(tmp_path / "ntp.traj.json", MINI_TEXT_CLOCK_BACK))
    for name, values in MINI_TEXT_CLOCK_BACK_STEPS.items():
        assert column(trajectory, name) == values, name


def test_an_openhands_observation_stamped_before_its_action_is_an_unknown_command_time(
    tmp_path,
):
    [trajectory] = load(write_jsonl(tmp_path / "events.jsonl", OPENHANDS_CLOCK_BACK))
    for name, values in OPENHANDS_CLOCK_BACK_STEPS.items():
        assert column(trajectory, name) == values, name


@pytest.mark.parametrize(
    ("rows", "ids"),
    [(SWE_SMITH_ATTEMPTS, SWE_SMITH_ATTEMPT_IDS), (NEBIUS_ATTEMPTS, NEBIUS_ATTEMPT_IDS)],
    ids=["swe-smith", "nebius"],
)
def test_attempts_of_one_task_are_numbered_in_file_order(tmp_path, rows, ids):
    """Finding 3: read, not refused; the same file read twice gives the same names."""
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    first, again = load(path), load(path)
    assert [t.trajectory_id for t in first] == [t.trajectory_id for t in again] == ids
    assert "numbered in file order" in file_note(first)


def test_a_repeated_trajectory_id_is_still_refused(tmp_path):
    """A run's own id repeating is a duplicated row, not an attempt."""
    rows = [{**row, "traj_id": "same"} for row in SWE_SMITH_ATTEMPTS[:2]]
    with pytest.raises(TrajectoryError, match="traj_id 'same' repeats line 1"):
        load(write_jsonl(tmp_path / "rows.jsonl", rows))


def test_openhands_v1_output_rows_are_read_with_their_tools_times_and_exit_codes(tmp_path):
    """Finding 4: ActionEvent/ObservationEvent by action_id; think time over the
    conversation's events (not the statistics updates); calls of one response run in turn."""
    trajectories = load(write_jsonl(tmp_path / "output.jsonl", V1_OUTPUT))
    assert [t.trajectory_id for t in trajectories] == V1_OUTPUT_IDS
    assert {t.format for t in trajectories} == {"openhands-v1"}
    timed = trajectories[0]
    for name, values in V1_STEPS.items():
        assert column(timed, name) == values, name
    assert timed.steps[1].edit.command == "view"
    assert timed.steps[1].edit.path == "/workspace/calc.py"
    assert timed.wall_s == V1_WALL_S
    assert column(trajectories[1], "exit_code") == [1]
    assert column(trajectories[1], "think_s") == [1.5]


def test_an_openhands_v1_event_list_is_one_trajectory(tmp_path):
    [trajectory] = load(write_jsonl(tmp_path / "events.jsonl", V1_EVENTS))
    assert (trajectory.format, trajectory.trajectory_id) == ("openhands-v1", "events")
    assert column(trajectory, "command") == V1_STEPS["command"]


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        (lambda h: h.__setitem__(3, {"action": "run"}), "history[3]", "expected an object"),
        (lambda h: h[3].__setitem__("action", "ls"), "history[3]", "an 'action' object"),
        (lambda h: h[3].__setitem__("timestamp", "noon"), "history[3].timestamp", "ISO 8601"),
    ],
    ids=["not-an-event", "action-not-an-object", "timestamp"],
)
def test_what_cannot_be_read_says_openhands_v1_events(tmp_path, change, where, problem):
    row = copy.deepcopy(V1_OUTPUT[2])
    row["history"] = copy.deepcopy(V1_EVENTS)
    change(row["history"])
    path = write_jsonl(tmp_path / "output.jsonl", [row])
    with pytest.raises(TrajectoryError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:1: {where}"), message
    assert problem in message and "OpenHands V1 events" in message and "\n" not in message


def test_one_v1_event_per_file_is_no_trajectory_and_says_how_to_join_them(tmp_path):
    """A V1 conversation's events/ folder holds one event per file: never N one-step runs."""
    path = write_json(tmp_path / "events" / "event-00003-e03.json", V1_EVENTS[3])
    with pytest.raises(NotATrajectory) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:1: one OpenHands V1 event, not a trajectory")
