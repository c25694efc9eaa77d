"""Reading trajectory files: each format detected from content, errors in one line."""

import dataclasses
import json

import pytest
from support.trajectories import (
    FORMATS,
    LAYOUTS,
    MINI,
    MINI_STEPS,
    MINI_TEXT,
    MINI_TEXT_STEPS,
    MINI_V1,
    MINI_V1_STEPS,
    OPENAI_ROWS,
    OPENAI_STEPS,
    ROLLOUT_TAX_LINES,
    SWE_AGENT,
    SWE_AGENT_STEPS,
    SWE_AGENT_TOOLS,
    SWE_AGENT_TOOLS_STEPS,
    SWE_SMITH_ROWS,
    SWE_SMITH_STEPS,
    write_all,
    write_json,
    write_jsonl,
    write_layout,
)

from pytest_rollout_tax.replay import FileEdit, NotATrajectory, TrajectoryError, load
from pytest_rollout_tax.replay.load import check
from pytest_rollout_tax.replay.model import RecordedStep, RecordedTrajectory


@pytest.fixture
def files(tmp_path):
    return write_all(tmp_path)


def column(trajectory, name):
    return [getattr(step, name) for step in trajectory.steps]


def test_mini_swe_agent_v2_actions_outputs_and_think_time(files):
    [trajectory] = load(files["mini"])
    assert (trajectory.format, trajectory.trajectory_id, trajectory.timeout) == (
        "mini-swe-agent", "fix", 30.0,
    )  # fmt: skip
    assert column(trajectory, "command") == ["echo hello", "printf abcdefg", "exit 3"]
    for name, values in MINI_STEPS.items():
        assert column(trajectory, name) == values, name


def test_mini_swe_agent_first_action_without_an_earlier_timestamp_has_unknown_think(tmp_path):
    data = json.loads(json.dumps(MINI))
    del data["messages"][1]["extra"]
    [trajectory] = load(write_json(tmp_path / "a.traj.json", data))
    assert column(trajectory, "think_s") == [None, 4.0, 0.0]


def test_mini_swe_agent_text_format_one_block_per_message(files):
    [trajectory] = load(files["mini-text"])
    assert trajectory.format == "mini-swe-agent"
    assert column(trajectory, "command") == ["echo one", "seq 1 100"]
    assert column(trajectory, "exit_code") == MINI_TEXT_STEPS["exit_code"]
    # a cut observation counts its head, the elided characters and its tail
    assert column(trajectory, "output_bytes") == MINI_TEXT_STEPS["output_bytes"]
    assert column(trajectory, "think_s") == [None, None]


def test_swe_agent_traj_has_execution_time_and_no_think_time(files):
    [trajectory] = load(files["swe-agent"])
    assert (trajectory.format, trajectory.trajectory_id) == ("swe-agent", "swe")
    assert column(trajectory, "command") == ["ls -a", "submit"]
    assert column(trajectory, "recorded_s") == SWE_AGENT_STEPS["recorded_s"]
    assert column(trajectory, "output_bytes") == SWE_AGENT_STEPS["output_bytes"]
    assert column(trajectory, "think_s") == [None, None]
    assert column(trajectory, "exit_code") == [None, None]


def test_openai_rows_one_trajectory_each_think_and_finish_are_not_steps(files):
    row_a, row_b = load(files["openai"])
    assert [row_a.trajectory_id, row_b.trajectory_id] == ["row-a", "row-b"]
    assert {row_a.format, row_b.format} == {"openai-messages"}
    assert column(row_a, "command") == ["echo hey", None, None, None]
    assert column(row_a, "edit")[1:] == [
        FileEdit("create", "notes.txt", file_text="hello world\n"),
        FileEdit("str_replace", "notes.txt", old_str="hello", new_str="goodbye"),
        FileEdit("view", "notes.txt"),
    ]
    assert column(row_a, "exit_code") == [0, None, None, None]
    assert column(row_a, "output_bytes") == OPENAI_STEPS["row-a"]["recorded"]
    assert column(row_b, "command") == ["false"]
    assert column(row_b, "exit_code") == [0]


