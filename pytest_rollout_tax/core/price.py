"""What a sandbox costs: the ``price.*`` options a substrate takes, and the rate in force.

A provider bills a sandbox for every second it is alive, from the create request until the
teardown is confirmed, and a cloud bills at least a launch's minimum. A :class:`Rate` is one
substrate's billing: its prices, the resources it bills for, where the prices came from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import date
from typing import Any

from .known import from_known

#: The most dollars an hour any single price may be (a larger one is a typo).
MAX_DOLLARS_PER_HOUR = 1_000_000.0
#: The most vCPUs or GiB one sandbox may be billed for.
MAX_RESOURCE = 1_000_000.0
#: The longest launch minimum (a day).
MAX_MIN_BILLED_S = 86_400.0
SECONDS_PER_HOUR = 3600.0
#: Bytes in a GiB.
GIB = 1024**3
#: A rate sheet older than this is flagged.
STALE_AFTER_DAYS = 365
#: What a price set by the user is labelled.
USER_SOURCE = "yours"


@dataclass
class PriceOptions:
    """``NAME.price.KEY=VALUE``: a price set for one substrate, each key overriding the rate
    sheet's; resources for substrates whose own options do not say what they bill for."""

    #: Dollars per vCPU-hour.
    vcpu_hour: float | None = None
    #: Dollars per GiB-hour of memory.
    gib_hour: float | None = None
    #: Dollars per instance-hour (a VM, or the machine docker and local run on).
    instance_hour: float | None = None
    #: Dollars per hour whatever runs (a cluster's fee), over the fleet's wall-clock hours.
    fixed_hour: float | None = None
    #: Seconds billed at least per sandbox (EC2: 60 per launch).
    min_billed_s: float | None = None
    #: vCPUs billed per sandbox, where the substrate's own options do not say.
    vcpus: float | None = None
    #: GiB billed per sandbox, where the substrate's own options do not say.
    gib: float | None = None
    #: Sandboxes sharing one instance (its ``instance_hour`` split between them).
    share: int | None = None

    def check(self) -> None:
        for key, ceiling in _CEILINGS.items():
            value = getattr(self, key)
            if value is not None and not (math.isfinite(value) and 0 <= value <= ceiling):
                raise ValueError(f"{key}={value!r}: expected 0 to {ceiling:g}")
        if self.share is not None and not 1 <= self.share <= 100_000:
            raise ValueError(f"share={self.share!r}: expected 1 to 100000 sandboxes")

    def given(self) -> dict[str, Any]:
        """The keys the user set."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


_CEILINGS = {
    "vcpu_hour": MAX_DOLLARS_PER_HOUR,
    "gib_hour": MAX_DOLLARS_PER_HOUR,
    "instance_hour": MAX_DOLLARS_PER_HOUR,
    "fixed_hour": MAX_DOLLARS_PER_HOUR,
    "min_billed_s": MAX_MIN_BILLED_S,
    "vcpus": MAX_RESOURCE,
    "gib": MAX_RESOURCE,
}


@dataclass(frozen=True)
class Resources:
    """What one sandbox is billed for, from the substrate's own options."""

    vcpus: float | None = None
    gib: float | None = None
    instance_type: str | None = None
    #: Sandboxes sharing one instance.
    share: int = 1


@dataclass(frozen=True)
class Rate:
    """One substrate's billing: prices, the resources billed, and where the prices came from."""

    vcpu_hour: float = 0.0
    gib_hour: float = 0.0
    instance_hour: float = 0.0
    fixed_hour: float = 0.0
    min_billed_s: float = 0.0
    vcpus: float = 0.0
    gib: float = 0.0
    share: int = 1
    instance_type: str | None = None
    #: ``yours`` (the user's own price) or the rate sheet's source.
    source: str = USER_SOURCE
    #: The day the rate sheet was read (ISO), None for the user's own.
    as_of: str | None = None
    #: How the provider bills, in its words.
    billing: str = ""

    @property
    def sandbox_hour(self) -> float:
        """Dollars per hour one sandbox costs while alive."""
        return (
            self.instance_hour / self.share + self.vcpus * self.vcpu_hour + self.gib * self.gib_hour
        )

    @property
    def yours(self) -> bool:
        return self.source == USER_SOURCE

    def billed_s(self, alive_s: float) -> float:
        """The seconds billed for a sandbox alive ``alive_s``: at least the launch minimum."""
        return max(alive_s, self.min_billed_s)

    def age_days(self, today: date) -> int | None:
        """Days since the rate sheet was read; None for the user's own price."""
        return None if self.as_of is None else (today - date.fromisoformat(self.as_of)).days

    def stale(self, today: date) -> bool:
        age = self.age_days(today)
        return age is not None and age > STALE_AFTER_DAYS

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"sandbox_hour": self.sandbox_hour}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rate:
        return from_known(cls, data)


def added_dollars(hours: float, rate: Rate) -> float:
    """Dollars of ``hours`` of sandbox time at ``rate`` (Table 1's hours in dollars)."""
    return hours * rate.sandbox_hour
