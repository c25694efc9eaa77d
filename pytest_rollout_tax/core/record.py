"""Records of what one rollout did and how long each part took; their report form."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import REASON_LIMIT, redact

StepKind = Literal["exec", "write_file", "read_file"]

#: A rollout whose sandbox request the service's controller never bound within its timeout.
UNBOUND = "unbound"
#: A rollout whose create the provider's rate limiter refused (not a failure).
RATE_LIMITED = "rate_limited"
#: Of the outcomes (passed, failed, error: the sandbox never became ready, unbound, skipped,
#: and interrupted: the session was stopped while it ran), those that count as failures.
FAILED_OUTCOMES = ("failed", "error", UNBOUND)
#: The per-step columns every rollout's ``steps`` object has in the report, in order
#: (``kind`` comes with its legend, ``kinds``).
REQUIRED_STEP_COLUMNS = ("kind", "wall_us", "exit_code")
#: Columns a rollout's ``steps`` has only when one of its steps has a value there.
OPTIONAL_STEP_COLUMNS = ("output_bytes", "think_us", "recorded_us", "at_us", "tool", "call_id")
#: Optional columns of text (the others hold whole numbers).
TEXT_STEP_COLUMNS = ("tool", "call_id")
#: Every per-step column, in order.
STEP_COLUMNS = REQUIRED_STEP_COLUMNS + OPTIONAL_STEP_COLUMNS
MICROSECONDS = 1e6
#: The moments :meth:`Rollout.stamp` records: the create request, the first no-op's return
#: (ready), the delete request (teardown) and the environment gone.
EPOCH_MARKS = ("create", "ready", "teardown", "gone")


def rollout_param(substrate: str, round: int) -> str:
    """The id of the parameter a rollout adds to its test's id: ``<substrate>-<round>``."""
    return f"{substrate}-{round}"


def workload_of(test: str, substrate: str, round: int) -> str:
    """The workload a rollout ran: its test id without its ``<substrate>-<round>`` parameter,
    so the rounds of one test on every substrate share it."""
    return test.replace(rollout_param(substrate, round), "", 1)


