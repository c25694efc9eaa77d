"""Records of what one rollout did and how long each part took; JSON (de)serialization."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

StepKind = Literal["exec", "write_file", "read_file"]

#: Of the outcomes (passed, failed, error: the sandbox never became ready, skipped, and
#: interrupted: the session was stopped while it ran), those that count as failures.
FAILED_OUTCOMES = ("failed", "error")


@dataclass
class Step:
    """One tool call: its kind, wall-clock seconds, and the exit code of an exec."""

    kind: StepKind
    wall_s: float
    exit_code: int | None = None


@dataclass
class Rollout:
    """One run of one trajectory in one fresh sandbox (a ``rollouts[]`` item of the report)."""

    test: str = ""
    substrate: str = ""
    #: The implementation the substrate is (``docker`` for a variant ``docker-session``).
    kind: str = ""
    #: How steps reached the sandbox: ``exec`` or ``session``.
    transport: str = ""
    round: int = 1
    #: The trajectory length the test stands for (marker ``steps``), for projection.
    planned_steps: int | None = None
    outcome: str = "pending"
    cold_start_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    teardown_s: float | None = None
    trajectory_s: float | None = None
    steps: list[Step] = field(default_factory=list)
    action_probes_s: list[float] = field(default_factory=list)
    error: str | None = None
    #: Dollars per hour one sandbox of this substrate costs, when the substrate knows it.
    price_per_hour: float | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def fail(self, reason: str) -> None:
        """Record the first failure reason (later ones are consequences of it)."""
        if self.error is None:
            self.error = reason

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Rollout:
        fields = dict(data)
        fields["steps"] = [Step(**step) for step in fields.get("steps", [])]
        return cls(**fields)


class PhaseClock:
    """Marks the end of each cold-start phase; phases are stored as durations in seconds."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases
        self.started = time.perf_counter()
        self._last = self.started
        self._excluded = 0.0

    def mark(self, phase: str, *, cold_start: bool = True) -> float:
        """End ``phase`` now and return its duration.

        A phase with ``cold_start=False`` (an image pull) is recorded but not counted as cold start.
        """
        now = time.perf_counter()
        duration = now - self._last
        self.phases[phase] = self.phases.get(phase, 0.0) + duration
        self._last = now
        if not cold_start:
            self._excluded += duration
        return duration

    def cold_start(self) -> float:
        """Seconds from the start to the last mark, less the phases excluded from cold start."""
        return self._last - self.started - self._excluded
