"""OpenHands' own output: its evaluation ``output.jsonl`` (one object per instance, with
``instance_id``, ``instruction``, ``metadata`` and the ``history`` of events) and its event
lists (a conversation's trajectory: a JSON array of events, or JSONL). An event is an action
(``action``: ``run``, ``read``, ``edit``...) or an observation (``observation``, ``cause``:
the action's ``id``), each with an ISO ``timestamp``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from .model import (
    Clock,
    FileEdit,
    RecordedStep,
    RecordedTrajectory,
    byte_length,
    exit_code,
    fail,
    interval,
    not_a_trajectory,
    timed,
)
from .openai_messages import edit_of

#: Actions that run in the sandbox: ``run`` (CmdRunAction), the file actions, and the ones
#: replayed by their output size (IPython cells, the browser, MCP tools).
COMMAND, FILES = "run", ("read", "edit", "write")
SIZED = ("run_ipython", "browse", "browse_interactive", "call_tool_mcp")


def is_event(value: Any) -> bool:
    """Whether ``value`` is one OpenHands event."""
    return isinstance(value, dict) and (
        isinstance(value.get("action"), str) or isinstance(value.get("observation"), str)
    )


def events_of(row: Any) -> list[dict[str, Any]] | None:
    """A row's ``history`` as a flat list of events (older runs saved ``[action, observation]``
    pairs), or None if it is no OpenHands output row."""
    history = row.get("history") if isinstance(row, dict) else None
    if not isinstance(history, list):
        return None
    events: list[dict[str, Any]] = []
    for item in history:
        pair = item if isinstance(item, list) else [item]
        if not all(is_event(event) for event in pair):
            return None
        events.extend(pair)
    return events


def matches(row: Any) -> bool:
    """Whether ``row`` is an OpenHands output row (``history`` of events)."""
    return events_of(row) is not None


def parse(row: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded actions of one ``output.jsonl`` row (``matches`` said it is one)."""
    events = events_of(row)
    if events is None:
        raise not_a_trajectory(where, "no OpenHands history of events")
    return parse_events(events, where, trajectory_id, source, field="history")


def parse_events(
    events: list[dict[str, Any]], where: str, trajectory_id: str, source: str, field: str = ""
) -> RecordedTrajectory:
    """The actions of an event list, each with its observation (by ``cause``, else the next
    one): think time is the action's timestamp minus the one before it, command time the
    observation's minus the action's. ``field`` names the list in errors (``history``)."""
    clock = Clock()
    steps = []
    stamps = [stamp(e.get("timestamp"), f"{where}: {field}[{i}].timestamp")
              for i, e in enumerate(events)]  # fmt: skip
    for index, event in enumerate(events):
        name = event.get("action")
        think = clock.advance(stamps[index])
        if not _is_step(event):
            continue
        at = _observation(events, index)
        seen = events[at] if at is not None else None
        times = timed(think, interval(stamps[index], stamps[at] if at is not None else None))
        size = byte_length(seen.get("content")) if seen else None
        args = _args(event)
        if name == COMMAND and _command(args) is not None:
            steps.append(
                RecordedStep(
                    command=_command(args), exit_code=_exit_code(seen), output_bytes=size, **times
                )
            )
        else:
            edit = _file_edit(name, args, event) if name in FILES else None
            steps.append(RecordedStep(edit=edit, output_bytes=size, **times))
    return RecordedTrajectory(source, "openhands", trajectory_id, tuple(steps), wall_s=clock.wall_s)


def _is_step(event: dict[str, Any]) -> bool:
    return event.get("action") in (COMMAND, *FILES, *SIZED)


def _args(event: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments: ``args``, or the event itself in older flat histories (the
    resolver's ``{"action": "run", "command": ...}``)."""
    args = event.get("args")
    return args if isinstance(args, dict) else event


def _command(args: dict[str, Any]) -> str | None:
    """A ``run`` action's shell command; None for input typed into a running process, which
    is no command of its own (replayed by its size)."""
    command = args.get("command")
    return command if isinstance(command, str) and args.get("is_input") is not True else None


def _observation(events: list[dict[str, Any]], index: int) -> int | None:
    """Where the observation of the action at ``index`` is: the one whose ``cause`` is its
    id, else the next observation before another action."""
    ident = events[index].get("id")
    for at in range(index + 1, len(events)):
        event = events[at]
        if ident is not None:
            if event.get("cause") == ident and isinstance(event.get("observation"), str):
                return at
        elif isinstance(event.get("action"), str):
            return None
        elif isinstance(event.get("observation"), str):
            return at
    return None


def stamp(value: Any, where: str) -> float | None:
    """An ISO timestamp in seconds (a time without a zone is taken as UTC: only differences
    count)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise fail(where, f"{value!r}: expected an ISO 8601 timestamp")
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _exit_code(observation: dict[str, Any] | None) -> int | None:
    """``extras.metadata.exit_code``, ``extras.exit_code``, or older flat events' own."""
    if observation is None:
        return None
    extras = observation.get("extras")
    if not isinstance(extras, dict):
        return exit_code(observation.get("exit_code"))
    metadata = extras.get("metadata")
    if isinstance(metadata, dict) and exit_code(metadata.get("exit_code")) is not None:
        return exit_code(metadata["exit_code"])
    return exit_code(extras.get("exit_code"))


def _file_edit(name: str, args: dict[str, Any], event: dict[str, Any]) -> FileEdit | None:
    """The file step of a ``read``, ``write`` or ``edit`` action (None: replayed by size)."""
    if name == "read":
        return edit_of({"command": "view", "path": args.get("path")})
    if name == "write":
        return edit_of({"command": "create", "path": args.get("path"),
                        "file_text": args.get("content")})  # fmt: skip
    if args.get("command"):
        return edit_of(args)
    return edit_of(_tool_arguments(event) or {})


def _tool_arguments(event: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of the model's tool call an action came from (``tool_call_metadata``),
    where the action's own ``args`` leave them out."""
    metadata = event.get("tool_call_metadata")
    if not isinstance(metadata, dict):
        return None
    response = metadata.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == metadata.get("tool_call_id"):
                arguments = (call.get("function") or {}).get("arguments")
                try:
                    parsed = json.loads(arguments) if isinstance(arguments, str) else None
                except ValueError:
                    return None
                return parsed if isinstance(parsed, dict) else None
    return None