def test_our_jsonl_one_step_per_line(files):
    [trajectory] = load(files["rollout-tax"])
    assert (trajectory.format, trajectory.trajectory_id) == ("rollout-tax", "steps")
    assert column(trajectory, "command") == [row["cmd"] for row in ROLLOUT_TAX_LINES]
    for name in ("think_s", "recorded_s", "exit_code", "output_bytes"):
        assert column(trajectory, name) == [row[name] for row in ROLLOUT_TAX_LINES]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("", ":1", "empty file"),
        ('{"messages": [\n  {"role": "user"},\n  oops\n]}', ":3", "not valid JSON"),
        ('{"cmd": "ls"}\n{"cmd": "ls"\n', ":2", "not valid JSON"),
        ('{"cmd": "ls"}\n{"cmd": 3}\n', ":2", 'expected {"cmd"'),
        ('{"cmd": "ls", "think": 1}\n', ":1", "unknown field(s) think"),
        ('{"cmd": "ls", "think_s": -1}\n', ":1", "think_s=-1: expected seconds >= 0"),
        ('{"cmd": "ls", "exit_code": "0"}\n', ":1", "exit_code='0'"),
        ('{"cmd": "ls", "output_bytes": -2}\n', ":1", "output_bytes=-2"),
        ('{"hello": 1}\n', ":1", "not a trajectory this tool reads"),
        ("[1, 2]\n", ": [0]", "not a trajectory this tool reads"),
        (
            '{"trajectory_id": "a", "messages": []}\n{"trajectory_id": "a", "messages": []}\n',
            ":2",
            "trajectory_id 'a' repeats line 1",
        ),
        ('{"trajectory_id": "a", "messages": []}\n{"x": 1}\n', ":2", "expected a row"),
    ],
)
def test_unreadable_files_fail_in_one_line_naming_file_and_line(tmp_path, text, where, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(TrajectoryError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}{where}: "), message
    assert problem in message
    assert "\n" not in message


def test_a_bad_action_names_where_it_is(tmp_path):
    data = json.loads(json.dumps(MINI))
    data["messages"][4]["extra"]["actions"][1] = {"cmd": "ls"}
    with pytest.raises(TrajectoryError, match=r"messages\[4\]\.extra\.actions\[1\]: expected"):
        load(write_json(tmp_path / "a.traj.json", data))


def test_files_that_are_not_utf8_or_missing(tmp_path):
    path = tmp_path / "b.traj"
    path.write_bytes(b'{"cmd": "ls"}\n\xff\n')
    with pytest.raises(TrajectoryError, match=r"b\.traj:2: not UTF-8 text"):
        load(path)
    with pytest.raises(TrajectoryError, match="cannot read"):
        load(tmp_path / "missing.traj")


def test_one_openai_document_is_one_trajectory(tmp_path):
    [trajectory] = load(write_json(tmp_path / "one.json", OPENAI_ROWS[1]))
    assert (trajectory.trajectory_id, len(trajectory.steps)) == ("row-b", 1)
    [trajectory] = load(write_jsonl(tmp_path / "one.jsonl", OPENAI_ROWS[1:]))
    assert trajectory.trajectory_id == "row-b"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"cmd": "ls", "think_s": 1e17}, "think_s=1e+17: more than 1e+09 seconds"),
        ({"cmd": "ls", "recorded_s": 2e9}, "recorded_s=2000000000.0: more than"),
        ({"cmd": "ls", "output_bytes": 2**50}, f"output_bytes={2**50}: more than"),
    ],
)
def test_figures_no_real_run_has_are_refused(tmp_path, row, problem):
    """Within the bound of any number in a file (core/limits.py), beyond a step's."""
    path = write_jsonl(tmp_path / "big.jsonl", [{"cmd": "true"}, row])
    with pytest.raises(TrajectoryError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: big: step 2: ")
    assert problem in message


def copy(data):
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("layout", LAYOUTS[1:])
@pytest.mark.parametrize("name", FORMATS)
def test_every_format_reads_the_same_in_every_layout(tmp_path, name, layout):
    """Finding 1, 5: compact JSON, a JSON array of rows and JSONL read as the indented file."""
    file_name, rows = FORMATS[name]
    indented = load(write_layout(tmp_path / "indented" / file_name, rows, "indented"))
    other = load(write_layout(tmp_path / layout / file_name, rows, layout))
    assert [dataclasses.replace(t, source="") for t in other] == [
        dataclasses.replace(t, source="") for t in indented
    ]
    assert all(trajectory.steps for trajectory in other)


def test_compact_mini_swe_agent_v2_keeps_its_times_sizes_and_codes(tmp_path):
    """Finding 1: a one-line v2 file is mini-swe-agent, not chat messages."""
    [trajectory] = load(write_layout(tmp_path / "fix.json", [MINI], "compact"))
    assert trajectory.format == "mini-swe-agent"
    for name, values in MINI_STEPS.items():
        assert column(trajectory, name) == values, name


def test_mini_swe_agent_v1_think_time_from_response_created(tmp_path):
    """Finding 9: 1.x model responses carry ``created``; finding 12: a timed-out step's
    empty output is 0 bytes, not the template's newline."""
    [trajectory] = load(write_json(tmp_path / "v1.traj.json", MINI_V1))
    assert (trajectory.timeout, trajectory.timeout_field) == (
        60.0, "info.config.environment.timeout",
    )  # fmt: skip
    for name, values in MINI_V1_STEPS.items():
        assert column(trajectory, name) == values, name


def test_mini_swe_agent_1_17_message_timestamps_give_think_and_command_time(tmp_path):
    data = copy(MINI_TEXT)
    for index, message in enumerate(data["messages"]):
        message["timestamp"] = 100.0 + 2 * index
    [trajectory] = load(write_json(tmp_path / "t.traj.json", data))
    # each step: its message's time minus the one before; its observation's minus its own
    assert column(trajectory, "think_s") == [2.0, 2.0]
    assert column(trajectory, "recorded_s") == [2.0, 2.0]
    assert trajectory.wall_s == 14.0


def test_swe_smith_rows_with_xml_calls_are_steps(tmp_path):
    """Finding 4: ``<function=bash>`` calls in the content are steps; finding 6: two runs of
    one instance are told apart by ``traj_id``."""
    found = load(write_jsonl(tmp_path / "smith.jsonl", SWE_SMITH_ROWS))
    assert [t.trajectory_id for t in found] == list(SWE_SMITH_STEPS)
    for trajectory in found:
        expected = SWE_SMITH_STEPS[trajectory.trajectory_id]
        assert trajectory.format == "swe-smith"
        assert column(trajectory, "command") == expected["command"]
        assert column(trajectory, "output_bytes") == expected["output_bytes"]
        assert column(trajectory, "edit")[1] == FileEdit("create", "notes.txt", file_text="hello")
        assert column(trajectory, "tool") == [None, None, "submit"]


def test_messages_stored_as_a_json_string_are_read(tmp_path):
    row = copy(SWE_SMITH_ROWS[0])
    row["messages"] = json.dumps(row["messages"])
    [trajectory] = load(write_jsonl(tmp_path / "smith.jsonl", [row]))
    assert column(trajectory, "command") == SWE_SMITH_STEPS["calc__calc.1.run1"]["command"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"trajectory_id": "t", "traj_id": "x", "run_id": "r", "instance_id": "i"}, "t"),
        ({"traj_id": "x", "run_id": "r", "instance_id": "i"}, "x"),
        ({"run_id": "r", "instance_id": "i"}, "r/i"),
        ({"instance_id": "i"}, "i"),
        ({}, "rows"),
    ],
)
def test_identity_comes_from_the_first_field_in_the_documented_order(tmp_path, fields, expected):
    row = {key: value for key, value in OPENAI_ROWS[1].items() if key != "trajectory_id"}
    [trajectory] = load(write_jsonl(tmp_path / "rows.jsonl", [{**row, **fields}]))
    assert trajectory.trajectory_id == expected


