"""OpenAI chat messages with ``tool_calls``, as trajectory datasets publish them (SWE-rebench
OpenHands, SWE-Gym), or with SWE-smith's XML calls in the content: rows of
``{"trajectory_id", "trajectory" | "messages"}``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from . import mini_swe_agent, swe_smith
from .mini_swe_agent import BASH_BLOCK
from .model import (
    EDIT_COMMANDS,
    FileEdit,
    Format,
    RecordedStep,
    RecordedTrajectory,
    byte_length,
    fail,
)
from .swe_agent import tool_of

#: Tools whose ``command`` argument is a shell command.
SHELL_TOOLS = ("bash", "execute_bash")
EDITOR_TOOL = "str_replace_editor"
#: Tools that make no step in the sandbox.
NOT_STEPS = ("think", "finish")
#: OpenHands' names without function calling: ``finish`` ends the run, it runs nothing.
OPENHANDS_ALIASES = {"execute_bash": "bash"}
#: How OpenHands appends a command's exit code to its output.
_EXIT_CODE = re.compile(r"exit code (-?\d+)")


def messages_of(row: Any) -> list[Any] | None:
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


def parse(row: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded tool calls of one row: ``tool_calls``, else the one text action of each
    assistant message (an XML call, SWE-smith's or OpenHands', or mini-swe-agent's
    ```` ```bash ```` block); ``where`` (``path:line``) names it in errors."""
    messages = messages_of(row)
    if messages is None:
        raise fail(where, "expected a 'trajectory' or 'messages' list of chat messages")
    outputs = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    openhands = any(swe_smith.openhands(_text(m.get("content"))) for m in messages
                    if m.get("role") in ("user", "tool"))  # fmt: skip
    steps: list[RecordedStep] = []
    conventions: set[str] = set()
    unread = None
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if not calls:
            found = _text_action(_text(message.get("content")), openhands)
            if found is None:
                if unread is None and looks_like_action(_text(message.get("content"))):
                    unread = index
                continue
            convention, step = found
            conventions.add(convention)
            reply = _reply(messages, index)
            text = _text(reply.get("content")) if reply else None
            steps.extend(step(text))
            continue
        conventions.add("openai-messages")
        for position, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise fail(
                    f"{where}: messages[{index}].tool_calls[{position}]",
                    "expected {function: {name, arguments}}",
                )
            arguments = _arguments(function.get("arguments"))
            if arguments is None:  # the harness could not run it either
                unread = index if unread is None else unread
                continue
            output = outputs.get(call.get("id"))
            text = _text(output.get("content")) if output else None
            steps.extend(_step(function["name"], arguments, text))
    if not conventions and unread is not None:
        raise fail(
            f"{where}: messages[{unread}]",
            f"assistant turns that look like {_resembles(messages[unread])} but hold no action "
            "this tool can read (one ```bash block, one <function=...> call or tool_calls)",
        )
    return RecordedTrajectory(
        source=source,
        format=_format(conventions, openhands),
        trajectory_id=trajectory_id,
        steps=tuple(steps),
    )


def _text_action(
    text: str, openhands: bool
) -> tuple[str, Callable[[str | None], list[RecordedStep]]] | None:
    """The one action written in an assistant message's text, and how to make its step from
    its observation's text: an XML call (SWE-smith's, or OpenHands' without function calling),
    else mini-swe-agent's one ```` ```bash ```` block."""
    found = swe_smith.call(text, OPENHANDS_ALIASES if openhands else swe_smith.ALIASES)
    if found is not None:
        return "xml", lambda reply: _step(
            *found, swe_smith.observation(reply) if reply is not None else None
        )
    blocks = BASH_BLOCK.findall(text)
    if len(blocks) != 1:  # none, or several: the agent refused it as a format error
        return None

    def bash(reply: str | None) -> list[RecordedStep]:
        code, size = mini_swe_agent.observation(reply) if reply is not None else (None, None)
        return [RecordedStep(command=blocks[0].strip(), exit_code=code, output_bytes=size)]

    return "bash", bash


def _format(conventions: set[str], openhands: bool) -> Format:
    """A row's format, by the conventions its actions were written in."""
    if "bash" in conventions:
        return "mini-swe-agent-text-rows"
    if "xml" in conventions:
        return "openhands-text-rows" if openhands else "swe-smith"
    return "openai-messages"


def looks_like_action(text: str) -> bool:
    """Whether an assistant message's text looks like an action of some harness."""
    return "```" in text or "<function=" in text


def _resembles(message: dict[str, Any]) -> str:
    text = _text(message.get("content"))
    if message.get("tool_calls"):
        return "OpenAI tool_calls"
    if "<function=" in text:
        return "SWE-smith/OpenHands XML calls (<function=NAME>)"
    return "mini-swe-agent text actions (```bash blocks)"


def _step(name: str, arguments: dict[str, Any], text: str | None) -> list[RecordedStep]:
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
        return [RecordedStep(edit=edit_of(arguments), output_bytes=size)]
    tool = tool_of(name)
    if tool is not None:  # a SWE-agent tool called as a function: its command line
        words = [name, *(str(value) for value in arguments.values())]
        return [RecordedStep(command=" ".join(words), output_bytes=size, tool=tool)]
    return [RecordedStep(output_bytes=size)]


def _reply(messages: list[dict[str, Any]], index: int) -> dict[str, Any] | None:
    """The observation of the assistant message at ``index``: the next user or tool message
    before another assistant message."""
    for message in messages[index + 1 :]:
        if message.get("role") == "assistant":
            return None
        if message.get("role") in ("user", "tool"):
            return message
    return None


def _arguments(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def edit_of(arguments: dict[str, Any]) -> FileEdit | None:
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