@dataclass
class Step:
    """One tool call: its kind, wall-clock seconds, and the exit code of an exec."""

    kind: StepKind
    wall_s: float
    exit_code: int | None = None
    #: Bytes of output (stdout and stderr) an exec returned.
    output_bytes: int | None = None
    #: A replayed step: the model time that preceded it in the recording (None: unknown).
    think_s: float | None = None
    #: A replayed step: how long the recorded command took (None: unknown).
    recorded_s: float | None = None
    #: When the step began: seconds since its sandbox's create request (None: unknown).
    at_s: float | None = None
    #: A replayed step: the tool the trajectory recorded (``bash``, ``str_replace_editor``).
    tool: str | None = None
    #: A replayed step: the tool call's id in the trajectory.
    call_id: str | None = None


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
    #: The sandbox it ran in: container id, pod name, instance id, E2B id, local directory.
    sandbox_id: str | None = None
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
    #: The substrate's billing (``core.price.Rate.to_dict``), when it has a price.
    rate: dict[str, Any] | None = None
    #: A replayed trajectory: where it came from and how it replayed (``ReplayInfo.to_dict``).
    replay: dict[str, Any] | None = None
    #: Wall-clock (epoch) seconds of the lifecycle's moments (:data:`EPOCH_MARKS`), so the
    #: rollouts of several clients can be put on one time line.
    epoch: dict[str, float] = field(default_factory=dict)
    #: A merged report's rollout: the shard index that ran it and its client's host hash.
    shard: int | None = None
    client: str | None = None
    #: The OCI runtime its container ran under (``runc``, ``runsc``), where a substrate has one.
    runtime: str | None = None
    #: That runtime's release and platform, where known (gVisor: ``20240729.0``, ``systrap``).
    runtime_release: str | None = None
    runtime_platform: str | None = None
    #: Restored from a prepared sandbox's checkpoint (``docker.snapshot=true``).
    snapshot: bool = False
    #: How the controller launched a claimed sandbox (``k8s.api=claim``): ``warm`` (from a warm
    #: pool) or ``cold``, as it reports it; None elsewhere.
    launch_type: str | None = None
    #: A session's step path (``Transport.step_path``: ``prebuilt``, ``built``, ``relay``) and,
    #: for the relay, why no step helper served; None on other transports.
    step_path: str | None = None
    relay_reason: str | None = None
    #: Values no text of the report may hold: every ``env`` value an exec was given and the
    #: substrate's credentials. Never reported; :meth:`fail` redacts them.
    secrets: set[str] = field(default_factory=set, repr=False, compare=False)

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def fail(self, reason: str) -> None:
        """Record the first failure reason (later ones are consequences of it), without any
        of :attr:`secrets` in it."""
        if self.error is None:
            self.error = self.redact(reason)[:REASON_LIMIT]  # redacted whole, then cut

    def redact(self, text: str) -> str:
        """``text`` without any of :attr:`secrets`."""
        return redact(text, sorted(self.secrets, key=len, reverse=True))

    def stamp(self, mark: str) -> None:
        """Record the epoch time of ``mark`` (one of :data:`EPOCH_MARKS`) now."""
        self.epoch[mark] = time.time()

    def to_dict(self) -> dict[str, Any]:
        """The report's ``rollouts[]`` item: steps as columns; also what xdist ships."""
        extra: dict[str, Any] = {"replay": dict(self.replay)} if self.replay is not None else {}
        if self.client is not None:  # a merged report's rollout
            extra |= {"shard": self.shard, "client": self.client}
        if self.runtime is not None:  # a substrate with an OCI runtime
            extra["runtime"] = self.runtime
        if self.runtime_release is not None or self.runtime_platform is not None:
            extra |= {"runtime_release": self.runtime_release}
            extra |= {"runtime_platform": self.runtime_platform}
        if self.snapshot:
            extra["snapshot"] = True
        if self.launch_type is not None:
            extra["launch_type"] = self.launch_type
        if self.step_path is not None:  # a session: what served its steps
            extra["step_path"] = self.step_path
        if self.relay_reason is not None:
            extra["relay_reason"] = self.relay_reason
        if self.rate is not None:  # a substrate with a price
            extra["rate"] = dict(self.rate)
        return {
            "test": self.test,
            "substrate": self.substrate,
            "kind": self.kind,
            "transport": self.transport,
            "round": self.round,
            "sandbox_id": self.sandbox_id,
            "planned_steps": self.planned_steps,
            "outcome": self.outcome,
            "cold_start_s": self.cold_start_s,
            "phases": dict(self.phases),
            "teardown_s": self.teardown_s,
            "trajectory_s": self.trajectory_s,
            "steps": step_columns(self.steps),
            "action_probes_s": list(self.action_probes_s),
            "error": self.error,
            "price_per_hour": self.price_per_hour,
            "epoch": dict(self.epoch),
        } | extra

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollout:
        """The record of a ``rollouts[]`` item, its steps in either shape (columns or a list)."""
        fields = dict(data)
        fields["steps"] = list(steps_of(fields.get("steps")))
        if "phases" in fields:
            fields["phases"] = renamed_phases(fields["phases"] or {})
        return cls(**fields)


#: Phase names a run saved by an earlier release used, by today's name: Modal's create pacing
#: was ``pace`` where every other hosted substrate said ``paced``.
RENAMED_PHASES = {"pace": "paced"}


def renamed_phases(phases: dict[str, Any]) -> dict[str, Any]:
    """``phases`` (a rollout's, or a report's per-phase figures) under today's names."""
    return {RENAMED_PHASES.get(name, name): value for name, value in phases.items()}


