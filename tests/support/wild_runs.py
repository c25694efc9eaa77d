"""Trajectory files as real runs write them, round three: a host clock NTP stepped back
(mini-swe-agent 2.x and 1.17, OpenHands, SWE-agent), several attempts of one task under one
``instance_id`` (SWE-smith and nebius SWE-agent rows), and OpenHands V1 (the software agent
SDK's events in ``output.jsonl`` rows and event lists); written by the tests from each
harness's conventions, with the figures a replay of each must reproduce."""

from __future__ import annotations

import copy
import json

from .wild_trajectories import OPENHANDS_EVENTS, SWE_AGENT_ROWS


def _tool(call: str, output: str, code: int, stamp: float) -> dict:
    return {
        "role": "tool",
        "tool_call_id": call,
        "content": f"<returncode>{code}</returncode>\n<output>\n{output}</output>",
        "extra": {"raw_output": output, "returncode": code, "timestamp": stamp},
    }


def _asks(command: str, call: str, stamp: float) -> dict:
    return {
        "role": "assistant",
        "content": "THOUGHT: next",
        "extra": {"actions": [{"command": command, "tool_call_id": call}], "timestamp": stamp},
    }


#: mini-swe-agent 2.2.4 (``time.time()`` stamps): step 2's observation is stamped 0.44 s before
#: its action, and step 3's action 1.48 s before the observation before it.
MINI_CLOCK_BACK = {
    "info": {"config": {"environment": {"timeout": 60}}, "mini_version": "2.2.4"},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix add.", "extra": {"timestamp": 1000.0}},
        _asks("ls", "c1", 1003.0),
        _tool("c1", "a\nb\n", 0, 1003.5),
        _asks("cat a", "c2", 1006.0),
        _tool("c2", "x", 0, 1005.56),
        _asks("exit 1", "c3", 1004.08),
        _tool("c3", "", 1, 1005.08),
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}
MINI_CLOCK_BACK_STEPS = {
    "think_s": [3.0, 2.5, None],
    "recorded_s": [0.5, None, 1.0],
    "clock_back": [(), ("recorded_s",), ("think_s",)],
    "clock_back_s": [0.0, 0.44, 1.48],
}


def _said(role: str, content: str, stamp: float) -> dict:
    return {"role": role, "content": content, "timestamp": stamp}


#: mini-swe-agent 1.17 text format, each message stamped: step 1's observation is stamped 0.5 s
#: before its action.
MINI_TEXT_CLOCK_BACK = {
    "info": {"config": {"environment": {"timeout": 60}}, "mini_version": "1.17.0"},
    "messages": [
        _said("system", "You are a helpful assistant.", 1000.0),
        _said("user", "Fix add.", 1000.0),
        _said("assistant", "THOUGHT: look\n\n```bash\nls\n```", 1002.0),
        _said("user", "<returncode>0</returncode>\n<output>\na\n</output>", 1001.5),
        _said("assistant", "THOUGHT: fail\n\n```bash\nexit 1\n```", 1004.0),
        _said("user", "<returncode>1</returncode>\n<output>\n</output>", 1004.25),
    ],
    "trajectory_format": "mini-swe-agent-1",
}
MINI_TEXT_CLOCK_BACK_STEPS = {
    "think_s": [2.0, 2.5],
    "recorded_s": [None, 0.25],
    "clock_back": [("recorded_s",), ()],
}

#: OpenHands (V0) events: the second command's observation stamped 2 s before its action.
OPENHANDS_CLOCK_BACK = copy.deepcopy(OPENHANDS_EVENTS)
OPENHANDS_CLOCK_BACK[11]["timestamp"] = "2025-04-30T16:32:12.250000"
OPENHANDS_CLOCK_BACK_STEPS = {
    "recorded_s": [0.5, 0.25, 0.25, None],
    "clock_back": [(), (), (), ("recorded_s",)],
}


def _xml_row(instance_id: str, command: str, output: str) -> dict:
    """An early SWE-smith row: no ``traj_id``, so attempts of one task share ``instance_id``."""
    call = f"Run.\n\n<function=bash>\n<parameter=command>{command}</parameter>\n</function>"
    return {
        "instance_id": instance_id,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>fix add</pr_description>"},
            {"role": "assistant", "content": call},
            {"role": "user", "content": f"OBSERVATION:\n{output}"},
        ],
    }


