"""Trajectories as harnesses and datasets publish them: SWE-agent 0.x rows, mini-swe-agent text
in chat rows, OpenHands without function calling, OpenHands' own output, a run's own
observation template; and no action lost in silence."""

import copy
import json

import pytest
from support.trajectories import write_json, write_jsonl
from support.wild_trajectories import (
    MINI_TEXT_ROWS,
    MINI_TEXT_ROWS_STEPS,
    MINI_V1_TEMPLATE,
    MINI_V1_TEMPLATE_STEPS,
    OPENHANDS_EVENT_STEPS,
    OPENHANDS_EVENTS,
    OPENHANDS_OUTPUT,
    OPENHANDS_TEXT_ROWS,
    OPENHANDS_TEXT_STEPS,
    SWE_AGENT_ROWS,
    SWE_AGENT_ROWS_STEPS,
)

from pytest_rollout_tax.replay import TrajectoryError, load


def column(trajectory, name):
    return [getattr(step, name) for step in trajectory.steps]


def kinds(trajectory):
    return [step.edit.command if step.edit else "command" for step in trajectory.steps]


def test_swe_agent_0x_rows_replay_the_last_fenced_block_of_each_ai_turn(tmp_path):
    """Finding 1: role ai/user/system rows are SWE-agent's, not chat rows without an action;
    the observation loses the template's state line, a turn without a block ran nothing."""
    trajectories = load(write_jsonl(tmp_path / "nebius.jsonl", SWE_AGENT_ROWS))
    assert [t.trajectory_id for t in trajectories] == list(SWE_AGENT_ROWS_STEPS)
    for trajectory in trajectories:
        assert trajectory.format == "swe-agent-rows"
        for name, values in SWE_AGENT_ROWS_STEPS[trajectory.trajectory_id].items():
            assert column(trajectory, name) == values, name
        assert column(trajectory, "think_s") == [None] * len(trajectory.steps)


def test_mini_swe_agent_text_actions_in_chat_rows_are_steps(tmp_path):
    """Finding 2: ```bash blocks with <returncode>/<output> observations, with or without a
    trailing SWE-smith submit; a message with two blocks ran nothing."""
    trajectories = load(write_jsonl(tmp_path / "rows.jsonl", MINI_TEXT_ROWS))
    for trajectory in trajectories:
        assert trajectory.format == "mini-swe-agent-text-rows"
        for name, values in MINI_TEXT_ROWS_STEPS[trajectory.trajectory_id].items():
            assert column(trajectory, name) == values, name


def test_openhands_rows_without_function_calling_drop_the_harness_header(tmp_path):
    """Finding 3: 'EXECUTION RESULT of [tool]:' is OpenHands', not the tool's output; finish
    runs nothing."""
    [trajectory] = load(write_jsonl(tmp_path / "play.jsonl", OPENHANDS_TEXT_ROWS))
    assert (trajectory.format, trajectory.trajectory_id) == ("openhands-text-rows", "app-1")
    assert kinds(trajectory) == ["command", "view"]
    for name, values in OPENHANDS_TEXT_STEPS.items():
        assert column(trajectory, name) == values, name


def test_a_run_with_its_own_observation_template_keeps_its_sizes_and_codes(tmp_path):
    """Finding 4: info.config.agent.action_observation_template says how outputs look."""
    [trajectory] = load(write_json(tmp_path / "t.traj.json", MINI_V1_TEMPLATE))
    assert trajectory.format == "mini-swe-agent"
    for name, values in MINI_V1_TEMPLATE_STEPS.items():
        assert column(trajectory, name) == values, name


@pytest.mark.parametrize(
    ("template", "observation", "expected"),
    [
        ("Out: {{ output.output }} / code {{output.returncode}}", "Out: ab\n / code 2", (2, 3)),
        ("{{output['returncode']}}|{{ output['output'] | e }}", "7|xyz", (7, 3)),
        ("Observation: {{output}}", "something else entirely", (None, None)),
    ],
)
def test_observation_templates_read_their_parts(tmp_path, template, observation, expected):
    data = copy.deepcopy(MINI_V1_TEMPLATE)
    data["info"]["config"]["agent"]["action_observation_template"] = template
    data["messages"][3]["content"] = observation
    [trajectory] = load(write_json(tmp_path / "t.traj.json", data))
    assert (trajectory.steps[0].exit_code, trajectory.steps[0].output_bytes) == expected


