"""Where a substrate was measured from: its testbed (client host class, CPUs, region or
endpoint, provider, transport), recorded in a saved run so that a comparison says when its
two runs were not measured on the same testbed (docs/gating.md#testbeds).

A run saved before testbeds were recorded (schema rollout-tax/2 without
``machine.testbeds``) has an unknown testbed: it still loads and compares, and the comparison
says the testbed is unknown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..report.document import Report

#: The key of the testbeds in a saved run's ``machine``.
KEY = "testbeds"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Testbed:
    """One substrate's testbed; a field None when not recorded (an endpoint-less substrate)."""

    host_class: str | None = None  #: the client's kind of host: CI service, OS and CPU family
    cpus: int | None = None
    endpoint: str | None = None  #: the provider's API as reached (names its region, if any)
    provider: str | None = None  #: the substrate's kind (docker, e2b, k8s, ...)
    transport: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Testbed:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def key(self) -> str:
        """A short name of the testbed: ``GitHub Actions Linux x86_64, 4 CPUs, docker``."""
        parts = [self.host_class or "?", f"{self.cpus} CPUs" if self.cpus else "? CPUs"]
        parts += [p for p in (self.provider, self.endpoint, self.transport) if p]
        return ", ".join(parts)


def host_class(machine: Mapping[str, Any]) -> str:
    """``GitHub Actions Linux x86_64`` or ``local Linux x86_64``: where the client ran, never
    which host (the hostname stays out)."""
    system = str(machine.get("platform", "?")).split("-")[0]
    return f"{machine.get('ci') or 'local'} {system} {machine.get('machine', '?')}"


def stamped(report: Report) -> Report:
    """``report`` with every substrate's testbed recorded in ``machine.testbeds``."""
    machine = dict(report.machine)
    machine[KEY] = {
        name: asdict(
            Testbed(
                host_class=host_class(machine),
                cpus=machine.get("cpu_count"),
                endpoint=entry.control_plane.endpoint if entry.control_plane else None,
                provider=entry.kind,
                transport=entry.transport,
            )
        )
        for name, entry in report.substrates.items()
    }
    return dataclasses.replace(report, machine=machine)


def testbed_of(report: Report, substrate: str) -> Testbed | None:
    """The recorded testbed of ``substrate`` in ``report`` (None: not recorded)."""
    recorded = (report.machine.get(KEY) or {}).get(substrate)
    return Testbed.from_dict(recorded) if isinstance(recorded, Mapping) else None


def differences(before: Testbed | None, after: Testbed | None) -> list[str]:
    """What differs between two testbeds (``cpus 4 -> 8``); nothing when neither is known."""
    if before is None or after is None:
        return []
    return [
        f"{f.name.replace('_', ' ')} {getattr(before, f.name)} -> {getattr(after, f.name)}"
        for f in dataclasses.fields(Testbed)
        if getattr(before, f.name) != getattr(after, f.name)
    ]


def testbed_notes(baseline: Report, current: Report, substrates: list[str]) -> list[str]:
    """A warning per common substrate measured on another testbed, naming what differs; a
    note when one run's testbed is unknown (saved before testbeds were recorded)."""
    lines = []
    for name in substrates:
        before, after = testbed_of(baseline, name), testbed_of(current, name)
        if (before is None) != (after is None):
            which = "baseline's" if before is None else "this run's"
            lines.append(f"note: {name}: the {which} testbed is {UNKNOWN} (saved before "
                         "testbeds were recorded)")  # fmt: skip
        elif differ := differences(before, after):
            lines.append(f"warning: {name} was not measured on the baseline's testbed: "
                         f"{'; '.join(differ)}")  # fmt: skip
    return lines
