"""Small trajectory files in each harness's format, written by the tests themselves, with the
figures a replay of each must reproduce."""

from __future__ import annotations

import json
from pathlib import Path

from .wild_runs import RUN_FORMATS
from .wild_trajectories import WILD_FORMATS


def _tool(call: str, output: str, code: int, stamp: float) -> dict:
    return {
        "role": "tool",
        "tool_call_id": call,
        "content": f"<returncode>{code}</returncode>\n<output>\n{output}</output>",
        "extra": {"raw_output": output, "returncode": code, "timestamp": stamp},
    }


#: mini-swe-agent v2 (``mini-swe-agent-1.1``): two model calls, the second with two actions.
MINI = {
    "info": {
        "config": {"environment": {"cwd": "", "timeout": 30}},
        "mini_version": "2.4.6",
        "exit_status": "Submitted",
    },
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug.", "extra": {"timestamp": 1000.0}},
        {
            "role": "assistant",
            "content": "Look first.",
            "extra": {
                "actions": [{"command": "echo hello", "tool_call_id": "c1"}],
                "timestamp": 1002.0,
            },
        },
        _tool("c1", "hello\n", 0, 1002.5),
        {
            "role": "assistant",
            "content": "Two at once.",
            "extra": {
                "actions": [
                    {"command": "printf abcdefg", "tool_call_id": "c2"},
                    {"command": "exit 3", "tool_call_id": "c3"},
                ],
                "timestamp": 1006.5,
            },
        },
        _tool("c2", "abcdefg", 0, 1007.5),
        _tool("c3", "", 3, 1007.5),
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}
#: What MINI replays as: per step think_s, recorded_s, exit code, output bytes.
MINI_STEPS = {
    "think_s": [2.0, 4.0, 0.0],
    "recorded_s": [0.5, 0.5, 0.5],
    "exit_code": [0, 0, 3],
    "output_bytes": [6, 7, 0],
}

#: mini-swe-agent's older text format: a ```bash block per message, observations in tags.
MINI_TEXT = {
    "info": {"exit_status": "Submitted"},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\necho one\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\none\n</output>"},
        {"role": "assistant", "content": "THOUGHT: two blocks\n```bash\na\n```\n```bash\nb\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action."},
        {"role": "assistant", "content": "THOUGHT: long\n\n```bash\nseq 1 100\n```"},
        {
            "role": "user",
            "content": "<returncode>1</returncode>\n<warning>too long</warning>\n"
            "<output_head>\nAB\n</output_head>\n<elided_chars>\n100 characters elided\n"
            "</elided_chars>\n<output_tail>\nCD\n</output_tail>",
        },
    ],
}
MINI_TEXT_STEPS = {"exit_code": [0, 1], "output_bytes": [4, 104]}

#: SWE-agent ``.traj``: no timestamps, no exit codes; an empty action ran nothing.
SWE_AGENT = {
    "environment": "swe_main",
    "trajectory": [
        {
            "action": "ls -a\n",
            "observation": "a\nbc\n",
            "response": "ls",
            "thought": "look",
            "execution_time": 0.25,
            "state": {"working_dir": "/testbed"},
        },
        {"action": "", "observation": "format error", "thought": "", "execution_time": 0.0},
        {"action": "submit", "observation": "", "thought": "done", "execution_time": 0.125},
    ],
    "info": {"exit_status": "submitted"},
}
SWE_AGENT_STEPS = {"recorded_s": [0.25, 0.125], "output_bytes": [5, 0]}


def _call(call: str, name: str, **arguments) -> dict:
    return {
        "id": call,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _result(call: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call, "name": "tool", "content": content}


#: Chat messages rows (OpenHands style): row-a makes 4 steps, row-b 1 (which diverges).
OPENAI_ROWS = [
    {
        "trajectory_id": "row-a",
        "trajectory": [
            {"role": "system", "content": "You are OpenHands."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _call("t0", "think", thought="plan"),
                    _call("t1", "execute_bash", command="echo hey"),
                ],
            },
            _result("t0", "Your thought has been logged."),
            _result("t1", "hey\n[The command completed with exit code 0.]"),
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _call(
                        "t2",
                        "str_replace_editor",
                        command="create",
                        path="notes.txt",
                        file_text="hello world\n",
                    ),
                ],
            },
            _result("t2", "File created successfully at: notes.txt"),
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    _call(
                        "t3",
                        "str_replace_editor",
                        command="str_replace",
                        path="notes.txt",
                        old_str="hello",
                        new_str="goodbye",
                    ),
                    _call("t4", "str_replace_editor", command="view", path="notes.txt"),
                    _call("t5", "finish", message="done"),
                ],
            },
            _result("t3", "The file notes.txt has been edited."),
            _result("t4", "     1\tgoodbye world\n"),
        ],
    },
    {
        "trajectory_id": "row-b",
        "messages": [
            {"role": "user", "content": "Check."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("b1", "bash", command="false")],
            },
            _result("b1", "\n[The command completed with exit code 0.]"),
        ],
    },
]
OPENAI_STEPS = {
    "row-a": {
        "kind": ["exec", "write_file", "write_file", "read_file"],
        "recorded": [45, 39, 35, 21],
    },
    "row-b": {"kind": ["exec"], "recorded": [42]},
}

