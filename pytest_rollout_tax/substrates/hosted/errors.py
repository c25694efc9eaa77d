"""The table of a provider's errors mapped to ours: one row per cause, first match wins.

A provider declares its table as data (:class:`ErrorTable` of :class:`Row`); the base turns
an SDK exception into one error whose first line is the same for every rollout with the
same cause (the summary counts it) and whose second line is what the provider said, without
credentials. A row's text is a :meth:`str.format` template with these fields:

``name``      the substrate's name (``e2b``, or a variant's)
``where``     where its control plane is (``the E2B API at https://api.e2b.app``)
``action``    what failed (``creating a sandbox``, ``running a command``...)
``status``    the HTTP status (the exception's ``status_code``, else the row's ``status``)
``type``      the exception's type name
``variables`` the credentials' variables (``MODAL_TOKEN_ID/MODAL_TOKEN_SECRET``)
``paced``     how creates were paced (``paced at 10/s``, ``not paced``)
``o``         the substrate's options (``{o.template!r}``); ``s`` the substrate itself
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ...errors import (
    ConfigError,
    RateLimited,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
)

#: The action of a create: its failures are start errors; a refusal is ``rate_limited``.
CREATING = "creating a sandbox"


class Kind(Enum):
    """What a row's exception becomes."""

    #: The service cannot be used (credentials refused, unreachable): SubstrateUnavailable.
    UNAVAILABLE = "unavailable"
    #: The provider's limiter refused a create: RateLimited (a SandboxError on a live sandbox).
    RATE_LIMITED = "rate_limited"
    #: An option names something the provider does not have: ConfigError.
    CONFIG = "config"
    #: The live sandbox failed (gone, its lifetime ran out): SandboxError.
    SANDBOX = "sandbox"
    #: A start error while creating, a sandbox error after: SandboxStartError or SandboxError.
    FAILED = "failed"


@dataclass(frozen=True)
class Row:
    """One cause: which exceptions it covers, what they become, and the first line said."""

    kind: Kind
    #: The first line's template (fields above); the provider's message follows on a second.
    text: str
    #: Exception types the row covers (any of them).
    types: tuple[type[BaseException], ...] = ()
    #: HTTP statuses the row covers, for an exception of another type carrying one.
    statuses: tuple[int, ...] = ()
    #: More conditions on the exception, if any (all given ones must hold).
    when: Callable[[BaseException], bool] | None = None
    #: Only while creating a sandbox.
    creating: bool = False
    #: The status said when the exception carries none (``{status}``).
    status: int | None = None
    #: Whether the provider refused the request outright, so nothing was made (no late-create
    #: lookup follows): credentials refused, rate limited, an unknown template.
    refused: bool = False

    def covers(self, exc: BaseException, status: int | None, creating: bool) -> bool:
        if self.creating and not creating:
            return False
        typed = isinstance(exc, self.types) if self.types else False
        if not typed and not (status is not None and status in self.statuses):
            return False
        return self.when is None or self.when(exc)


@dataclass(frozen=True)
class Mapped:
    """An SDK exception as ours, and whether the provider refused it (nothing made)."""

    error: RolloutTaxError
    refused: bool


class ErrorTable:
    """A provider's rows, in order; an exception no row covers is a plain failure naming its
    HTTP status or type."""

    def __init__(self, *rows: Row) -> None:
        self.rows = rows

    def map(self, exc: BaseException, action: str, details: str, fields: dict[str, Any]) -> Mapped:
        creating = action == CREATING
        status = status_of(exc)
        for row in self.rows:
            if row.covers(exc, status, creating):
                said = row.text.format(
                    action=action, status=status or row.status, type=type(exc).__name__, **fields
                )
                message = f"{said}\n{details}"
                return Mapped(_made(row.kind, message, details, creating), row.refused)
        label = f"HTTP {status}" if status else type(exc).__name__
        message = f"{fields['name']}: {action} failed ({label})\n{details}"
        return Mapped(_made(Kind.FAILED, message, details, creating), False)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (``status_code``), if any."""
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else None


def _made(kind: Kind, message: str, details: str, creating: bool) -> RolloutTaxError:
    if kind is Kind.UNAVAILABLE:
        return SubstrateUnavailable(message)
    if kind is Kind.CONFIG:
        return ConfigError(message)
    if kind is Kind.SANDBOX:
        return SandboxError(message)
    if kind is Kind.RATE_LIMITED and creating:
        return RateLimited(message, details)
    return SandboxStartError(message) if creating else SandboxError(message)


def rejected(
    types: tuple[type[BaseException], ...],
    check: str,
    *,
    credential: str = "API key",
    statuses: tuple[int, ...] = (401, 403),
) -> Row:
    """The row of credentials the provider refused (``check``: what to do, after "; ")."""
    http = " (HTTP {status})" if statuses else ""
    return Row(
        Kind.UNAVAILABLE,
        f"{{name}}: {{where}} rejected the {credential} from {{variables}}{http} while "
        f"{{action}}; {check}",
        types=types,
        statuses=statuses,
        status=statuses[0] if statuses else None,
        refused=True,
    )


def rate_limited(
    types: tuple[type[BaseException], ...], said: str, *, statuses: tuple[int, ...] = (429,)
) -> Row:
    """The row of a create the provider's limiter refused; ``said`` follows the name."""
    return Row(
        Kind.RATE_LIMITED,
        f"{{name}}: {said}",
        types=types,
        statuses=statuses,
        creating=not statuses,
        refused=True,
    )


def unreachable(types: tuple[type[BaseException], ...], **more: Any) -> Row:
    """The row of a control plane this client cannot reach (the exception's type said)."""
    return Row(
        Kind.UNAVAILABLE,
        "{name}: cannot reach {where} while {action} ({type})",
        types=types,
        **more,
    )
