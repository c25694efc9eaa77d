"""The errors this package raises on purpose; each message is meant for the user."""

from __future__ import annotations

import re
from collections.abc import Iterable

_SANDBOX_ID = re.compile(r"\b[0-9a-f]{12,}\b")


class RolloutTaxError(Exception):
    """Base of every error this package raises on purpose; its message is for the user."""


class ConfigError(RolloutTaxError, ValueError):
    """An unknown substrate, option or malformed value; the message names it."""


class SubstrateUnavailable(RolloutTaxError):
    """The substrate cannot be used here: SDK not installed, daemon or API unreachable."""


class CredentialsMissing(SubstrateUnavailable):
    """The substrate needs credentials that are not configured; its rollouts are skipped."""


class SandboxStartError(RolloutTaxError):
    """A sandbox did not become ready; whatever was created has been removed."""


class SandboxError(RolloutTaxError):
    """A live sandbox failed: its API refused a step, or the environment was lost."""


class StepTimeout(RolloutTaxError):
    """A step ran past its timeout; its process was killed and the sandbox stays usable."""


def reason_of(exc: BaseException) -> str:
    """A short, countable failure reason: the type and the first line of the message, with
    sandbox ids (12 or more hex digits) as ``<id>`` so that one cause counts once."""
    text = str(exc).strip()
    line = _SANDBOX_ID.sub("<id>", text.splitlines()[0] if text else "")
    return f"{type(exc).__name__}: {line}".rstrip(": ")[:300]


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (of six characters or more) replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[REDACTED]")
    return text