#: Our own JSONL: one step per line.
ROLLOUT_TAX_LINES = [
    {"cmd": "echo 12345", "think_s": 2.0, "recorded_s": 0.1, "exit_code": 0, "output_bytes": 6},
    {"cmd": "exit 2", "think_s": 4.0, "recorded_s": 0.2, "exit_code": 2, "output_bytes": 0},
    {"cmd": "printf 12", "think_s": 0.0, "recorded_s": 0.0, "exit_code": 0, "output_bytes": 2},
]


def _created(content: str, created: int) -> dict:
    """A mini-swe-agent 1.x model response: its time is the provider's ``created`` (seconds)."""
    response = {"id": f"r{created}", "created": created, "model": "m", "object": "chat.completion"}
    return {"role": "assistant", "content": content, "extra": {"response": response}}


#: mini-swe-agent 1.x (``mini-swe-agent-1``): text actions, times only in
#: ``extra.response.created``; the second action timed out with no output (the timeout
#: template wraps it in a newline of its own).
MINI_V1 = {
    "info": {
        "config": {"environment": {"cwd": "/testbed", "timeout": 60}},
        "mini_version": "1.9.1",
    },
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Please solve this issue: the sum is wrong."},
        _created("THOUGHT: look\n\n```bash\nls\n```", 1_700_000_000),
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na\nb\n</output>"},
        _created("THOUGHT: wait\n\n```bash\nsleep 0.1\n```", 1_700_000_005),
        {
            "role": "user",
            "content": "The last command <command>sleep 100</command> timed out and has been "
            "killed.\nThe output of the command was:\n<output>\n\n</output>\nPlease try "
            "another command and make sure to avoid those requiring interactive input.",
        },
        _created("THOUGHT: fail\n\n```bash\nexit 2\n```", 1_700_000_016),
        {"role": "user", "content": "<returncode>2</returncode>\n<output>\n</output>"},
    ],
    "trajectory_format": "mini-swe-agent-1",
}
MINI_V1_STEPS = {
    "think_s": [None, 5.0, 11.0],
    "recorded_s": [None, None, None],
    "exit_code": [0, None, 2],
    "output_bytes": [4, 0, 0],
}

#: SWE-agent ``.traj`` whose actions call SWE-agent's tools (absent from a plain image).
SWE_AGENT_TOOLS = {
    "environment": "swe_main",
    "trajectory": [
        {"action": 'find_file "calc.py"\n', "observation": "Found 1 match", "execution_time": 0.5},
        {"action": "open calc.py 2\n", "observation": "[File: calc.py]", "execution_time": 0.25},
        {
            "action": "edit 2:2\n    return a + b\nend_of_edit\n",
            "observation": "File updated.",
            "execution_time": 1.5,
        },
        {"action": "ls\n", "observation": "calc.py\n", "execution_time": 0.125},
        {"action": "no-such-tool --x\n", "observation": "not found", "execution_time": 0.0},
        {"action": "submit\n", "observation": "diff", "execution_time": 0.75},
    ],
    "info": {"exit_status": "submitted"},
}
SWE_AGENT_TOOLS_STEPS = {
    "tool": ["find_file", "open", "edit", None, None, "submit"],
    "divergence": {"harness_tool": 4, "not_found": 1, "exit_code": 0, "output_size": 1},
}


def _xml(thought: str, name: str, **parameters: str) -> dict:
    """An assistant message with one SWE-smith XML call."""
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in parameters.items())
    return {"role": "assistant", "content": f"{thought}\n\n<function={name}>\n{body}</function>"}


def _observed(text: str) -> dict:
    return {"role": "user", "content": f"OBSERVATION:\n{text}"}


