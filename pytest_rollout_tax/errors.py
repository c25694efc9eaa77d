"""Every error this package raises on purpose, in one tree under :class:`RolloutTaxError`.

Each message is meant for the user. An error that is also a builtin kind (a ``ValueError``,
``LookupError``, ``OSError``, ``TimeoutError``) is one, so callers may catch either.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_SANDBOX_ID = re.compile(r"\b[0-9a-f]{12,}\b")


class RolloutTaxError(Exception):
    """Base of every error this package raises on purpose; its message is for the user."""


class ConfigError(RolloutTaxError, ValueError):
    """An unknown substrate, option or malformed value; the message names it."""


class SubstrateUnavailable(RolloutTaxError):
    """The substrate cannot be used here: SDK not installed, daemon or API unreachable."""


class ExtraMissing(SubstrateUnavailable, ImportError):
    """A substrate's optional dependencies (its extra) are not installed."""

    def __init__(self, substrate: str, extra: str) -> None:
        super().__init__(
            f"{substrate} needs the [{extra}] extra: pip install 'pytest-rollout-tax[{extra}]'"
        )
        self.substrate = substrate
        self.extra = extra

    def named(self, substrate: str) -> ExtraMissing:
        """The same error for the substrate (or variant) ``substrate``."""
        return ExtraMissing(substrate, self.extra)


class CredentialsMissing(SubstrateUnavailable):
    """The substrate needs credentials that are not configured; its rollouts are skipped."""


class RuntimeMissing(CredentialsMissing):
    """A runtime the substrate asks for is not registered in its engine (gVisor's ``runsc``);
    its rollouts are skipped, as without credentials, with one line saying how to register it."""


class SandboxStartError(RolloutTaxError):
    """A sandbox did not become ready; whatever was created has been removed."""


class PrepareFailed(SandboxStartError):
    """A workload's own setup (marker ``prepare=FUNC``) raised: the workload's failure, not the
    infrastructure's."""


class SandboxUnbound(SandboxStartError):
    """A request for a sandbox the service's controller never bound to one within its timeout
    (an agent-sandbox claim left unbound): the rollout's outcome is ``unbound``, its reason the
    controller's conditions."""


class RateLimited(SandboxStartError):
    """A create the provider's rate limiter or quota refused (HTTP 429, RESOURCE_EXHAUSTED):
    recorded as the outcome ``rate_limited`` with the provider's message, never as a sandbox
    failure."""

    def __init__(self, message: str, provider_message: str = "") -> None:
        super().__init__(message)
        #: What the provider said, without credentials.
        self.provider_message = provider_message


class SandboxError(RolloutTaxError):
    """A live sandbox failed: its API refused a step, or the environment was lost."""


class BudgetExceeded(RolloutTaxError, TimeoutError):
    """A part of a rollout ran past its own time budget; :attr:`budget` names which:
    ``create``, ``ready``, ``step`` or ``teardown`` (``core.budgets.BUDGETS``)."""

    budget = "step"


class StepTimeout(BudgetExceeded):
    """A step ran past its timeout; its process was killed and the sandbox stays usable."""


class CreateTimeout(BudgetExceeded, SandboxStartError):
    """A create ran past ``NAME.create_timeout``; what it made, then or later, is deleted."""

    budget = "create"


class ReadyTimeout(BudgetExceeded, SandboxStartError):
    """A created sandbox did not answer its first no-op within ``NAME.ready_timeout``."""

    budget = "ready"


class TeardownTimeout(BudgetExceeded, SandboxError):
    """A delete ran past ``NAME.teardown_timeout``; the session's reap removes it later."""

    budget = "teardown"


class UsageError(ConfigError):
    """Bad command-line input to ``python -m pytest_rollout_tax``; one line, exit status 4."""


class TrajectoryError(ConfigError):
    """A trajectory file that cannot be read; the message names the file and the line."""


class NotATrajectory(TrajectoryError):
    """A file that holds no trajectory at all (empty, not JSON, or JSON of another shape): in a
    folder given to ``--rollout-replay`` it is skipped, named explicitly it is an error."""


class TrainLogError(ConfigError):
    """A training log that cannot be read (empty, corrupt, of another kind, or with no key of a
    known stack); the message names the file and what was found in it."""


class NotRegularFileError(RolloutTaxError, OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a directory) where one is
    needed: a report's file, or what ``read_file`` reads (refused before anything reads it, so
    it never blocks; errno ``EINVAL``)."""


class SavedRunError(RolloutTaxError):
    """A saved run that cannot be used: unreadable, not JSON, wrong schema, bad name."""


class NoSavedRun(RolloutTaxError, LookupError):
    """The requested baseline does not exist (yet): a warning, never a failure."""


class HistoryUnavailable(RolloutTaxError):
    """The change-point detector's packages are not installed."""


class PlotsUnavailable(RolloutTaxError):
    """matplotlib, which draws the HTML report's figures, is not installed."""


class MergeRefused(RolloutTaxError):
    """Reports that cannot be merged into one; the message is one line naming why."""


class ReplayFailure(RolloutTaxError):
    """A replayed step the substrate failed (past its timeout, a lost sandbox): one line that
    names the file, the step and its command; ``reason`` is the substrate's countable one."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


#: The longest failure reason kept: cut only after redaction (:func:`redact`).
REASON_LIMIT = 300


def reason_of(exc: BaseException, limit: int | None = REASON_LIMIT) -> str:
    """A short, countable failure reason: the type and the first line of the message, with
    sandbox ids (12 or more hex digits) as ``<id>`` so that one cause counts once. ``limit``
    None: uncut, for a caller that redacts it first."""
    text = str(exc).strip()
    line = _SANDBOX_ID.sub("<id>", text.splitlines()[0] if text else "")
    reason = f"{type(exc).__name__}: {line}".rstrip(": ")
    return reason if limit is None else reason[:limit]


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (of six characters or more) replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[REDACTED]")
    return text


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'docker'?)`` for the closest of ``choices`` to a mistyped ``name``, or
    nothing when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
