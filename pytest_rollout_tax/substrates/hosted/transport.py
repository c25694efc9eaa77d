"""What every hosted transport shares: the sandbox's SDK object, and errors through its
substrate's table."""

from __future__ import annotations

import errno
from typing import Any, Protocol

from ...core.transport import Transport, one_line, step_timeout
from ...errors import RolloutTaxError, StepTimeout


class Provider(Protocol):
    """What a transport needs of its substrate: a name, its error table, redaction."""

    name: str

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError: ...

    def redact(self, value: object) -> str: ...


class HostedTransport(Transport):
    """A transport over one hosted sandbox (a :class:`~.base.HostedHandle`): ``sdk`` is the
    SDK's object for it."""

    def __init__(self, handle: Any, substrate: Provider) -> None:
        self.sdk: Any = handle.sdk
        self.sandbox_id: str = handle.id
        self._substrate = substrate

    def _fail(self, exc: BaseException, action: str) -> RolloutTaxError:
        """``exc`` as the substrate's table says, naming this sandbox."""
        return self._substrate.error(exc, action, sandbox_id=self.sandbox_id)

    def _file_timeout(self, timeout: float | None) -> StepTimeout:
        """A file request past the step's timeout (the request may still run in the sandbox)."""
        return step_timeout(self._substrate.name, timeout or 0, "it may still be running")

    def _answered(self, exc: BaseException, path: str) -> OSError:
        """What the sandbox answered about ``path`` (missing, not a directory...), as an
        OSError: the Sandbox asks the sandbox why."""
        return OSError(errno.EIO, one_line(self._substrate.redact(exc), 400), path)
