"""One client's part of a run spread over many (``--rollout-shard K/N``, ``--rollout-start-at``):
which items it runs, when it starts, what workload it is a part of and how busy it was.

Every shard collects the same items and deals them out the same way: workloads ordered by a
stable hash of their id, each workload's rounds in order, dealt round-robin over the N shards.
So the N shards together run every item exactly once, their sizes differ by at most one, and a
workload's rounds land on different shards. The merge (``report/merge.py``) checks that the
shards collected the same workload by its fingerprint.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import pytest

from ..report.machine import CLOCK_NOTE, Saturation
from ..report.projection import Scale
from . import xdist
from .identity import identity_of

#: A start further ahead than this is taken for a mistake (a wrong date or unit).
MAX_WAIT_S = 24 * 3600
#: A worker's workload fingerprint, sent to the xdist controller.
WORKLOAD_KEY = "rollout_tax_workload"

#: An item's place in the run: (round, workload, substrate), or None for a plain test.
Slot = tuple[int, str, str]


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (from 0) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str, where: str) -> Shard:
        """``K/N`` with 0 <= K < N; an error names ``where`` and the value."""
        index, slash, count = str(text).strip().partition("/")
        try:
            shard = cls(int(index), int(count)) if slash else None
        except ValueError:
            shard = None
        if shard is None or not 0 <= shard.index < shard.count:
            raise ValueError(
                f"{where}={text!r}: expected K/N with 0 <= K < N, e.g. 0/4 (K counts from 0, "
                "as a Kubernetes Indexed Job's JOB_COMPLETION_INDEX)"
            )
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owners(self, keys: list[tuple[str, int, str]]) -> list[int]:
        """The shard of each item, from its (workload, round, id): workloads by hash, rounds in
        order, dealt round-robin."""
        digests = {workload: _digest(workload) for workload, _, _ in keys}
        order = sorted(range(len(keys)), key=lambda i: (digests[keys[i][0]], *keys[i][1:]))
        owner = [0] * len(keys)
        for position, item in enumerate(order):
            owner[item] = position % self.count
        return owner


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def parse_start(text: str, where: str, now: float | None = None) -> float:
    """Epoch seconds of ``text``: ISO 8601 (no offset: UTC) or epoch seconds; at most a day
    ahead."""
    value = str(text).strip()
    try:
        at = float(value)
    except ValueError:
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"{where}={text!r}: expected an ISO 8601 time (2026-12-01T20:00:00Z) or epoch "
                "seconds"
            ) from None
        at = (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()
    now = time.time() if now is None else now
    if not at == at or at - now > MAX_WAIT_S:  # NaN, or a mistake
        raise ValueError(f"{where}={text!r}: more than 24 hours from now")
    if at - now < -MAX_WAIT_S:  # e.g. 0: a start that long past is a mistake, not lateness
        raise ValueError(f"{where}={text!r}: more than 24 hours ago; expected within a day of now")
    return at


def fingerprint_of(items: list[pytest.Item], version: str) -> dict[str, Any]:
    """The fingerprint of what a run collected: every item id with its trajectory marker's
    arguments, and the plugin version."""
    digest = hashlib.sha256(f"pytest-rollout-tax {version}\n".encode())
    lines = []
    for item in items:
        marker = item.get_closest_marker("trajectory")
        arguments = [list(marker.args), marker.kwargs] if marker else None
        text = json.dumps(arguments, sort_keys=True, default=stable_name)
        lines.append(f"{identity_of(item)}\t{text}\n")
    for line in sorted(lines):
        digest.update(line.encode())
    return {"fingerprint": f"sha256:{digest.hexdigest()}", "items": len(items)}


def stable_name(value: Any) -> str:
    """A marker argument as every process names it: a callable (``prepare=``) by its module
    and qualified name, never its ``repr`` (which holds a memory address)."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    text = repr(value)
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


class Client:
    """This client's part of the run: its shard's items (after every other deselection), the
    synchronized start, the workload fingerprint and the client's saturation (every run)."""

    def __init__(
        self,
        shard: Shard | None,
        start_at: float | None,
        scale: Scale,
        version: str,
        slot: Callable[[pytest.Item], Slot | None],
    ) -> None:
        self.shard = shard
        self.start_at = start_at
        self.scale = scale
        self.version = version
        self.slot = slot
        self.workload: dict[str, Any] | None = None
        self.started: dict[str, Any] | None = None
        self.saturation = Saturation.start()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        self.workload = fingerprint_of(items, self.version)
        if hasattr(config, "workerinput"):
            xdist.hand_over(config, WORKLOAD_KEY, self.workload)
        if self.shard is None:
            return
        owners = self.shard.owners([self._key(item) for item in items])
        kept = [
            item for item, owner in zip(items, owners, strict=True) if owner == self.shard.index
        ]
        dropped = [
            item for item, owner in zip(items, owners, strict=True) if owner != self.shard.index
        ]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def _key(self, item: pytest.Item) -> tuple[str, int, str]:
        slot = self.slot(item)
        name = identity_of(item)
        if slot is None:
            return name, 0, name
        round_, workload, substrate = slot
        return f"{workload}\t{substrate}", round_, name

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: xdist.WorkerNode, error: object) -> None:
        """The controller takes the workload a worker collected (every worker collects it)."""
        workload = xdist.handed_over(node).get(WORKLOAD_KEY)
        if workload is not None and self.workload is None:
            self.workload = workload

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Wait for ``--rollout-start-at`` before anything is created (bursts, rollouts)."""
        if self.start_at is not None and not session.config.option.collectonly:
            self.started = wait_until(self.start_at)
        return (yield)

    def report(self) -> dict[str, Any]:
        """The report's ``client``: shard, workload, configured projection, start, saturation."""
        return {
            "shard": {"index": self.shard.index, "count": self.shard.count} if self.shard else None,
            "workload": self.workload,
            "projection": self.scale.to_dict(),
            "start_at": self.started,
            "saturation": self.saturation.report(),
        }


def wait_until(at: float) -> dict[str, Any]:
    """Sleep until epoch ``at``; what was waited and how late the start was."""
    begun = time.time()
    while (left := at - time.time()) > 0:
        time.sleep(min(left, 1.0))
    now = time.time()
    return {
        "at": at,
        "at_utc": dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="milliseconds"),
        "waited_s": max(0.0, now - begun),
        "late_s": now - at,
        "note": CLOCK_NOTE,
    }
