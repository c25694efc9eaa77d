"""Bursts (``--rollout-burst N[,N...]``): N sandboxes started at once, then all torn down.

A GRPO step starts hundreds of rollouts together, so the cold start under a burst is what an RL
run pays: control planes rate-limit, schedulers queue, caches thrash. Each level starts N
sandboxes from N threads released together, each up to its first no-op exec, and records their
cold starts, the time until the last one is ready, creates per second and every failure with
its reason (an HTTP 429 is a reason, not a crash). Whatever started is destroyed, also when the
burst is interrupted.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.record import Rollout
from ..core.sandbox import Sandbox
from ..core.stats import Stats
from ..core.substrate import Substrate
from ..errors import ConfigError, RateLimited, reason_of

#: A level is the knee when its cold-start p50 is more than this times the lowest level's.
KNEE_FACTOR = 2.0
#: The largest burst accepted: each sandbox gets a thread.
MAX_CONCURRENCY = 4096


def parse_levels(text: str) -> list[int]:
    """``"1,4,16"`` -> ``[1, 4, 16]``: positive concurrencies, each once, in the order given."""
    levels = []
    for item in (part.strip() for part in str(text).split(",")):
        try:
            level = int(item)
        except ValueError:
            level = 0
        if not 1 <= level <= MAX_CONCURRENCY:
            raise ConfigError(
                f"{text!r}: expected concurrencies from 1 to {MAX_CONCURRENCY} separated by "
                "commas, e.g. 1,4,16"
            )
        levels.append(level)
    return list(dict.fromkeys(levels))


@dataclass
class BurstLevel:
    """One level of a burst: N sandboxes started at once."""

    concurrency: int
    cold_start_s: list[float] = field(default_factory=list)
    #: Seconds from the release until the last sandbox was ready (or had failed).
    ready_all_s: float | None = None
    failure_reasons: Counter[str] = field(default_factory=Counter)
    #: Creates the provider's rate limiter refused (HTTP 429): the level measured the
    #: limiter, not the sandbox; each is also among the failure reasons.
    rate_limited: int = 0
    #: Epoch seconds of the release, so levels of several clients can be aligned.
    released_at: float | None = None
    #: Levels of several clients merged into this one (:func:`merge_levels`): how far apart
    #: their releases were, in seconds.
    release_spread_s: float | None = None

    @property
    def failures(self) -> int:
        return sum(self.failure_reasons.values())

    @property
    def creates_per_s(self) -> float | None:
        """Sandboxes made ready per second over the whole level."""
        if not self.ready_all_s or not self.cold_start_s:
            return None
        return len(self.cold_start_s) / self.ready_all_s

    def to_dict(self) -> dict[str, Any]:
        """A ``substrates[NAME].burst[]`` item of the report."""
        cold = Stats.of(self.cold_start_s)
        return {
            "concurrency": self.concurrency,
            "cold_start": cold.to_dict() if cold else None,
            "ready_all_s": self.ready_all_s,
            "creates_per_s": self.creates_per_s,
            "failures": self.failures,
            "failure_reasons": dict(self.failure_reasons.most_common()),
            "rate_limited": self.rate_limited,
            "released_at": self.released_at,
            "cold_start_s": list(self.cold_start_s),
        } | (
            {"release_spread_s": self.release_spread_s} if self.release_spread_s is not None else {}
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BurstLevel:
        """The level of a report's ``burst[]`` item (its raw cold starts needed)."""
        if "cold_start_s" not in data:
            raise ValueError(
                f"burst level {data.get('concurrency')}: no raw cold starts (written by an "
                "older version)"
            )
        return cls(
            concurrency=data["concurrency"],
            cold_start_s=list(data["cold_start_s"]),
            ready_all_s=data.get("ready_all_s"),
            failure_reasons=Counter(data.get("failure_reasons") or {}),
            rate_limited=data.get("rate_limited") or 0,
            released_at=data.get("released_at"),
        )