def test_openhands_output_rows_replay_commands_and_file_steps_with_their_times(tmp_path):
    """Finding 5: output.jsonl's history: CmdRunAction and its observation, reads and edits as
    file steps, think time from the events' timestamps, old [action, observation] pairs."""
    timed, paired = load(write_jsonl(tmp_path / "output.jsonl", OPENHANDS_OUTPUT))
    assert (timed.format, timed.trajectory_id) == ("openhands", "calc__calc-1")
    assert kinds(timed) == OPENHANDS_EVENT_STEPS["kind"]
    for name in ("think_s", "recorded_s", "exit_code", "output_bytes"):
        assert column(timed, name) == OPENHANDS_EVENT_STEPS[name], name
    assert timed.wall_s == 16.0
    edit = timed.steps[2].edit
    assert (edit.path, edit.old_str, edit.new_str) == ("/workspace/calc.py", "add", "plus")
    assert column(paired, "command") == ["echo hi"]
    assert (column(paired, "output_bytes"), column(paired, "exit_code")) == ([3], [0])
    assert column(paired, "think_s") == [None]


@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_an_openhands_event_list_is_one_trajectory(tmp_path, layout):
    path = tmp_path / f"events.{layout}"
    if layout == "json":
        path.write_text(json.dumps(OPENHANDS_EVENTS, indent=2))
    else:
        write_jsonl(path, OPENHANDS_EVENTS)
    [trajectory] = load(path)
    assert (trajectory.format, trajectory.trajectory_id) == ("openhands", "events")
    assert column(trajectory, "think_s") == OPENHANDS_EVENT_STEPS["think_s"]


def test_an_openhands_edit_whose_arguments_are_in_the_tool_call_is_a_file_step(tmp_path):
    events = copy.deepcopy(OPENHANDS_EVENTS)
    arguments = {"command": "create", "path": "/workspace/n.py", "file_text": "x = 1\n"}
    events[6]["args"] = {"path": "/workspace/n.py", "content": "", "impl_source": "oh_aci"}
    events[6]["tool_call_metadata"] = {
        "tool_call_id": "t6",
        "model_response": {"choices": [{"message": {"tool_calls": [
            {"id": "t6", "function": {"name": "str_replace_editor",
                                      "arguments": json.dumps(arguments)}},
        ]}}]},
    }  # fmt: skip
    [trajectory] = load(write_jsonl(tmp_path / "e.jsonl", events))
    edit = trajectory.steps[2].edit
    assert (edit.command, edit.path, edit.file_text) == ("create", "/workspace/n.py", "x = 1\n")


def test_an_openhands_timestamp_that_is_not_iso_is_refused_naming_the_event(tmp_path):
    events = copy.deepcopy(OPENHANDS_EVENTS)
    events[2]["timestamp"] = "yesterday"
    with pytest.raises(TrajectoryError, match=r"e\.jsonl: \[2\]\.timestamp: 'yesterday'"):
        load(write_jsonl(tmp_path / "e.jsonl", events))


def test_swe_agent_rows_without_a_readable_action_are_refused_naming_the_turn(tmp_path):
    """Deliver 2: turns that look like actions but yield none: one line naming the harness
    and the first turn, never 'ended before its first'."""
    row = copy.deepcopy(SWE_AGENT_ROWS[1])
    for turn in row["trajectory"]:
        if turn["role"] == "ai":
            turn["text"] = "I will run python -c 'print(1)' now."
    with pytest.raises(TrajectoryError) as error:
        load(write_jsonl(tmp_path / "nebius.jsonl", [row]))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'nebius.jsonl'}:1: trajectory[2]: a SWE-agent 0.x")
    assert "\n" not in message


def test_chat_rows_whose_actions_cannot_be_read_are_refused_naming_the_harness(tmp_path):
    row = copy.deepcopy(MINI_TEXT_ROWS[1])
    for message in row["messages"]:
        if message["role"] == "assistant":
            message["content"] = message["content"].replace("```bash", "```python")
    with pytest.raises(TrajectoryError) as error:
        load(write_jsonl(tmp_path / "rows.jsonl", [row]))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'rows.jsonl'}:1: messages[2]: ")
    assert "mini-swe-agent text actions" in message and "ended before" not in message


def test_older_flat_openhands_events_and_typed_input_lose_no_action(tmp_path):
    """Older histories put an action's fields on the event itself (no args, no extras); input
    typed into a running process replays by its size: every action is a step."""
    row = {
        "instruction": "Add a license.",
        "history": [
            {"action": "message", "content": "Add a license.", "source": "user"},
            {"action": "run", "command": "touch LICENSE", "thought": "t"},
            {"observation": "run", "content": "done\n", "command": "touch LICENSE",
             "exit_code": 0},
            {"action": "run_ipython", "code": "print(1)"},
            {"observation": "run_ipython", "content": "1\n"},
            {"action": "run", "args": {"command": "y", "is_input": True}},
            {"observation": "run", "content": "ok", "extras": {"metadata": {"exit_code": 0}}},
            {"action": "finish"},
        ],
    }  # fmt: skip
    [trajectory] = load(write_jsonl(tmp_path / "output.jsonl", [row]))
    assert column(trajectory, "command") == ["touch LICENSE", None, None]
    assert column(trajectory, "output_bytes") == [5, 2, 2]
    assert column(trajectory, "exit_code") == [0, None, None]
