"""The report's ``training`` section as typed records (``report/training.py`` makes it), and
its JSON (docs/json.md#training): the model, each substrate's figures, the ranking."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.known import from_known
from .train_model import TrainModel

#: Where the rollouts' think time came from: each replay's recording, the option, or nowhere.
ThinkFrom = Literal["recorded", "option", "none"]


@dataclass
class TrainingEntry:
    """One substrate's training step: the rollout phase per step (sync: the batch's makespan;
    async: the trainer's steady wait) with its interval, the step, the wait's share of it,
    the idle GPU-hours (and dollars) over the projection, the makespan's distribution and
    where the stragglers' time went."""

    rollouts: int
    failed: int
    phase_s: float
    phase_low_s: float
    phase_high_s: float
    step_s: float
    wait_share: float
    idle_gpu_hours: float
    idle_gpu_hours_low: float
    idle_gpu_hours_high: float
    #: The idle GPU-hours at ``gpu_price`` (None: no price given).
    dollars: float | None
    makespan_p50_s: float
    #: The simulated makespans' percentiles 0, 5, ..., 100 (the page's plot).
    makespan_quantiles: list[float]
    #: The shares of the stragglers' slot time: cold start, overhead (the per-step tax),
    #: command, think, teardown, retries (failed tries); they add up to 1.
    straggler: dict[str, float]
    replicates: int


@dataclass
class TrainingRanked:
    """One item of the training ranking: a substrate's step, its ratio to the reference's, and
    the noise verdict on the difference (``ranking.RESOLVED``, ...; None for the reference)."""

    substrate: str
    step_s: float
    idle_gpu_hours: float
    ratio: float
    noise: str | None = None
    why: str | None = None
    isolates: bool = True
    #: An unisolated substrate faster than the reference (compared with nothing).
    floor: bool = False


@dataclass
class Training:
    """What the trainer waits for, per substrate, under one :class:`TrainModel`."""

    model: TrainModel
    seed: int
    confidence: float
    #: The projection's rollouts, and the training steps they make (``ceil(N / batch)``).
    rollouts: int
    steps: int
    think: ThinkFrom
    substrates: dict[str, TrainingEntry] = field(default_factory=dict)
    ranking: list[TrainingRanked] = field(default_factory=list)
    #: Substrates with no successful rollout to project, and why.
    not_projected: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "seed": self.seed,
            "confidence": self.confidence,
            "rollouts": self.rollouts,
            "steps": self.steps,
            "think": self.think,
            "substrates": {n: dataclasses.asdict(e) for n, e in self.substrates.items()},
            "ranking": [dataclasses.asdict(item) for item in self.ranking],
            "not_projected": dict(self.not_projected),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Training:
        """The section as a report file has it (``schema.check`` checked its figures)."""
        return cls(
            model=TrainModel.from_dict(data["model"]),
            seed=data.get("seed", 0),
            confidence=data.get("confidence", 0.95),
            rollouts=data["rollouts"],
            steps=data["steps"],
            think=data.get("think", "none"),
            substrates={
                name: from_known(TrainingEntry, entry)
                for name, entry in (data.get("substrates") or {}).items()
            },
            ranking=[from_known(TrainingRanked, item) for item in data.get("ranking") or ()],
            not_projected=dict(data.get("not_projected") or {}),
        )
