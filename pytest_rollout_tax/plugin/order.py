"""``--rollout-order``: the order rollouts run in.

``grouped`` is pytest's own: each workload's rounds on one substrate, then on the next
(A A A B B B). ``interleave`` runs round 1 of every workload on every substrate, then round 2,
and so on (A B A B ...), the duet-benchmarking practice: slow drift of a shared machine then
hits every substrate alike instead of biasing the ones that ran last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

#: What places an item in the round-robin: (round, workload, substrate); None: not a rollout.
Slot = tuple[int, str, str]


def interleave(items: Sequence[T], slot: Callable[[T], Slot | None]) -> list[T]:
    """``items`` with the rollouts round-robin: by round, then workload and substrate in the
    order they first appear. Other items keep their places."""
    slots = [slot(item) for item in items]
    workloads: dict[str, int] = {}
    substrates: dict[str, int] = {}
    for found in slots:
        if found is not None:
            workloads.setdefault(found[1], len(workloads))
            substrates.setdefault(found[2], len(substrates))
    places = [index for index, found in enumerate(slots) if found is not None]

    def key(index: int) -> tuple[int, int, int]:
        round_, workload, substrate = slots[index]  # type: ignore[misc]
        return round_, workloads[workload], substrates[substrate]

    result = list(items)
    for place, index in zip(places, sorted(places, key=key), strict=True):
        result[place] = items[index]
    return result