#: Early SWE-smith rows: three attempts of one task, then another task's one.
SWE_SMITH_ATTEMPTS = [
    _xml_row("calc__calc.1", "echo one", "one\n"),
    _xml_row("calc__calc.2", "echo other", "other\n"),
    _xml_row("calc__calc.1", "echo two", "two\n"),
    _xml_row("calc__calc.1", "echo three", "three\n"),
]
SWE_SMITH_ATTEMPT_IDS = ["calc__calc.1#1", "calc__calc.2", "calc__calc.1#2", "calc__calc.1#3"]

#: nebius SWE-agent rows: two models' attempts of one task under one ``instance_id``.
NEBIUS_ATTEMPTS = [
    {**SWE_AGENT_ROWS[0], "model_name": "a"},
    {**SWE_AGENT_ROWS[1], "instance_id": SWE_AGENT_ROWS[0]["instance_id"], "model_name": "b"},
]
NEBIUS_ATTEMPT_IDS = ["calc__calc-1_1#1", "calc__calc-1_1#2"]

MINUTE = "2026-03-02T10:00:"


def _v1(kind: str, ident: str, second: str, source: str = "agent", **fields) -> dict:
    """An OpenHands V1 event as the SDK serializes it: its fields, then ``kind``."""
    return {"id": ident, "timestamp": MINUTE + second, "source": source, **fields, "kind": kind}


def _call(ident: str, second: str, tool: str, action: dict | None, response: str) -> dict:
    """An ``ActionEvent``: one tool call of the model response ``response``."""
    arguments = {k: v for k, v in (action or {}).items() if k != "kind"}
    return _v1(
        "ActionEvent",
        ident,
        second,
        thought=[{"cache_prompt": False, "type": "text", "text": "Next."}],
        reasoning_content=None,
        thinking_blocks=[],
        responses_reasoning_item=None,
        action=action,
        tool_name=tool,
        tool_call_id=f"call-{ident}",
        tool_call={
            "id": f"call-{ident}",
            "name": tool,
            "arguments": json.dumps(arguments),
            "origin": "completion",
        },
        llm_response_id=response,
        security_risk="UNKNOWN",
        critic_result=None,
        summary=None,
    )


def _answer(ident: str, second: str, tool: str, action: str, kind: str, text: str, **fields):
    """The ``ObservationEvent`` of the action ``action``."""
    content = [{"cache_prompt": False, "type": "text", "text": text}]
    observation = {"content": content, "is_error": False, **fields, "kind": kind}
    return _v1("ObservationEvent", ident, second, "environment", tool_name=tool,
               tool_call_id=f"call-{action}", observation=observation, action_id=action,
               extended_content=[])  # fmt: skip


def _terminal(command: str) -> dict:
    return {"command": command, "is_input": False, "timeout": None, "reset": False,
            "kind": "TerminalAction"}  # fmt: skip


def _ran(ident: str, second: str, action: str, command: str, text: str, code: int) -> dict:
    metadata = {"exit_code": code, "pid": -1, "username": None, "hostname": None,
                "working_dir": "/workspace", "py_interpreter_path": None, "prefix": "",
                "suffix": f"\n[The command completed with exit code {code}.]"}  # fmt: skip
    return _answer(ident, second, "terminal", action, "TerminalObservation", text,
                   command=command, exit_code=code, timeout=False, metadata=metadata,
                   full_output_save_dir=None)  # fmt: skip


def _stats(ident: str, second: str) -> dict:
    """The statistics update the SDK stamps right after each model response."""
    return _v1("ConversationStateUpdateEvent", ident, second, "environment", key="stats",
               value={"usage_to_metrics": {}})  # fmt: skip