def step_columns(steps: Iterable[Step]) -> dict[str, list[Any]]:
    """Steps as the report stores them: one list per field (``rollout-tax/2``).

    ``kind`` holds indexes into ``kinds``, the step kinds in order of first use; ``wall_us``
    holds wall times in whole microseconds. An optional column (:data:`OPTIONAL_STEP_COLUMNS`:
    ``output_bytes``, ``think_us``, ``recorded_us``, ``at_us``, times in whole microseconds,
    and a replay's ``tool`` and ``call_id``) is there only when a step has a value in it.
    """
    steps = list(steps)
    kinds: dict[str, int] = {}
    codes, walls, exit_codes = [], [], []
    for step in steps:
        codes.append(kinds.setdefault(step.kind, len(kinds)))
        walls.append(round(step.wall_s * MICROSECONDS))
        exit_codes.append(step.exit_code)
    columns: dict[str, list[Any]] = {
        "kinds": list(kinds),
        "kind": codes,
        "wall_us": walls,
        "exit_code": exit_codes,
    }
    optional: dict[str, list[Any]] = {
        "output_bytes": [step.output_bytes for step in steps],
        "think_us": [_microseconds(step.think_s) for step in steps],
        "recorded_us": [_microseconds(step.recorded_s) for step in steps],
        "at_us": [_microseconds(step.at_s) for step in steps],
        "tool": [step.tool for step in steps],
        "call_id": [step.call_id for step in steps],
    }
    return columns | {
        name: values
        for name, values in optional.items()
        if any(value is not None for value in values)
    }


def _microseconds(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * MICROSECONDS)


def _seconds(microseconds: int | None) -> float | None:
    return None if microseconds is None else microseconds / MICROSECONDS


def steps_of(stored: dict[str, Any] | list[dict[str, Any]] | None) -> Iterable[Step]:
    """The steps of a stored rollout in any shape: ``/2`` columns, ``/1`` columns or list."""
    if not stored:
        return []
    if isinstance(stored, list):  # rollout-tax/1, before columns
        return [Step(**step) for step in stored]
    if "wall_s" in stored:  # rollout-tax/1 columns
        return map(Step, stored["kind"], stored["wall_s"], stored["exit_code"])
    kinds = stored["kinds"]
    count = len(stored["kind"])
    output, think, recorded, at, tool, call_id = (
        stored.get(name) or [None] * count for name in OPTIONAL_STEP_COLUMNS
    )
    return [
        Step(
            kinds[code],
            wall / MICROSECONDS,
            exit_code,
            size,
            _seconds(thought),
            _seconds(ran),
            _seconds(began),
            name,
            call,
        )
        for code, wall, exit_code, size, thought, ran, began, name, call in zip(
            stored["kind"],
            stored["wall_us"],
            stored["exit_code"],
            output,
            think,
            recorded,
            at,
            tool,
            call_id,
            strict=True,
        )
    ]


def step_column(stored: dict[str, Any] | list[dict[str, Any]] | None, name: str) -> list[Any]:
    """One column of a stored rollout's steps as stored (None where a step has no value)."""
    if not stored:
        return []
    if isinstance(stored, list):
        return [step.get(name) for step in stored]
    if name in stored:
        return list(stored[name])
    return [None] * len(stored.get("kind", ()))


def step_walls(stored: dict[str, Any] | list[dict[str, Any]] | None) -> list[float]:
    """The wall times in seconds of a stored rollout's steps, in any shape."""
    if not stored:
        return []
    if isinstance(stored, list):
        return [step["wall_s"] for step in stored]
    if "wall_s" in stored:
        return list(stored["wall_s"])
    return [wall / MICROSECONDS for wall in stored.get("wall_us", ())]


class PhaseClock:
    """Marks the end of each cold-start phase; phases are stored as durations in seconds."""

    def __init__(self, phases: dict[str, float], started: float | None = None) -> None:
        self.phases = phases
        #: When the cold start began (``time.perf_counter``): now, unless given.
        self.started = time.perf_counter() if started is None else started
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
