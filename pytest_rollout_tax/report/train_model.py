"""The training step a projection models (``--rollout-train``): how many rollouts a step takes,
on how many sandboxes at once, synchronously or not, and what the trainer's own step costs.

``TrainModel.parse`` is the one parser of the option's ``KEY=VALUE,...`` text (``flags.TRAIN``
declares it for the plugin and the command line alike); every key has a stated default.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["sync", "async"]
Failed = Literal["retry", "drop"]
MODES: tuple[Mode, ...] = ("sync", "async")
FAILED: tuple[Failed, ...] = ("retry", "drop")
#: The most rollouts one training step takes (the projection simulates whole batches).
MAX_BATCH = 65_536
#: The most steps generation may run ahead of the trainer in ``async`` mode.
MAX_LAG = 64
#: The most GPUs a trainer is counted with.
MAX_GPUS = 1_000_000
#: The longest trainer step and the dearest GPU-hour taken, so no figure overflows.
MAX_TRAIN_S = 86_400.0
MAX_GPU_PRICE = 10_000.0
#: The keys of ``--rollout-train``, in the order the summary's header states them.
KEYS = ("batch", "slots", "mode", "train", "lag", "gpus", "gpu_price", "failed")
#: Text a user may give for the model with every default.
DEFAULTS_TEXT = "default"


@dataclass(frozen=True)
class TrainModel:
    """One training step: ``batch`` rollouts on ``slots`` sandboxes at once; ``sync`` waits for
    its whole batch, ``async`` lets generation run up to ``lag`` steps ahead; the trainer's
    own ``train_s`` per step; ``gpus`` waiting at ``gpu_price`` dollars per GPU-hour; a failed
    rollout ``retry`` (again, on its slot) or ``drop`` (a replacement is scheduled)."""

    batch: int = 512
    #: None: ``batch``, every rollout of a step at once.
    slots: int | None = None
    mode: Mode = "sync"
    train_s: float = 60.0
    lag: int = 1
    gpus: int = 8
    gpu_price: float | None = None
    failed: Failed = "retry"
    #: The keys the user gave (the others are defaults, and the header says so).
    given: tuple[str, ...] = ()

    @property
    def concurrency(self) -> int:
        """Sandboxes running at once: ``slots``, else ``batch``."""
        return self.batch if self.slots is None else self.slots

    @classmethod
    def parse(cls, text: str) -> TrainModel:
        """``batch=512,slots=256,mode=sync,train=60[,lag=1,gpus=8,gpu_price=2.5,failed=retry]``
        or ``default``; a ValueError names the bad key or value."""
        spelled = str(text).strip()
        if spelled.lower() == DEFAULTS_TEXT:
            return cls()
        values: dict[str, Any] = {}
        for part in spelled.split(","):
            key, sep, value = part.strip().partition("=")
            key, value = key.strip().lower().replace("-", "_"), value.strip()
            if not sep or not key:
                raise ValueError(f"expected KEY=VALUE pairs ({', '.join(KEYS)}), got {part!r}")
            if key not in KEYS:
                raise ValueError(f"unknown key {key!r} (expected {', '.join(KEYS)})")
            if key in values:
                raise ValueError(f"{key} given twice")
            values[key] = _VALUE[key](key, value)
        model = cls(
            **{_FIELD.get(key, key): value for key, value in values.items()},
            given=tuple(key for key in KEYS if key in values),
        )
        model.check()
        return model

    def check(self) -> None:
        """The values that only make sense together: slots within the batch, a lag in async."""
        if self.slots is not None and self.slots > self.batch:
            raise ValueError(
                f"slots={self.slots}: more sandboxes than the batch's {self.batch} rollouts"
            )
        if self.mode == "sync" and "lag" in self.given:
            raise ValueError(f"lag={self.lag}: only mode=async runs generation ahead")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["given"] = list(self.given)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainModel:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["given"] = tuple(values.get("given") or ())
        return cls(**values)


def _count(key: str, text: str, ceiling: int, floor: int = 1) -> int:
    try:
        number = float(text.replace("_", ""))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or not floor <= number <= ceiling:
        raise ValueError(
            f"{key}={text}: expected a whole number from {floor} to {ceiling:,}"
        ) from None
    return int(number)


def _number(key: str, text: str, ceiling: float) -> float:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or not 0 <= number <= ceiling:
        raise ValueError(f"{key}={text}: expected a number from 0 to {ceiling:g}") from None
    return number


def _choice(key: str, text: str, choices: tuple[str, ...]) -> str:
    if text.lower() not in choices:
        raise ValueError(f"{key}={text}: expected {' or '.join(choices)}")
    return text.lower()


_VALUE: dict[str, Any] = {
    "batch": lambda key, text: _count(key, text, MAX_BATCH),
    "slots": lambda key, text: _count(key, text, MAX_BATCH),
    "mode": lambda key, text: _choice(key, text, MODES),
    "train": lambda key, text: _number(key, text, MAX_TRAIN_S),
    "lag": lambda key, text: _count(key, text, MAX_LAG),
    "gpus": lambda key, text: _count(key, text, MAX_GPUS),
    "gpu_price": lambda key, text: _number(key, text, MAX_GPU_PRICE),
    "failed": lambda key, text: _choice(key, text, FAILED),
}
#: The field a key sets, where their names differ.
_FIELD = {"train": "train_s"}
