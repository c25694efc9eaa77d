"""Which results may be ranked or compared: a substrate whose every rollout failed has none,
and says so in one phrase; one with some failures is ranked beside its success rate."""

from __future__ import annotations


def failed_all(entry: dict) -> bool:
    """True when the substrate ran rollouts and every one of them failed."""
    return bool(entry.get("rollouts")) and entry.get("failures", 0) >= entry["rollouts"]


def success_rate(entry: dict) -> float | None:
    """The share of the substrate's rollouts that succeeded (None when it ran none)."""
    if not entry.get("rollouts"):
        return None
    return 1 - entry.get("failures", 0) / entry["rollouts"]


def no_valid_result(entry: dict) -> str | None:
    """``no valid result (4 of 4 failed: REASON)``, REASON the most frequent failure; None when
    some rollout succeeded."""
    if not failed_all(entry):
        return None
    reasons = entry.get("failure_reasons") or {}
    why = max(reasons, key=lambda reason: reasons[reason]) if reasons else "no reason recorded"
    return f"no valid result ({entry['failures']} of {entry['rollouts']} failed: {why})"


def isolates(name: str, entry: dict) -> bool:
    """False for the unisolated floor: the ``local`` kind, commands on the host itself."""
    return (entry.get("kind") or name) != "local"
