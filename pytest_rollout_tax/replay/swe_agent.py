"""SWE-agent ``.traj`` files: ``trajectory[]`` of ``{action, observation, execution_time}``.
They hold no timestamps, so think time is unknown, and no exit codes."""

from __future__ import annotations

from typing import Any

from .model import RecordedStep, RecordedTrajectory, byte_length, fail, number


def matches(data: Any) -> bool:
    """Whether ``data`` (a parsed JSON document) is a SWE-agent trajectory."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("trajectory"), list)
        and all(isinstance(step, dict) and "action" in step for step in data["trajectory"])
    )


def parse(data: dict, source: str, trajectory_id: str) -> RecordedTrajectory:
    """The recorded actions of a SWE-agent trajectory; an empty action (nothing ran) is none."""
    steps = []
    for index, step in enumerate(data["trajectory"]):
        action = step["action"]
        if not isinstance(action, str):
            raise fail(f"{source}: trajectory[{index}].action", "expected a string")
        if not action.strip():
            continue
        steps.append(
            RecordedStep(
                command=action.strip(),
                recorded_s=number(step.get("execution_time")),
                output_bytes=byte_length(step.get("observation")),
            )
        )
    return RecordedTrajectory(
        source=source,
        format="swe-agent",
        trajectory_id=trajectory_id,
        steps=tuple(steps),
    )
