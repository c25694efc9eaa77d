"""The Daytona SDK names the package uses, behind one import guard: without the SDK, the
substrate is unavailable with the install hint."""

from __future__ import annotations

from ...errors import ExtraMissing

try:
    from daytona import (
        CreateSandboxFromImageParams,
        CreateSandboxFromSnapshotParams,
        Daytona,
        DaytonaConfig,
        ListSandboxesQuery,
        Resources,
        SessionExecuteRequest,
    )
    from daytona import Sandbox as SDKSandbox
    from daytona.common.errors import (
        DaytonaAuthenticationError,
        DaytonaConnectionError,
        DaytonaError,
        DaytonaForbiddenError,
        DaytonaNotFoundError,
        DaytonaRateLimitError,
        DaytonaTimeoutError,
    )
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("daytona", "daytona") from None

__all__ = [
    "CreateSandboxFromImageParams",
    "CreateSandboxFromSnapshotParams",
    "Daytona",
    "DaytonaAuthenticationError",
    "DaytonaConfig",
    "DaytonaConnectionError",
    "DaytonaError",
    "DaytonaForbiddenError",
    "DaytonaNotFoundError",
    "DaytonaRateLimitError",
    "DaytonaTimeoutError",
    "ListSandboxesQuery",
    "Resources",
    "SDKSandbox",
    "SessionExecuteRequest",
]
