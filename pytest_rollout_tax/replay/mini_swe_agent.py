"""mini-swe-agent trajectories: ``trajectory_format`` ``mini-swe-agent-1.1`` (v2: actions and
outputs in each message's ``extra``) and the older text format (a ```` ```bash ```` block per
assistant message, ``<returncode>``/``<output>`` in the observation)."""

from __future__ import annotations

import re
from typing import Any

from .model import RecordedStep, RecordedTrajectory, byte_length, exit_code, fail, number

_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.S)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*)</output>", re.S)
_HEAD = re.compile(r"<output_head>\n?(.*?)</output_head>", re.S)
_TAIL = re.compile(r"<output_tail>\n?(.*?)</output_tail>", re.S)
_ELIDED = re.compile(r"<elided_chars>\s*(\d+) characters elided\s*</elided_chars>")


def matches(data: Any) -> bool:
    """Whether ``data`` (a parsed JSON document) is a mini-swe-agent trajectory."""
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return False
    return str(data.get("trajectory_format", "")).startswith("mini-swe-agent") or (
        isinstance(data.get("info"), dict) and "trajectory" not in data
    )


def parse(data: dict, source: str, trajectory_id: str) -> RecordedTrajectory:
    """The recorded actions of a mini-swe-agent trajectory."""
    messages = data["messages"]
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(f"{source}: messages[{index}]", "expected an object")
    structured = any(_actions(m) is not None for m in messages if m.get("role") == "assistant")
    steps = _structured(messages, source) if structured else _text(messages)
    environment = data.get("info", {}).get("config", {}).get("environment", {})
    timeout = number(environment.get("timeout")) if isinstance(environment, dict) else None
    return RecordedTrajectory(
        source=source,
        format="mini-swe-agent",
        trajectory_id=trajectory_id,
        steps=tuple(steps),
        timeout=timeout if timeout and timeout > 0 else None,
    )


def _actions(message: dict) -> list | None:
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    return actions if isinstance(actions, list) else None


def _timestamp(message: dict) -> float | None:
    extra = message.get("extra")
    return number(extra.get("timestamp")) if isinstance(extra, dict) else None


def _structured(messages: list[dict], source: str) -> list[RecordedStep]:
    """v2 (``mini-swe-agent-1.1``): ``extra.actions[].command``; the observations that follow
    carry ``extra.raw_output``, ``extra.returncode`` and ``extra.timestamp``."""
    steps = []
    last_time = None  # the newest timestamp before the current message
    for index, message in enumerate(messages):
        stamp = _timestamp(message)
        actions = _actions(message) if message.get("role") == "assistant" else None
        if actions:
            observations = _observations(messages, index + 1)
            think = stamp - last_time if stamp is not None and last_time is not None else None
            ran = None
            if stamp is not None and observations and _timestamp(observations[0]) is not None:
                ran = max(0.0, _timestamp(observations[0]) - stamp) / len(actions)
            for position, action in enumerate(actions):
                where = f"{source}: messages[{index}].extra.actions[{position}]"
                command = action.get("command") if isinstance(action, dict) else None
                if not isinstance(command, str):
                    raise fail(where, "expected an object with a command string")
                seen = _matching(observations, action, position)
                extra = seen.get("extra", {}) if seen else {}
                steps.append(
                    RecordedStep(
                        command=command,
                        think_s=(max(0.0, think) if position == 0 else 0.0)
                        if think is not None
                        else None,
                        recorded_s=ran,
                        exit_code=exit_code(extra.get("returncode")),
                        output_bytes=byte_length(extra.get("raw_output")) if seen else None,
                    )
                )
        if stamp is not None:
            last_time = stamp
    return steps


def _observations(messages: list[dict], start: int) -> list[dict]:
    """The observation messages after ``start``, up to the next assistant message."""
    found = []
    for message in messages[start:]:
        if message.get("role") == "assistant":
            break
        extra = message.get("extra")
        if isinstance(extra, dict) and "raw_output" in extra:
            found.append(message)
    return found


def _matching(observations: list[dict], action: dict, position: int) -> dict | None:
    """The observation of ``action``: by its tool call id, else by position."""
    call = action.get("tool_call_id")
    if call is not None:
        for message in observations:
            if message.get("tool_call_id") == call:
                return message
    return observations[position] if position < len(observations) else None


def _text(messages: list[dict]) -> list[RecordedStep]:
    """The older text format: one ```` ```bash ```` block per assistant message, its
    observation the next user message (``<returncode>``, ``<output>`` or head/tail)."""
    steps = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        blocks = _BASH_BLOCK.findall(_content(message))
        if len(blocks) != 1:  # the agent rejected it as a format error: nothing ran
            continue
        reply = next((m for m in messages[index + 1 :] if m.get("role") in ("user", "tool")), None)
        code, size = _observation(_content(reply)) if reply else (None, None)
        steps.append(RecordedStep(command=blocks[0].strip(), exit_code=code, output_bytes=size))
    return steps


def _observation(text: str) -> tuple[int | None, int | None]:
    """Exit code and output size of a text observation (long outputs were cut: their size is
    head + elided + tail)."""
    code = _RETURNCODE.search(text)
    returncode = int(code.group(1)) if code else None
    head, tail, elided = _HEAD.search(text), _TAIL.search(text), _ELIDED.search(text)
    if head and tail and elided:
        size = byte_length(head.group(1)) + int(elided.group(1)) + byte_length(tail.group(1))
        return returncode, size
    output = _OUTPUT.search(text)
    return returncode, byte_length(output.group(1)) if output else None


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
