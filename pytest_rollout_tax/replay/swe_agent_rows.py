"""SWE-agent 0.x trajectories as datasets publish them: rows whose ``trajectory`` holds the
model's history, ``{role: "system" | "user" | "ai", text}``. An ``ai`` turn's command is its
last fenced block (SWE-agent 0.x's ``ThoughtActionParser``); the next ``user`` turn is its
observation, rendered by SWE-agent's ``next_step_template`` with the state line after it."""

from __future__ import annotations

import re
from typing import Any

from .model import RecordedStep, RecordedTrajectory, byte_length, fail, not_a_trajectory
from .swe_agent import tool_of

ROLES = ("system", "user", "ai")
#: A fenced block: the command is the last one of an ``ai`` turn.
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
#: What SWE-agent's template puts after the output: the open file, the directory, the prompt.
_STATE = re.compile(
    r"(?:^|\n)\(Open file: [^\n]*\)\n\(Current directory: [^\n]*\)\n?(?:bash-\$)?\s*$"
)
#: SWE-agent's ``next_step_no_output_template``: the command printed nothing.
NO_OUTPUT = "Your command ran successfully and did not produce any output."


def turns_of(row: Any) -> list[dict[str, Any]] | None:
    """A row's turns (its ``trajectory``), or None if it is no SWE-agent 0.x row."""
    turns = row.get("trajectory") if isinstance(row, dict) else None
    if not isinstance(turns, list) or not turns:
        return None
    if not all(isinstance(t, dict) and t.get("role") in ROLES and "text" in t for t in turns):
        return None
    return turns if any(turn["role"] == "ai" for turn in turns) else None


def matches(row: Any) -> bool:
    """Whether ``row`` is a SWE-agent 0.x row (some ``ai`` turn among ``role``/``text``)."""
    return turns_of(row) is not None


def command(text: str) -> str | None:
    """The command of an ``ai`` turn: its last fenced block; None when it has none (SWE-agent
    asked again: nothing ran)."""
    blocks = _FENCE.findall(text)
    return blocks[-1].strip() if blocks and blocks[-1].strip() else None


def output(text: str) -> str:
    """The command's output in an observation turn, without the template's state line."""
    text = _STATE.sub("", text)
    return "" if text.strip() == NO_OUTPUT else text


def parse(row: dict[str, Any], where: str, trajectory_id: str, source: str) -> RecordedTrajectory:
    """The recorded actions of one row; an ``ai`` turn without a fenced block ran nothing."""
    turns = turns_of(row)
    if turns is None:  # ``matches`` said it is one
        raise not_a_trajectory(where, "no SWE-agent trajectory of ai and user turns")
    steps, unread = [], None
    for index, turn in enumerate(turns):
        if turn["role"] != "ai":
            continue
        text = turn["text"] if isinstance(turn["text"], str) else ""
        found = command(text)
        if found is None:
            unread = index if unread is None else unread
            continue
        reply = next((t for t in turns[index + 1 :] if t["role"] in ("user", "ai")), None)
        seen = reply if reply is not None and reply["role"] == "user" else None
        size = byte_length(output(seen["text"] or "")) if seen else None
        steps.append(RecordedStep(command=found, output_bytes=size, tool=tool_of(found)))
    if not steps:
        raise fail(
            f"{where}: trajectory[{unread}]",
            "a SWE-agent 0.x row (role ai/user/system) whose ai turns hold no fenced command "
            "block: no action this tool can replay",
        )
    return RecordedTrajectory(source, "swe-agent-rows", trajectory_id, tuple(steps))
