"""What reading a file left unknown or renamed, in one clause per kind, for the run's notes:
intervals a clock stepped back across, and rows numbered as attempts of one task."""

from __future__ import annotations

from collections import Counter

from .model import RecordedTrajectory

#: How many repeated ids a note names.
NAMED = 3
#: A step's intervals, as a note names them.
NAMES = {"think_s": "think time", "recorded_s": "command time"}


def file_note(trajectories: list[RecordedTrajectory]) -> str | None:
    """One line saying what the file's trajectories left unknown or numbered; None: nothing."""
    parts = [part for part in (_clock(trajectories), _attempts(trajectories)) if part]
    return "; ".join(parts) or None


def _clock(trajectories: list[RecordedTrajectory]) -> str | None:
    back = [step for trajectory in trajectories for step in trajectory.steps if step.clock_back]
    if not back:
        return None
    counts = {name: sum(name in step.clock_back for step in back) for name in NAMES}
    unknown = " and ".join(f"{count} {NAMES[name]}(s)" for name, count in counts.items() if count)
    seconds = sum(step.clock_back_s for step in back)
    return (
        f"{len(back)} step(s) stamped before the timestamp before them (the clock stepped "
        f"back {seconds:.3g} s in all): {unknown} unknown, counted as no time passing and left "
        "out of the think-time statistics and the recorded command time"
    )


def _attempts(trajectories: list[RecordedTrajectory]) -> str | None:
    groups = Counter(t.attempt_of for t in trajectories if t.attempt_of is not None)
    if not groups:
        return None
    named = [f"{name}#1..#{count}" for name, count in list(groups.items())[:NAMED]]
    more = f", and {len(groups) - NAMED} more" if len(groups) > NAMED else ""
    return (
        f"{sum(groups.values())} rows repeat {len(groups)} instance_id(s): replayed as attempts "
        f"of one task, numbered in file order ({', '.join(named)}{more})"
    )
