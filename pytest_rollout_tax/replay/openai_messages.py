"""OpenAI chat messages with ``tool_calls``, as trajectory datasets publish them (SWE-rebench
OpenHands, SWE-Gym), or with SWE-smith's XML calls in the content: rows of
``{"trajectory_id", "trajectory" | "messages"}``."""

from __future__ import annotations

import json
import re
from typing import Any

from . import swe_smith
from .model import EDIT_COMMANDS, FileEdit, RecordedStep, RecordedTrajectory, byte_length, fail
from .swe_agent import tool_of

#: Tools whose ``command`` argument is a shell command.
SHELL_TOOLS = ("bash", "execute_bash")
EDITOR_TOOL = "str_replace_editor"
#: Tools that make no step in the sandbox.
NOT_STEPS = ("think", "finish")
#: How OpenHands appends a command's exit code to its output.
_EXIT_CODE = re.compile(r"exit code (-?\d+)")


def messages_of(row: Any) -> list | None:
    """A row's messages (``trajectory`` or ``messages``, a list or a JSON string of one, as
    some datasets store it), or None if it has none."""
    if not isinstance(row, dict):
        return None
    for key in ("trajectory", "messages"):
        value = row.get(key)
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
            return value
    return None


def matches(row: Any) -> bool:
    """Whether ``row`` (a JSON document or a JSONL row) is a chat-messages trajectory."""
    return messages_of(row) is not None


def parse(row: dict, where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded tool calls of one row (``tool_calls``, else SWE-smith's XML calls in the
    message content); ``where`` (``path:line``) names it in errors."""
    messages = messages_of(row)
    if messages is None:
        raise fail(where, "expected a 'trajectory' or 'messages' list of chat messages")
    outputs = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    steps = []
    xml = False
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if not calls:
            found = swe_smith.call(_text(message.get("content")))
            if found is not None:
                xml = True
                reply = _reply(messages, index)
                text = swe_smith.observation(_text(reply.get("content"))) if reply else None
                steps.extend(_step(*found, text))
            continue
        for position, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise fail(
                    f"{where}: messages[{index}].tool_calls[{position}]",
                    "expected {function: {name, arguments}}",
                )
            arguments = _arguments(function.get("arguments"))
            if arguments is None:  # the harness could not run it either
                continue
            output = outputs.get(call.get("id"))
            text = _text(output.get("content")) if output else None
            steps.extend(_step(function["name"], arguments, text))
    return RecordedTrajectory(
        source=source,
        format="swe-smith" if xml else "openai-messages",
        trajectory_id=trajectory_id,
        steps=tuple(steps),
    )


def _step(name: str, arguments: dict, text: str | None) -> list[RecordedStep]:
    """The step of one call (none for ``think`` and ``finish``); ``text`` its output (None:
    no output was recorded)."""
    if name in NOT_STEPS:
        return []
    size = byte_length(text) if text is not None else None
    if name in SHELL_TOOLS and isinstance(arguments.get("command"), str):
        codes = _EXIT_CODE.findall(text or "")
        code = int(codes[-1]) if codes else None
        return [RecordedStep(command=arguments["command"], exit_code=code, output_bytes=size)]
    if name == EDITOR_TOOL:
        return [RecordedStep(edit=_edit(arguments), output_bytes=size)]
    tool = tool_of(name)
    if tool is not None:  # a SWE-agent tool called as a function: its command line
        words = [name, *(str(value) for value in arguments.values())]
        return [RecordedStep(command=" ".join(words), output_bytes=size, tool=tool)]
    return [RecordedStep(output_bytes=size)]


def _reply(messages: list[dict], index: int) -> dict | None:
    """The observation of the assistant message at ``index``: the next user or tool message
    before another assistant message."""
    for message in messages[index + 1 :]:
        if message.get("role") == "assistant":
            return None
        if message.get("role") in ("user", "tool"):
            return message
    return None


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
