"""SWE-agent ``.traj`` files: ``trajectory[]`` of ``{action, observation, execution_time}``.
They hold no timestamps, so think time is unknown, and no exit codes; a negative
``execution_time`` is an unknown interval, as a clock stepped back is in every reader. Many
actions call SWE-agent's own tools (``open``, ``edit``, ``find_file``...), installed by its
tool bundles."""

from __future__ import annotations

from typing import Any

from .model import (
    Interval,
    RecordedStep,
    RecordedTrajectory,
    byte_length,
    fail,
    interval,
    number,
    timed,
)

#: SWE-agent's tools, each with the bundle (a folder of SWE-agent's ``tools/``) that installs
#: it in the environment; without it the command does not exist (exit 127).
TOOL_BUNDLES = {
    "find_file": "search",
    "search_dir": "search",
    "search_file": "search",
    "open": "windowed",
    "goto": "windowed",
    "create": "windowed",
    "scroll_up": "windowed",
    "scroll_down": "windowed",
    "edit": "windowed_edit_linting",
    "insert": "windowed_edit_replace",
    "str_replace_editor": "edit_anthropic",
    "filemap": "filemap",
    "submit": "submit",
    "exit_forfeit": "forfeit",
    "view_image": "image_tools",
}


def tool_of(command: str) -> str | None:
    """The SWE-agent tool ``command`` calls (its first word), or None."""
    words = command.split(maxsplit=1)
    return words[0] if words and words[0] in TOOL_BUNDLES else None


def matches(data: Any) -> bool:
    """Whether ``data`` (a parsed JSON document) is a SWE-agent trajectory."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("trajectory"), list)
        and all(isinstance(step, dict) and "action" in step for step in data["trajectory"])
    )


def parse(data: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded actions of a SWE-agent trajectory; an empty action (nothing ran) is none."""
    steps = []
    for index, step in enumerate(data["trajectory"]):
        action = step["action"]
        if not isinstance(action, str):
            raise fail(f"{where}: trajectory[{index}].action", "expected a string")
        if not action.strip():
            continue
        ran = number(step.get("execution_time"))
        steps.append(
            RecordedStep(
                command=action.strip(),
                **timed(Interval(), interval(0.0, ran)),
                output_bytes=byte_length(step.get("observation")),
                tool=tool_of(action),
            )
        )
    return RecordedTrajectory(
        source=source,
        format="swe-agent",
        trajectory_id=trajectory_id,
        steps=tuple(steps),
    )
