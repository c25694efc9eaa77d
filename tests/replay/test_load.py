"""Reading trajectory files: each format detected from content, errors in one line."""

import json

import pytest
from support.trajectories import (
    MINI,
    MINI_STEPS,
    MINI_TEXT_STEPS,
    OPENAI_ROWS,
    OPENAI_STEPS,
    ROLLOUT_TAX_LINES,
    SWE_AGENT_STEPS,
    write_all,
    write_json,
    write_jsonl,
)

from pytest_rollout_tax.replay import FileEdit, TrajectoryError, load


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
        ({"cmd": "ls", "think_s": 1e300}, "think_s=1e+300: more than 1e+09 seconds"),
        ({"cmd": "ls", "recorded_s": 2e9}, "recorded_s=2000000000.0: more than"),
        ({"cmd": "ls", "output_bytes": 2**70}, f"output_bytes={2**70}: more than"),
    ],
)
def test_figures_no_real_run_has_are_refused(tmp_path, row, problem):
    path = write_jsonl(tmp_path / "big.jsonl", [{"cmd": "true"}, row])
    with pytest.raises(TrajectoryError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: big: step 2: ")
    assert problem in message