def _swe_smith_row(traj_id: str, command: str, output: str) -> dict:
    return {
        "instance_id": "calc__calc.1",
        "traj_id": traj_id,
        "model": "m",
        "resolved": True,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>fix add</pr_description>"},
            _xml("Look.", "bash", command=command),
            _observed(output),
            _xml(
                "Note it.",
                "str_replace_editor",
                command="create",
                path="notes.txt",
                file_text="\nhello\n",
            ),
            _observed("File created successfully at: notes.txt"),
            {
                "role": "assistant",
                "content": "Two.\n<function=bash>\n<parameter=command>a</parameter>\n</function>"
                "\n<function=bash>\n<parameter=command>b</parameter>\n</function>",
            },
            {"role": "user", "content": "Your last output included multiple tool calls!"},
            _xml("Done.", "submit"),
            _observed("diff --git a/calc.py b/calc.py\n"),
        ],
    }


#: SWE-smith rows: two runs of one instance, told apart by ``traj_id``; XML calls in content.
SWE_SMITH_ROWS = [
    _swe_smith_row("calc__calc.1.run1", "echo hi", "hi\n"),
    _swe_smith_row("calc__calc.1.run2", "printf four", "four"),
]
SWE_SMITH_STEPS = {
    "calc__calc.1.run1": {"command": ["echo hi", None, "submit"], "output_bytes": [3, 39, 31]},
    "calc__calc.1.run2": {"command": ["printf four", None, "submit"], "output_bytes": [4, 39, 31]},
}

#: A mini-swe-agent run that timed out before its first action.
ZERO_ACTION = {
    "info": {"exit_status": "TimeoutError", "config": {"environment": {"timeout": 30}}},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug.", "extra": {"timestamp": 1000.0}},
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}

#: Every format's rows, for the layouts: (file name, rows; one row is one document).
FORMATS = {
    "mini": ("fix.traj.json", [MINI]),
    "mini-v1": ("v1.traj.json", [MINI_V1]),
    "mini-text": ("old.traj.json", [MINI_TEXT]),
    "swe-agent": ("swe.traj", [SWE_AGENT]),
    "swe-agent-tools": ("tools.traj", [SWE_AGENT_TOOLS]),
    "openai": ("rows.jsonl", OPENAI_ROWS),
    "swe-smith": ("smith.jsonl", SWE_SMITH_ROWS),
    "rollout-tax": ("steps.jsonl", ROLLOUT_TAX_LINES),
    **WILD_FORMATS,
    **RUN_FORMATS,
}
#: How a file may lay its rows out: one indented JSON value, the same on one line, a JSON
#: array (even of one document), JSONL.
LAYOUTS = ("indented", "compact", "array", "jsonl")


def write_layout(path: Path, rows: list[dict], layout: str) -> Path:
    """``rows`` written to ``path`` in ``layout``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    value = rows[0] if len(rows) == 1 else rows
    text = {
        "indented": lambda: json.dumps(value, indent=2),
        "compact": lambda: json.dumps(value),
        "array": lambda: json.dumps(rows, indent=1),
        "jsonl": lambda: "".join(json.dumps(row) + "\n" for row in rows),
    }[layout]()
    path.write_text(text)
    return path


def write_mini_batch(directory: Path) -> Path:
    """A folder as mini-swe-agent's batch mode writes one: per-instance folders with
    ``<id>/<id>.traj.json``, ``preds.json``, its log and the exit statuses."""
    for instance, data in (("calc-1", MINI), ("calc-2", MINI_V1), ("calc-3", ZERO_ACTION)):
        write_json(
            directory / instance / f"{instance}.traj.json", {**data, "instance_id": instance}
        )
    preds = {f"calc-{n}": {"model_name_or_path": "m", "instance_id": f"calc-{n}",
                           "model_patch": ""} for n in (1, 2, 3)}  # fmt: skip
    write_json(directory / "preds.json", preds)
    (directory / "minisweagent.log").write_text("INFO Saved trajectory\n")
    (directory / "exit_statuses_1700000000.yaml").write_text("instances_by_exit_status: {}\n")
    return directory


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_all(directory: Path) -> dict[str, Path]:
    """One file of each format in ``directory``, by format name."""
    return {
        "mini": write_json(directory / "fix.traj.json", MINI),
        "mini-text": write_json(directory / "old.traj.json", MINI_TEXT),
        "swe-agent": write_json(directory / "swe.traj", SWE_AGENT),
        "openai": write_jsonl(directory / "rows.jsonl", OPENAI_ROWS),
        "rollout-tax": write_jsonl(directory / "steps.jsonl", ROLLOUT_TAX_LINES),
    }
