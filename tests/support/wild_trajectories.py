"""Trajectory files in the layouts harnesses and datasets publish (SWE-agent 0.x rows,
mini-swe-agent text in chat rows, OpenHands without function calling, OpenHands' own output
and event lists, a mini-swe-agent 1.x run with its own observation template), written by the
tests from each format's conventions, with the figures a replay of each must reproduce."""

from __future__ import annotations

STATE = "\n(Open file: {})\n(Current directory: /calc)\nbash-$"


def _ai(text: str) -> dict:
    return {"role": "ai", "text": text, "mask": False, "system_prompt": None}


def _seen(output: str, open_file: str = "n/a") -> dict:
    """An observation turn as SWE-agent 0.x renders it: the output, then the state line."""
    return {"role": "user", "text": output + STATE.format(open_file), "mask": False}


#: SWE-agent 0.x rows (``trajectory`` of role/text turns): the command is an ai turn's last
#: fenced block; a turn without one was a format error; the final submit has no observation.
SWE_AGENT_ROWS = [
    {
        "instance_id": "calc__calc-1_1",
        "model_name": "m",
        "target": True,
        "trajectory": [
            {"role": "system", "text": "SETTING: you are an autonomous programmer."},
            _seen("We're currently solving the following issue: add is wrong."),
            _ai("Let's look first.\n```\nls -F\n```"),
            _seen("calc.py\ntests/\n"),
            _ai("I think the bug is in add."),
            {"role": "user", "text": "Your output was not formatted correctly."},
            _ai("Fix it.\n```\nedit 2:2\n    return a + b\nend_of_edit\n```"),
            _seen("Your command ran successfully and did not produce any output.", "/calc/c.py"),
            _ai("Done.\n```\nsubmit\n```"),
        ],
        "exit_status": "submitted",
    },
    {
        "instance_id": "calc__calc-2_1",
        "model_name": "m",
        "target": False,
        "trajectory": [
            {"role": "system", "text": "SETTING: you are an autonomous programmer."},
            _seen("We're currently solving the following issue: sub is wrong."),
            _ai("Run it.\n```bash\npython -c 'print(1)'\n```"),
            _seen("1\n"),
            _ai("Done.\n```\nsubmit\n```"),
            _seen("diff --git a b\n"),
        ],
        "exit_status": "submitted",
    },
]
SWE_AGENT_ROWS_STEPS = {
    "calc__calc-1_1": {
        "command": ["ls -F", "edit 2:2\n    return a + b\nend_of_edit", "submit"],
        "output_bytes": [15, 0, None],
        "tool": [None, "edit", "submit"],
    },
    "calc__calc-2_1": {
        "command": ["python -c 'print(1)'", "submit"],
        "output_bytes": [2, 15],
        "tool": [None, "submit"],
    },
}