def run_level(
    substrate: Substrate, concurrency: int, *, timeout: float | None = None
) -> BurstLevel:
    """Start ``concurrency`` sandboxes at once, wait for all, then destroy them all."""
    level = BurstLevel(concurrency)
    started: list[Sandbox] = []
    finished: list[float] = []
    lock = threading.Lock()
    go = threading.Event()
    release: list[float] = []

    def one() -> None:
        go.wait()
        record = Rollout(substrate=substrate.name)
        try:
            sandbox = substrate.start(record, timeout=timeout)
        except Exception as exc:  # every failure is data, a 429 included
            with lock:
                level.failure_reasons[reason_of(exc)] += 1
                level.rate_limited += isinstance(exc, RateLimited)
                finished.append(time.perf_counter())
            return
        with lock:
            started.append(sandbox)
            level.cold_start_s.append(record.cold_start_s or 0.0)
            finished.append(time.perf_counter())

    threads = [
        threading.Thread(target=one, name=f"rollout-tax-burst-{substrate.name}", daemon=True)
        for _ in range(concurrency)
    ]
    try:
        for thread in threads:
            thread.start()
        release.append(time.perf_counter())
        level.released_at = time.time()
        go.set()
        for thread in threads:
            thread.join()
        level.ready_all_s = max(finished) - release[0] if finished else None
    finally:
        go.set()  # interrupted before the release: let every thread finish
        for thread in threads:
            if thread.ident is not None:
                thread.join()
        destroy_all(started)
    return level


def destroy_all(sandboxes: Iterable[Sandbox]) -> None:
    """Close every sandbox, several at a time; the session's reap is the backstop for errors."""
    closers = [
        threading.Thread(target=_close_quietly, args=(sandbox,), daemon=True)
        for sandbox in sandboxes
    ]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join()


def _close_quietly(sandbox: Sandbox) -> None:
    with contextlib.suppress(Exception):
        sandbox.close()


def run(
    substrate: Substrate, levels: Iterable[int], *, timeout: float | None = None
) -> list[BurstLevel]:
    """Every level in turn."""
    return [run_level(substrate, n, timeout=timeout) for n in levels]


def merge_levels(parts: Sequence[BurstLevel]) -> BurstLevel:
    """One fleet-wide level of the same level run by several clients, aligned by epoch time:
    the concurrencies add up, every cold start is a sample, and ``ready_all_s`` runs from the
    first release to the last sandbox ready (or failed) on any client."""
    merged = BurstLevel(sum(part.concurrency for part in parts))
    for part in parts:
        merged.cold_start_s += part.cold_start_s
        merged.failure_reasons.update(part.failure_reasons)
        merged.rate_limited += part.rate_limited
    released = [part.released_at for part in parts if part.released_at is not None]
    if len(released) == len(parts):
        done = [
            p.released_at + p.ready_all_s
            for p in parts
            if p.released_at is not None and p.ready_all_s is not None
        ]
        merged.released_at = min(released)
        merged.release_spread_s = max(released) - min(released)
        merged.ready_all_s = max(done) - merged.released_at if done else None
    return merged


def knee(levels: list[dict[str, Any]]) -> int | None:
    """The first concurrency whose cold-start p50 is more than KNEE_FACTOR times the lowest
    level's, or None."""
    measured = sorted(
        (level for level in levels if level.get("cold_start")), key=lambda lv: lv["concurrency"]
    )
    if len(measured) < 2:
        return None
    base = measured[0]["cold_start"]["p50"]
    for level in measured[1:]:
        if level["cold_start"]["p50"] > KNEE_FACTOR * base:
            concurrency: int = level["concurrency"]
            return concurrency
    return None


def nearest(levels: list[dict[str, Any]], concurrency: int) -> dict[str, Any] | None:
    """The measured level nearest to ``concurrency`` (the higher one on a tie), or None."""
    measured = [level for level in levels if level.get("cold_start")]
    if not measured:
        return None
    return min(measured, key=lambda lv: (abs(lv["concurrency"] - concurrency), -lv["concurrency"]))
