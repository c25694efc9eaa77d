"""mini-swe-agent trajectories: ``trajectory_format`` ``mini-swe-agent-1.1`` (v2: actions and
outputs in each message's ``extra``) and the older text format (a ```` ```bash ```` block per
assistant message, ``<returncode>``/``<output>`` in the observation)."""

from __future__ import annotations

import re
from typing import Any

from .model import (
    Clock,
    Interval,
    RecordedStep,
    RecordedTrajectory,
    byte_length,
    exit_code,
    fail,
    interval,
    number,
    timed,
)
from .observation_template import Parse, compile_template

#: Where a 1.x recording keeps the template its observations were written with.
TEMPLATE_FIELD = "info.config.agent.action_observation_template"
#: Where a recording names its step timeout.
TIMEOUT_FIELD = "info.config.environment.timeout"
#: How mini-swe-agent 1.x's timeout template starts a timed-out command's observation.
_TIMED_OUT = "timed out and has been killed"

BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.S)
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


def parse(data: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded actions of a mini-swe-agent trajectory; ``where`` names it in errors."""
    messages = data["messages"]
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise fail(f"{where}: messages[{index}]", "expected an object")
    structured = any(_actions(m) is not None for m in messages if m.get("role") == "assistant")
    clock = Clock()
    info = data.get("info")
    config = info.get("config") if isinstance(info, dict) else None
    if structured:
        steps = _structured(messages, where, clock)
    else:
        steps = _text(messages, clock, _template(config))
    environment = config.get("environment") if isinstance(config, dict) else None
    timeout = number(environment.get("timeout")) if isinstance(environment, dict) else None
    known = timeout is not None and timeout > 0
    return RecordedTrajectory(
        source=source,
        format="mini-swe-agent",
        trajectory_id=trajectory_id,
        steps=tuple(steps),
        timeout=timeout if known else None,
        timeout_field=TIMEOUT_FIELD if known else None,
        wall_s=clock.wall_s,
    )


def _actions(message: dict[str, Any]) -> list[Any] | None:
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    return actions if isinstance(actions, list) else None


def _stamp(message: dict[str, Any]) -> float | None:
    """A v2 message's time: ``extra.timestamp``, else the top-level ``timestamp``."""
    extra = message.get("extra")
    if isinstance(extra, dict) and number(extra.get("timestamp")) is not None:
        return number(extra["timestamp"])
    return number(message.get("timestamp"))


def _structured(messages: list[dict[str, Any]], where: str, clock: Clock) -> list[RecordedStep]:
    """v2 (``mini-swe-agent-1.1``): ``extra.actions[].command``; the observations that follow
    carry ``extra.raw_output``, ``extra.returncode`` and ``extra.timestamp``."""
    steps: list[RecordedStep] = []
    for index, message in enumerate(messages):
        stamp = _stamp(message)
        actions = _actions(message) if message.get("role") == "assistant" else None
        think = clock.advance(stamp)
        if not actions:
            continue
        observations = _observations(messages, index + 1)
        seen_at = _stamp(observations[0]) if observations else None
        ran = _share(interval(stamp, seen_at), len(actions))
        later = Interval() if think == Interval() else Interval(0.0)  # the first has it
        for position, action in enumerate(actions):
            command = action.get("command") if isinstance(action, dict) else None
            if not isinstance(command, str):
                raise fail(
                    f"{where}: messages[{index}].extra.actions[{position}]",
                    "expected an object with a command string",
                )
            seen = _matching(observations, action, position)
            extra = seen.get("extra", {}) if seen else {}
            steps.append(
                RecordedStep(
                    command=command,
                    exit_code=exit_code(extra.get("returncode")),
                    output_bytes=byte_length(extra.get("raw_output")) if seen else None,
                    **timed(think if position == 0 else later, ran),
                )
            )
    return steps


def _share(ran: Interval, actions: int) -> Interval:
    """Each action's part of the time the actions of one message ran together (mini-swe-agent
    stamps their observations after all of them ran)."""
    seconds = None if ran.seconds is None else ran.seconds / actions
    return Interval(seconds, ran.back_s / actions)


def _observations(messages: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """The observation messages after ``start``, up to the next assistant message."""
    found = []
    for message in messages[start:]:
        if message.get("role") == "assistant":
            break
        extra = message.get("extra")
        if isinstance(extra, dict) and "raw_output" in extra:
            found.append(message)
    return found


def _matching(
    observations: list[dict[str, Any]], action: dict[str, Any], position: int
) -> dict[str, Any] | None:
    """The observation of ``action``: by its tool call id, else by position."""
    call = action.get("tool_call_id")
    if call is not None:
        for message in observations:
            if message.get("tool_call_id") == call:
                return message
    return observations[position] if position < len(observations) else None


def _template(config: object) -> Parse | None:
    """The reader of the run's own ``action_observation_template``, where it records one
    that a pattern can read (TEMPLATE_FIELD)."""
    agent = config.get("agent") if isinstance(config, dict) else None
    template = agent.get("action_observation_template") if isinstance(agent, dict) else None
    return compile_template(template) if isinstance(template, str) else None


def _text(
    messages: list[dict[str, Any]], clock: Clock, template: Parse | None
) -> list[RecordedStep]:
    """The older text format: one ```` ```bash ```` block per assistant message, its
    observation the next user message (``<returncode>``, ``<output>`` or head/tail). Its time:
    each message's ``timestamp`` (1.17 and later), else each model response's
    ``extra.response.created`` (whole seconds, and no command times)."""
    stamped = any(number(m.get("timestamp")) is not None for m in messages)
    steps: list[RecordedStep] = []
    for index, message in enumerate(messages):
        stamp = _text_stamp(message, stamped)
        think = clock.advance(stamp)
        if message.get("role") != "assistant":
            continue
        blocks = BASH_BLOCK.findall(_content(message))
        if len(blocks) != 1:  # the agent rejected it as a format error: nothing ran
            continue
        reply = next((m for m in messages[index + 1 :] if m.get("role") in ("user", "tool")), None)
        code, size = _read(_content(reply), template) if reply else (None, None)
        seen_at = number(reply.get("timestamp")) if reply and stamped else None
        steps.append(
            RecordedStep(
                command=blocks[0].strip(),
                exit_code=code,
                output_bytes=size,
                **timed(think, interval(stamp, seen_at)),
            )
        )
    return steps


def _read(text: str, template: Parse | None) -> tuple[int | None, int | None]:
    """Exit code and output size of a text observation: by the run's own template where it
    matches, else by the default templates' tags."""
    found = template(text) if template is not None else None
    return found if found is not None else observation(text)


def _text_stamp(message: dict[str, Any], stamped: bool) -> float | None:
    """A text message's time: its ``timestamp`` (1.17+), else ``extra.response.created``."""
    if stamped:
        return number(message.get("timestamp"))
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    created = response.get("created") if isinstance(response, dict) else None
    return number(created)


def observation(text: str) -> tuple[int | None, int | None]:
    """Exit code and output size of a text observation. Long outputs were cut: their size is
    head + elided + tail. The templates put a newline of their own before each closing tag
    of a head, a tail and a timed-out command's output: it is not the command's."""
    code = _RETURNCODE.search(text)
    returncode = int(code.group(1)) if code else None
    head, tail, elided = _HEAD.search(text), _TAIL.search(text), _ELIDED.search(text)
    if head and tail and elided:
        size = _size(head.group(1)) + int(elided.group(1)) + _size(tail.group(1))
        return returncode, size
    output = _OUTPUT.search(text)
    if output is None:
        return returncode, None
    timed_out = _TIMED_OUT in text
    return returncode, _size(output.group(1)) if timed_out else byte_length(output.group(1))


def _size(text: str) -> int:
    """Bytes of a template-wrapped output, without the template's closing newline."""
    return byte_length(text[:-1] if text.endswith("\n") else text)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
