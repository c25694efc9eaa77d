"""The Runloop SDK names the package uses, behind one import guard: without the SDK, the
substrate is unavailable with the install hint."""

from __future__ import annotations

from ...errors import ExtraMissing

try:
    import httpx
    from runloop_api_client import (
        APIConnectionError,
        APIStatusError,
        APITimeoutError,
        AuthenticationError,
        BadRequestError,
        NotFoundError,
        PermissionDeniedError,
        RateLimitError,
        Runloop,
    )
    from runloop_api_client.lib.polling import PollingConfig, PollingTimeout
    from runloop_api_client.types import DevboxAsyncExecutionDetailView, DevboxView
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("runloop", "runloop") from None

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "DevboxAsyncExecutionDetailView",
    "DevboxView",
    "NotFoundError",
    "PermissionDeniedError",
    "PollingConfig",
    "PollingTimeout",
    "RateLimitError",
    "Runloop",
    "httpx",
]