def test_runs_of_one_instance_are_distinct_and_repeats_are_numbered_attempts(tmp_path):
    """Finding 6; round three, finding 3: rows repeating an instance_id are attempts."""
    base = {k: v for k, v in OPENAI_ROWS[1].items() if k != "trajectory_id"}
    runs = [{**base, "instance_id": "i", "run_id": run} for run in ("r1", "r2")]
    found = load(write_jsonl(tmp_path / "runs.jsonl", runs))
    assert [t.trajectory_id for t in found] == ["r1/i", "r2/i"]
    same = [{**base, "instance_id": "i"}, {**base, "instance_id": "i"}]
    found = load(write_layout(tmp_path / "same.json", same, "array"))
    assert [(t.trajectory_id, t.attempt_of, t.attempt) for t in found] == [
        ("i#1", "i", 1),
        ("i#2", "i", 2),
    ]


def test_swe_agent_tool_steps_are_named(tmp_path):
    [trajectory] = load(write_json(tmp_path / "tools.traj", SWE_AGENT_TOOLS))
    assert column(trajectory, "tool") == SWE_AGENT_TOOLS_STEPS["tool"]


def test_a_bare_list_of_messages_is_not_a_trajectory_and_says_so(tmp_path):
    """mini-swe-agent's own tests/test_data/*.traj.json are bare message lists."""
    path = write_layout(tmp_path / "local.traj.json", MINI_TEXT["messages"], "indented")
    with pytest.raises(NotATrajectory) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: [0]: a chat message, not a trajectory")


