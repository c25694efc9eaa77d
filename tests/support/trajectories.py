"""Small trajectory files in each harness's format, written by the tests themselves, with the
figures a replay of each must reproduce."""

from __future__ import annotations

import json
from pathlib import Path


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
