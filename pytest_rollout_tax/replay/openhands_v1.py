"""OpenHands V1, the software agent SDK (``openhands-sdk``): its events, each an object with a
``kind`` (the event's class: ``ActionEvent``, ``ObservationEvent``...), an ``id``, an ISO
``timestamp`` and a ``source``, as the evaluation harness saves them in the ``history`` of each
``output.jsonl`` row (``EvalOutput``) and a conversation saves them as an event list.

An ``ActionEvent`` is one tool call: ``tool_name`` and its ``action`` (``TerminalAction``
``{command, is_input}``, ``FileEditorAction`` ``{command, path, ...}``...). Its answer is the
``ObservationEvent`` whose ``action_id`` is its ``id`` (``observation``: ``content`` parts,
``exit_code``), or an ``AgentErrorEvent`` for the same ``tool_call_id``."""

from __future__ import annotations

from typing import Any

from ..errors import TrajectoryError
from . import openhands
from .model import (
    Clock,
    Interval,
    RecordedStep,
    RecordedTrajectory,
    byte_length,
    exit_code,
    fail,
    interval,
    timed,
)
from .openai_messages import edit_of

#: How errors name what they could not read.
NAME = "OpenHands V1 events"
#: The events of the conversation the model sees: the clock of think time runs on them only
#: (a ``ConversationStateUpdateEvent`` of the run's statistics is stamped just before the
#: action the model answered with).
CONVERSATION = (
    "SystemPromptEvent",
    "MessageEvent",
    "ActionEvent",
    "ObservationEvent",
    "AgentErrorEvent",
    "UserRejectObservation",
)
#: What answers a tool call: its result, the error the tool raised, or the user's refusal
#: (the action never ran: no step).
RESULT, ERROR, REJECTED = "ObservationEvent", "AgentErrorEvent", "UserRejectObservation"
#: The tools whose action is a shell command (``terminal``; ``execute_bash`` in early SDKs).
SHELL_TOOLS = ("terminal", "execute_bash", "bash")
#: The tools whose action is a file edit, emulated with the file API.
EDITOR_TOOLS = ("file_editor", "str_replace_editor")
#: Tools that run nothing in the sandbox.
NOT_STEPS = ("finish", "think")


def is_event(value: Any) -> bool:
    """Whether ``value`` is one OpenHands V1 event."""
    return isinstance(value, dict) and isinstance(value.get("kind"), str) and "source" in value


def matches(row: Any) -> bool:
    """Whether ``row`` is an ``output.jsonl`` row whose ``history`` holds V1 events (an object
    with a ``kind``): read by :func:`parse`, which names any event it cannot read."""
    history = row.get("history") if isinstance(row, dict) else None
    return isinstance(history, list) and any(
        isinstance(event, dict) and "kind" in event for event in history
    )


def parse(row: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded actions of one ``output.jsonl`` row."""
    return parse_events(row["history"], where, trajectory_id, source, field="history")


def parse_events(
    events: list[Any], where: str, trajectory_id: str, source: str, field: str = ""
) -> RecordedTrajectory:
    """The tool calls of an event list, each with its answer: think time is the action's
    timestamp minus the conversation event's before it, command time its answer's minus the
    action's (or, for calls of one model response, minus the answer's before it). ``field``
    names the list in errors (``history``)."""
    for index, event in enumerate(events):
        if not is_event(event):
            raise fail(f"{where}: {field}[{index}]", f"expected an object with 'kind' and "
                       f"'source', as the other {NAME} of this list")  # fmt: skip
    stamps = [_stamp(event, f"{where}: {field}[{index}].timestamp")
              for index, event in enumerate(events)]  # fmt: skip
    answers = _answers(events)
    clock, steps = Clock(), []
    for index, event in enumerate(events):
        if event["kind"] not in CONVERSATION:
            continue
        think = clock.advance(stamps[index])
        if event["kind"] != "ActionEvent":
            continue
        action = event.get("action")
        if action is None or event.get("tool_name") in NOT_STEPS:
            continue  # no tool ran: a call the SDK could not parse, or finish/think
        if not isinstance(action, dict) or not isinstance(event.get("tool_name"), str):
            raise fail(f"{where}: {field}[{index}]", f"expected an ActionEvent with a "
                       f"'tool_name' and an 'action' object, as {NAME} have")  # fmt: skip
        at = answers.get(event.get("id")) or answers.get(event.get("tool_call_id"))
        seen = events[at] if at is not None else None
        if seen is not None and seen["kind"] == REJECTED:
            continue  # the user refused it: it never ran
        ran = Interval()
        if at is not None:
            ran = interval(stamps[_started(events, index, at)], stamps[at])
        steps.append(_step(event["tool_name"], action, seen, timed(think, ran)))
    return RecordedTrajectory(source, "openhands-v1", trajectory_id, tuple(steps),
                              wall_s=clock.wall_s)  # fmt: skip


def _answers(events: list[dict[str, Any]]) -> dict[str, int]:
    """Where each action's answer is, by the action's ``id`` (``action_id``) and by its
    ``tool_call_id`` (an ``AgentErrorEvent`` names only that)."""
    found: dict[str, int] = {}
    for index, event in enumerate(events):
        if event["kind"] not in (RESULT, ERROR, REJECTED):
            continue
        for key in ("action_id", "tool_call_id"):
            if isinstance(event.get(key), str):
                found.setdefault(event[key], index)
    return found


def _started(events: list[dict[str, Any]], action: int, answer: int) -> int:
    """When the tool of the action at ``action`` started: the newest conversation event
    before its answer (another call's answer when one model response made several calls,
    which run one after the other), the action itself at the earliest."""
    for index in range(answer - 1, action, -1):
        if events[index]["kind"] in CONVERSATION:
            return index
    return action


def _step(
    tool: str, action: dict[str, Any], seen: dict[str, Any] | None, times: dict[str, Any]
) -> RecordedStep:
    size = _size(seen) if seen is not None else None
    command = action.get("command")
    if tool in SHELL_TOOLS and isinstance(command, str) and action.get("is_input") is not True:
        return RecordedStep(command=command, exit_code=_exit_code(seen), output_bytes=size,
                            **times)  # fmt: skip
    edit = edit_of(action) if tool in EDITOR_TOOLS else None
    return RecordedStep(edit=edit, output_bytes=size, **times)


def _size(answer: dict[str, Any]) -> int:
    """Bytes of an answer: its observation's ``content`` parts (``output`` in early SDKs), or
    the error's text."""
    if answer["kind"] == ERROR:
        return byte_length(answer.get("error"))
    observation = answer.get("observation")
    if not isinstance(observation, dict):
        return 0
    content = observation.get("content")
    return byte_length(content if content is not None else observation.get("output"))


def _exit_code(answer: dict[str, Any] | None) -> int | None:
    observation = answer.get("observation") if answer is not None else None
    return exit_code(observation.get("exit_code")) if isinstance(observation, dict) else None


def _stamp(event: dict[str, Any], where: str) -> float | None:
    try:
        return openhands.stamp(event.get("timestamp"), where)
    except TrajectoryError as exc:
        raise TrajectoryError(f"{exc} ({NAME})") from None
