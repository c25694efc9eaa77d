"""OpenAI chat messages with ``tool_calls``, as trajectory datasets publish them (SWE-rebench
OpenHands, SWE-smith, SWE-Gym): rows of ``{"trajectory_id", "trajectory" | "messages"}``."""

from __future__ import annotations

import json
import re
from typing import Any

from .model import EDIT_COMMANDS, FileEdit, RecordedStep, RecordedTrajectory, byte_length, fail

#: Tools whose ``command`` argument is a shell command.
SHELL_TOOLS = ("bash", "execute_bash")
EDITOR_TOOL = "str_replace_editor"
#: Tools that make no step in the sandbox.
NOT_STEPS = ("think", "finish")
#: How OpenHands appends a command's exit code to its output.
_EXIT_CODE = re.compile(r"exit code (-?\d+)")


def messages_of(row: Any) -> list | None:
    """A row's messages (``trajectory`` or ``messages``), or None if it has none."""
    if not isinstance(row, dict):
        return None
    for key in ("trajectory", "messages"):
        value = row.get(key)
        if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
            return value
    return None


def matches(row: Any) -> bool:
    """Whether ``row`` (a JSON document or a JSONL row) is a chat-messages trajectory."""
    return messages_of(row) is not None


def parse(row: dict, where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded tool calls of one row; ``where`` (``path:line``) names it in errors."""
    messages = messages_of(row)
    if messages is None:
        raise fail(where, "expected a 'trajectory' or 'messages' list of chat messages")
    outputs = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    steps = []
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for position, call in enumerate(calls or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise fail(
                    f"{where}: messages[{index}].tool_calls[{position}]",
                    "expected {function: {name, arguments}}",
                )
            name = function["name"]
            if name in NOT_STEPS:
                continue
            arguments = _arguments(function.get("arguments"))
            if arguments is None:  # the harness could not run it either
                continue
            output = outputs.get(call.get("id"))
            text = _text(output.get("content")) if output else None
            step = RecordedStep(output_bytes=byte_length(text) if output else None)
            if name in SHELL_TOOLS and isinstance(arguments.get("command"), str):
                codes = _EXIT_CODE.findall(text or "")
                step = RecordedStep(
                    command=arguments["command"],
                    exit_code=int(codes[-1]) if codes else None,
                    output_bytes=step.output_bytes,
                )
            elif name == EDITOR_TOOL:
                step = RecordedStep(edit=_edit(arguments), output_bytes=step.output_bytes)
            steps.append(step)
    return RecordedTrajectory(
        source=source, format="openai-messages", trajectory_id=trajectory_id, steps=tuple(steps)
    )


def _arguments(value: Any) -> dict | None:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _edit(arguments: dict) -> FileEdit | None:
    """The file edit of a ``str_replace_editor`` call; None for one the file API cannot do
    (``undo_edit``), which replays by its output size."""
    command, path = arguments.get("command"), arguments.get("path")
    if command not in EDIT_COMMANDS or not isinstance(path, str) or not path:
        return None
    line = arguments.get("insert_line")
    return FileEdit(
        command=command,
        path=path,
        file_text=_string(arguments.get("file_text")),
        old_str=_string(arguments.get("old_str")),
        new_str=_string(arguments.get("new_str")),
        insert_line=line if isinstance(line, int) and not isinstance(line, bool) else None,
    )


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