VIEW = {
    "command": "view",
    "path": "/workspace/calc.py",
    "file_text": None,
    "old_str": None,
    "new_str": None,
    "insert_line": None,
    "view_range": None,
    "kind": "FileEditorAction",
}
#: OpenHands V1 events: a command, a file view, two calls of one response, a think, a call the
#: SDK could not parse (its error), a grep whose answer is stamped 0.5 s before it, a finish.
V1_EVENTS = [
    _v1(
        "SystemPromptEvent",
        "e00",
        "00.000000",
        system_prompt={"type": "text", "text": "Hi."},
        tools=[],
    ),
    _v1(
        "MessageEvent",
        "e01",
        "00.500000",
        "user",
        llm_message={"role": "user", "content": [{"type": "text", "text": "Fix add."}]},
    ),
    _stats("e02", "03.990000"),
    _call("e03", "04.000000", "terminal", _terminal("ls"), "r1"),
    _ran("e04", "04.250000", "e03", "ls", "a\nb", 0),
    _stats("e05", "06.000000"),
    _call("e06", "06.250000", "file_editor", VIEW, "r2"),
    _answer(
        "e07",
        "06.500000",
        "file_editor",
        "e06",
        "FileEditorObservation",
        "1\tdef add",
        command="view",
        path="/workspace/calc.py",
        prev_exist=True,
        old_content=None,
        new_content=None,
    ),
    _call("e08", "09.500000", "terminal", _terminal("exit 2"), "r3"),
    _call("e09", "09.500000", "terminal", _terminal("echo hi"), "r3"),
    _ran("e10", "10.500000", "e08", "exit 2", "", 2),
    _ran("e11", "10.750000", "e09", "echo hi", "hi", 0),
    _call("e12", "12.000000", "think", {"thought": "plan", "kind": "ThinkAction"}, "r4"),
    _answer(
        "e13", "12.125000", "think", "e12", "ThinkObservation", "Your thought has been logged."
    ),
    _call("e14", "12.500000", "terminal", None, "r5"),
    _v1(
        "AgentErrorEvent",
        "e15",
        "12.750000",
        tool_name="terminal",
        tool_call_id="call-e14",
        error="Error validating args",
        classification=None,
    ),
    _call(
        "e16",
        "14.000000",
        "grep",
        {"pattern": "add", "path": None, "include": None, "kind": "GrepAction"},
        "r6",
    ),
    _answer(
        "e17",
        "13.500000",
        "grep",
        "e16",
        "GrepObservation",
        "calc.py",
        matches=["calc.py"],
        pattern="add",
        search_path="/workspace",
        include_pattern=None,
        truncated=False,
    ),
    _call("e18", "15.250000", "finish", {"message": "done", "kind": "FinishAction"}, "r7"),
    _answer("e19", "15.500000", "finish", "e18", "FinishObservation", "done"),
]
V1_STEPS = {
    "command": ["ls", None, "exit 2", "echo hi", None],
    "think_s": [3.5, 2.0, 3.0, 0.0, 1.25],
    "recorded_s": [0.25, 0.25, 1.0, 0.25, None],
    "exit_code": [0, None, 2, 0, None],
    "output_bytes": [3, 9, 0, 2, 7],
    "clock_back": [(), (), (), (), ("recorded_s",)],
}
V1_WALL_S = 16.0


def _eval_output(instance_id: str, attempt: int, history: list[dict]) -> dict:
    """A row of the V1 evaluation harness's ``output.jsonl`` (``EvalOutput``)."""
    return {
        "instance_id": instance_id,
        "attempt": attempt,
        "test_result": {"git_patch": ""},
        "instruction": "Fix add.",
        "metadata": {"dataset": "calc", "max_iterations": 30, "eval_output_dir": "out"},
        "history": history,
        "metrics": {"accumulated_cost": 0.0},
        "error": None,
    }


#: The V1 harness's output.jsonl: two attempts of one instance, then another instance.
V1_OUTPUT = [
    _eval_output("app__app-1", 1, V1_EVENTS),
    _eval_output("app__app-1", 2, [
        V1_EVENTS[1],
        _call("f01", "02.000000", "terminal", _terminal("pytest"), "s1"),
        _ran("f02", "05.000000", "f01", "pytest", "1 failed", 1),
    ]),
    _eval_output("app__app-2", 1, [
        V1_EVENTS[1],
        _call("g01", "01.000000", "terminal", _terminal("true"), "t1"),
        _ran("g02", "01.500000", "g01", "true", "", 0),
    ]),
]  # fmt: skip
V1_OUTPUT_IDS = ["app__app-1#1", "app__app-1#2", "app__app-2"]

#: The layouts above, by name: (file name, rows; one row is one document).
RUN_FORMATS = {
    "mini-clock-back": ("ntp.traj.json", [MINI_CLOCK_BACK]),
    "mini-text-clock-back": ("ntp117.traj.json", [MINI_TEXT_CLOCK_BACK]),
    "openhands-clock-back": ("back-events.json", OPENHANDS_CLOCK_BACK),
    "swe-smith-attempts": ("smith-early.jsonl", SWE_SMITH_ATTEMPTS),
    "nebius-attempts": ("nebius-groups.jsonl", NEBIUS_ATTEMPTS),
    "openhands-v1": ("v1-output.jsonl", V1_OUTPUT),
    "openhands-v1-events": ("v1-events.json", V1_EVENTS),
}
