"""The order substrates are ranked in: cheapest projected worker-hours first."""

from __future__ import annotations

import math


def rank(report: dict) -> list[str]:
    """The report's substrate names by ``worker_hours`` ascending, ties by name; a substrate
    without worker-hours (no cold start or no steps) last, by name."""

    def key(name: str) -> tuple[float, str]:
        hours = report["substrates"][name].get("worker_hours")
        return (math.inf if hours is None else hours, name)

    return sorted(report["substrates"], key=key)