def test_a_clock_stepped_back_by_any_amount_leaves_the_interval_unknown(tmp_path):
    """Round three, findings 1-2: 10,000 s back, an observation before its action, a model
    response stamped before the one before it: the step is read, its interval unknown."""
    data = copy(MINI)
    data["messages"][4]["extra"]["timestamp"] = 1002.5 - 10_000
    [trajectory] = load(write_json(tmp_path / "back.traj.json", data))
    assert column(trajectory, "think_s") == [2.0, None, 0.0]
    assert column(trajectory, "clock_back") == [(), ("think_s",), ()]
    assert trajectory.steps[1].clock_back_s == 10_000
    data = copy(MINI)
    data["messages"][3]["extra"]["timestamp"] = 990.0  # observed before it was asked for
    [trajectory] = load(write_json(tmp_path / "early.traj.json", data))
    first = trajectory.steps[0]
    assert (first.recorded_s, first.clock_back) == (None, ("recorded_s",))
    data = copy(MINI_V1)
    data["messages"][6]["extra"]["response"]["created"] = 1_600_000_000
    [trajectory] = load(write_json(tmp_path / "v1.traj.json", data))
    assert trajectory.steps[2].think_s is None and trajectory.steps[2].clock_back == ("think_s",)


def test_a_negative_execution_time_is_an_unknown_interval(tmp_path):
    """SWE-agent ``execution_time: -1``: as a clock stepped back, not a refused file."""
    data = copy(SWE_AGENT)
    data["trajectory"][2]["execution_time"] = -1
    [trajectory] = load(write_json(tmp_path / "neg.traj", data))
    assert column(trajectory, "recorded_s") == [0.25, None]
    assert (trajectory.steps[1].clock_back, trajectory.steps[1].clock_back_s) == (
        ("recorded_s",),
        1,
    )


def test_step_times_beyond_the_wall_time_are_refused(tmp_path):
    steps = (RecordedStep(command="a", think_s=3.0), RecordedStep(command="b", recorded_s=9.0))
    trajectory = RecordedTrajectory("f.traj.json", "mini-swe-agent", "f", steps, wall_s=10.0)
    with pytest.raises(TrajectoryError) as caught:
        check(trajectory)
    assert str(caught.value) == (
        "f.traj.json: f: step 2: its steps' times add up to 12 s, more than the trajectory's "
        "10 s from first to last timestamp"
    )
    check(dataclasses.replace(trajectory, wall_s=12.0))  # within it: fine


def test_a_clock_stepped_back_less_than_a_second_is_an_unknown_think_time(tmp_path):
    data = copy(MINI)
    data["messages"][4]["extra"]["timestamp"] = 1002.25  # 0.25 s before the observation
    [trajectory] = load(write_json(tmp_path / "ntp.traj.json", data))
    assert column(trajectory, "think_s") == [2.0, None, 0.0]
    assert column(trajectory, "recorded_s") == [0.5, 2.625, 2.625]  # the clock reads on