def _says(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _mini_turns(*, submit: bool) -> list[dict]:
    turns = [
        _says("system", "Your response must contain exactly ONE bash code block."),
        _says("user", "Fix the bug in add."),
        _says("assistant", "THOUGHT: look\n\n```bash\nls\n```"),
        _says("user", "<returncode>0</returncode>\n<output>\na\nb\n</output>"),
        _says("assistant", "THOUGHT: two\n\n```bash\na\n```\n\n```bash\nb\n```"),
        _says("user", "Please always provide EXACTLY ONE action in triple backticks."),
        _says("assistant", "THOUGHT: fail\n\n```bash\nexit 3\n```"),
        _says("user", "<returncode>3</returncode>\n<output>\n</output>"),
    ]
    if submit:
        turns.append(_says("assistant", "THOUGHT: done\n\n<function=submit>\n</function>"))
    return turns


#: Chat rows whose assistant turns carry mini-swe-agent's text actions (```bash blocks) and
#: whose observations are its <returncode>/<output> tags; one ends with a SWE-smith submit.
MINI_TEXT_ROWS = [
    {"instance_id": "calc.1", "model": "m", "messages": _mini_turns(submit=True)},
    {"instance_id": "calc.2", "model": "m", "messages": _mini_turns(submit=False)},
]
MINI_TEXT_ROWS_STEPS = {
    "calc.1": {
        "command": ["ls", "exit 3", "submit"],
        "exit_code": [0, 3, None],
        "output_bytes": [4, 0, None],
    },
    "calc.2": {"command": ["ls", "exit 3"], "exit_code": [0, 3], "output_bytes": [4, 0]},
}

LISTING = "app.py\n[The command completed with exit code 0.]"
VIEW = "Here's the result of running `cat -n` on /workspace/app.py:\n     1\tprint(1)\n"
#: OpenHands without function calling: XML calls in the text, answers after OpenHands' header.
OPENHANDS_TEXT_ROWS = [
    {
        "instance_id": "app-1",
        "messages": [
            _says("system", "You are OpenHands agent."),
            _says("user", "Print two."),
            _says(
                "assistant",
                "Look.\n\n<function=execute_bash>\n<parameter=command>\nls /workspace\n"
                "</parameter>\n</function>",
            ),
            _says("user", f"EXECUTION RESULT of [execute_bash]:\n{LISTING}"),
            _says(
                "assistant",
                "<function=str_replace_editor>\n<parameter=command>view</parameter>\n"
                "<parameter=path>/workspace/app.py</parameter>\n</function>",
            ),
            _says("user", f"EXECUTION RESULT of [str_replace_editor]:\n{VIEW}"),
            _says("assistant", "Done.\n<function=finish>\n</function>"),
        ],
    }
]
OPENHANDS_TEXT_STEPS = {
    "command": ["ls /workspace", None],
    "exit_code": [0, None],
    "output_bytes": [len(LISTING), len(VIEW)],
}

DAY = "2025-04-30T16:32:"


def _event(ident: int, second: str, source: str = "agent", **fields) -> dict:
    return {"id": ident, "timestamp": DAY + second, "source": source, "message": "", **fields}


def _ran(ident: int, second: str, cause: int, content: str, code: int) -> dict:
    extras = {"command": "", "metadata": {"exit_code": code, "suffix": ""}, "hidden": False}
    return _event(ident, second, observation="run", cause=cause, content=content, extras=extras)


#: OpenHands events: a command, a read, an edit, a thought, an old-style exit code, a finish.
OPENHANDS_EVENTS = [
    _event(0, "00.000000", action="system", args={"content": "You are OpenHands agent."}),
    _event(1, "00.500000", "user", action="message", args={"content": "Fix add."}),
    _event(2, "03.000000", action="run", args={"command": "ls", "is_input": False}),
    _ran(3, "03.500000", 2, "a\nb\n", 0),
    _event(4, "07.500000", action="read", args={"path": "/workspace/calc.py"}),
    _event(5, "07.750000", observation="read", cause=4, content="def add():\n", extras={}),
    _event(
        6,
        "10.750000",
        action="edit",
        args={
            "command": "str_replace",
            "path": "/workspace/calc.py",
            "old_str": "add",
            "new_str": "plus",
            "file_text": None,
            "insert_line": None,
        },
    ),
    _event(7, "11.000000", observation="edit", cause=6, content="The file was edited.", extras={}),
    _event(8, "12.000000", action="think", args={"thought": "plan"}),
    _event(9, "12.250000", observation="think", cause=8, content="Your thought has been logged."),
    _event(10, "14.250000", action="run", args={"command": "exit 2", "is_input": False}),
    {**_ran(11, "15.250000", 10, "", 0), "extras": {"command": "exit 2", "exit_code": 2}},
    _event(12, "16.000000", action="finish", args={"final_thought": "done"}),
]
OPENHANDS_EVENT_STEPS = {
    "kind": ["command", "view", "str_replace", "command"],
    "think_s": [2.5, 4.0, 3.0, 2.0],
    "recorded_s": [0.5, 0.25, 0.25, 1.0],
    "exit_code": [0, None, None, 2],
    "output_bytes": [4, 11, 20, 0],
}
#: OpenHands' evaluation output.jsonl: one row per instance; the second saved its history
#: as [action, observation] pairs without ids or timestamps, as older versions did.
OPENHANDS_OUTPUT = [
    {
        "instance_id": "calc__calc-1",
        "instruction": "Fix add.",
        "metadata": {"agent_class": "CodeActAgent", "max_iterations": 30},
        "history": OPENHANDS_EVENTS,
        "metrics": {},
        "error": None,
    },
    {
        "instance_id": "calc__calc-2",
        "instruction": "Say hi.",
        "metadata": {"agent_class": "CodeActAgent"},
        "history": [
            [
                {"source": "agent", "action": "run", "args": {"command": "echo hi"}},
                {
                    "source": "agent",
                    "observation": "run",
                    "content": "hi\n",
                    "extras": {"exit_code": 0},
                },
            ],
            [
                {"source": "agent", "action": "finish", "args": {}},
                {"source": "agent", "observation": "null", "content": ""},
            ],
        ],
        "error": None,
    },
]

#: mini-swe-agent 1.x whose run configured its own observation template (the output dict,
#: rendered as Python writes it).
MINI_V1_TEMPLATE = {
    "info": {
        "config": {
            "agent": {"action_observation_template": "Observation: {{output}}\n"},
            "environment": {"timeout": 60},
        },
        "mini_version": "1.9.1",
    },
    "messages": [
        _says("system", "You are a helpful assistant."),
        _says("user", "Fix add."),
        _says("assistant", "THOUGHT: look\n\n```bash\nprintf 'abc\\n'\n```"),
        _says("user", "Observation: {'output': 'abc\\n', 'returncode': 0}"),
        _says("assistant", "THOUGHT: fail\n\n```bash\nexit 4\n```"),
        _says("user", "Observation: {'output': '', 'returncode': 4}"),
    ],
    "trajectory_format": "mini-swe-agent-1",
}
MINI_V1_TEMPLATE_STEPS = {"exit_code": [0, 4], "output_bytes": [4, 0]}

#: The layouts above, by name: (file name, rows; one row is one document).
WILD_FORMATS = {
    "swe-agent-rows": ("nebius.jsonl", SWE_AGENT_ROWS),
    "mini-swe-agent-text-rows": ("mini-rows.jsonl", MINI_TEXT_ROWS),
    "openhands-text-rows": ("play.jsonl", OPENHANDS_TEXT_ROWS),
    "openhands": ("output.jsonl", OPENHANDS_OUTPUT),
    "openhands-events": ("events.json", OPENHANDS_EVENTS),
    "mini-template": ("template.traj.json", [MINI_V1_TEMPLATE]),
}
