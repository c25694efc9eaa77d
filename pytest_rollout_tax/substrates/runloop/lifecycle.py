"""The runloop substrate: clients, create (paced) through the devbox's states, shutdown, list
and reap by metadata, a late create found by its label, errors."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from ...core.price import Resources
from ...core.record import PhaseClock
from ...core.sandbox import Handle
from ...core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Substrate
from ...core.transport import Transport, one_line
from ...errors import (
    ConfigError,
    CredentialsMissing,
    RateLimited,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
    redact,
)
from ..pacing import CreatePacer
from .options import (
    API_KEY_VARIABLE,
    BASE_URL_VARIABLE,
    DEFAULT_BASE_URL,
    DEFAULT_SIZE,
    SIZES,
    RunloopHandle,
    RunloopOptions,
)
from .sdk import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    DevboxView,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    Runloop,
    httpx,
)
from .steps import TRANSPORTS

#: A devbox's states before it runs (a FLEX devbox queues first), and those it never leaves.
BOOTING = ("queued", "scheduled", "provisioning", "initializing")
ENDED = ("failure", "shutdown")
STATUSES = (*BOOTING, "running", "suspending", "suspended", "resuming", *ENDED)
#: The longest Runloop holds a status long poll, and the client's margin past it.
LONG_POLL_S, POLL_MARGIN_S = 30.0, 5.0
#: Devboxes per page when listing (Runloop's maximum is 5,000).
PAGE = 100


class RunloopSubstrate(Substrate):
    kind = "runloop"
    Options = RunloopOptions
    transports = ("exec", "session")
    hosted = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        key = os.environ.get(API_KEY_VARIABLE, "").strip()
        if not key:
            raise CredentialsMissing(
                f"{self.name}: {API_KEY_VARIABLE} is not set; export a Runloop API key "
                "(https://platform.runloop.ai/settings) to run the runloop rollouts"
            )
        self._key = key
        #: Where the control plane is reached, for messages (never with the key).
        self.base_url = os.environ.get(BASE_URL_VARIABLE, "").strip() or DEFAULT_BASE_URL
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        self._shared: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<RunloopSubstrate {self.name!r} blueprint={self.options.blueprint or 'default'!r}>"

    # -- clients -------------------------------------------------------------------------------

    @property
    def connection(self) -> str:
        """``per-rollout`` (each rollout's client sets up its own connections, paid in its cold
        start) or ``reused`` (one client on the SDK's process-wide HTTP/2 pool)."""
        return "reused" if self.options.reuse_connection else "per-rollout"

    def _new_client(self) -> Any:
        try:
            return Runloop(
                bearer_token=self._key,
                base_url=self.base_url,
                timeout=self.options.request_timeout,
                shared_http_pool=self.options.reuse_connection,
            )
        except Exception as exc:
            raise self.error(exc, "connecting") from None

    def _client(self) -> Any:
        """A client of the rollout's own (``reuse_connection=false``), else the shared one."""
        if not self.options.reuse_connection:
            return self._new_client()
        return self._shared_client()

    def _shared_client(self) -> Any:
        with self._lock:
            if self._shared is None:
                self._shared = self._new_client()
            return self._shared

    def _release(self, client: Any) -> None:
        if client is not self._shared:
            with contextlib.suppress(Exception):
                client.close()

    # -- the lifecycle ---------------------------------------------------------------------------

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> RunloopHandle:
        client = self._client()
        clock.mark("client")  # a client of its own per rollout, unless reuse_connection
        if self.pacer.wait() > 0:  # right before the request: later, not slower; not counted
            clock.mark("paced", cold_start=False)
        try:
            # never retried: a 429 is the limiter's answer, not a slow create
            view = client.with_options(max_retries=0).devboxes.create(
                blueprint_name=self.options.blueprint,
                environment_variables=dict(self.options.env) or None,
                launch_parameters=self.options.launch_parameters(),
                metadata={**self.options.metadata, **labels},
            )
        except BaseException as exc:  # timed out or cancelled: the devbox may exist anyway
            self._reap_late(labels[ROLLOUT_LABEL], exc)
            self._release(client)
            if isinstance(exc, Exception):
                raise self.error(exc, "creating a sandbox") from None
            raise
        clock.mark("create")  # accepted: queued or provisioning
        handle = RunloopHandle(id=view.id, workdir=self.options.workdir, client=client)
        try:
            self._await_running(handle, view, clock)
            made = TRANSPORTS["exec"](handle, self).run(
                ["mkdir", "-p", "--", handle.workdir], timeout=None, env=None, cwd="/"
            )
            if made.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: cannot make the workdir {handle.workdir} "
                    f"({self.name}.workdir): {made.reason()[:120]}"
                )
        except BaseException:  # a failure or Ctrl-C: the devbox must not outlive it
            with contextlib.suppress(Exception):
                self.destroy(handle)
            raise
        clock.mark("workdir", cold_start=False)
        return handle

    def _await_running(self, handle: RunloopHandle, view: Any, clock: PhaseClock) -> None:
        """Follow the devbox's states to ``running`` by long polls, each state waited out a
        phase of its own (``provisioning``, ``initializing``; ``queued`` on FLEX)."""
        deadline = time.monotonic() + self.options.create_timeout
        status = view.status
        while status != "running":
            if status not in BOOTING:
                reason = getattr(view, "failure_reason", None) or status
                raise SandboxStartError(
                    f"{self.name}: the devbox did not start: {reason}\ndevbox {handle.id}"
                )
            hold = min(deadline - time.monotonic(), LONG_POLL_S)
            if hold <= 0:
                raise SandboxStartError(
                    f"{self.name}: the devbox did not run within {self.name}.create_timeout="
                    f"{self.options.create_timeout:g} s (still {status})\ndevbox {handle.id}"
                )
            try:
                view = handle.client.post(
                    f"/v1/devboxes/{handle.id}/wait_for_status",
                    body={
                        "statuses": [s for s in STATUSES if s != status],
                        "timeout_seconds": hold,
                    },
                    cast_to=DevboxView,
                    options={
                        "max_retries": 0,
                        "timeout": httpx.Timeout(hold + POLL_MARGIN_S, connect=5.0),
                    },
                )
            except APIStatusError as exc:
                if exc.status_code != 408:  # 408: the hold ran out in the same state
                    raise self.error(exc, "creating a sandbox", handle.id) from None
                continue
            except Exception as exc:
                raise self.error(exc, "creating a sandbox", handle.id) from None
            clock.mark(status)
            status = view.status

    def _reap_late(self, rollout: str, cause: BaseException) -> None:
        """A create that timed out or was cancelled may have made its devbox: shut down the
        devboxes labelled with its rollout (one made later still is the session's reap's)."""
        if isinstance(cause, APIStatusError):
            return  # answered: nothing was made
        with contextlib.suppress(Exception):
            client = self._shared_client()
            for devbox in self._listed(client, ROLLOUT_LABEL, rollout):
                client.devboxes.shutdown(devbox.id)

    def _transport(self, handle: Handle) -> Transport:
        return TRANSPORTS[self.options.transport](_own(handle), self)

    def destroy(self, handle: Handle) -> None:
        handle = _own(handle)
        try:
            handle.client.devboxes.shutdown(handle.id)
        except NotFoundError:
            pass  # already gone
        except Exception as exc:
            raise self.error(exc, "shutting the devbox down", handle.id) from None
        finally:
            self._release(handle.client)

    def _listed(self, client: Any, label: str, value: str | None) -> Iterator[Any]:
        """Devboxes not shut down whose metadata has ``label`` (``value``, if given): Runloop
        lists by status only, so the metadata is matched here."""
        for devbox in client.devboxes.list(limit=PAGE, include_total_count=False):
            found = (devbox.metadata or {}).get(label)
            if devbox.status not in ENDED and found is not None and value in (None, found):
                yield devbox

    def list_sandboxes(self, session_id: str | None = None) -> list[str]:
        """Ids of the devboxes labelled by ``session_id`` (by any session if None)."""
        try:
            return [d.id for d in self._listed(self._shared_client(), SESSION_LABEL, session_id)]
        except Exception as exc:
            raise self.error(exc, "listing devboxes") from None

    def reap(self, session_id: str | None = None) -> int:
        """Shut down the devboxes labelled by ``session_id`` (any session if None); how many."""
        client = self._shared_client()
        removed = 0
        for devbox_id in self.list_sandboxes(session_id):
            try:
                client.devboxes.shutdown(devbox_id)
            except NotFoundError:
                continue
            except Exception as exc:
                raise self.error(exc, "shutting down a leftover devbox", devbox_id) from None
            removed += 1
        return removed

    @property
    def resources(self) -> Resources:
        """The preset size billed (``size``; Runloop's default SMALL: 1 vCPU, 2 GiB). A
        blueprint of a custom size says ``price.vcpus`` and ``price.gib``."""
        vcpus, gib = SIZES[self.options.size or DEFAULT_SIZE]
        return Resources(vcpus=vcpus, gib=gib)

    @property
    def endpoint(self) -> str:
        return self.base_url

    def ping(self) -> None:
        """List one devbox: the cheapest authenticated call."""
        try:
            self._shared_client().devboxes.list(limit=1, include_total_count=False)
        except Exception as exc:
            raise self.error(exc, "listing devboxes") from None

    def close(self) -> None:
        with self._lock:
            client, self._shared = self._shared, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    # -- errors --------------------------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return [self._key]

    def redact(self, value: object) -> str:
        """``str(value)`` without the API key in it."""
        return redact(str(value), [self._key])

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError:
        """The error for an SDK exception: one countable first line naming the cause, the
        service's message (without the key) on the second."""
        if isinstance(exc, RolloutTaxError):
            return exc
        creating = action == "creating a sandbox"
        kind = SandboxStartError if creating else SandboxError
        status = getattr(exc, "status_code", None)
        where = f"the Runloop API at {self.base_url}"
        details = one_line(self.redact(exc), 400)
        if sandbox_id:
            details = f"devbox {sandbox_id}: {details}"
        if isinstance(exc, AuthenticationError | PermissionDeniedError):
            return SubstrateUnavailable(
                f"{self.name}: {where} rejected the API key from {API_KEY_VARIABLE} "
                f"(HTTP {status}) while {action}; check the key\n{details}"
            )
        if isinstance(exc, RateLimitError):
            limit = self.options.max_creates_per_s
            paced = f"paced at {limit:g}/s" if limit else "not paced"
            message = (
                f"{self.name}: rate limited (HTTP 429) while {action}; creates were {paced} "
                f"({self.name}.max_creates_per_s)\n{details}"
            )
            return RateLimited(message, details) if creating else SandboxError(message)
        if creating and sandbox_id is None and isinstance(exc, NotFoundError):
            return ConfigError(
                f"{self.name}.blueprint={self.options.blueprint!r}: not found (HTTP 404) at "
                f"{where}\n{details}"
            )
        if isinstance(exc, APITimeoutError):
            return SubstrateUnavailable(
                f"{self.name}: {where} did not answer within {self.name}.request_timeout="
                f"{self.options.request_timeout:g} s while {action}\n{details}"
            )
        if isinstance(exc, APIConnectionError):
            return SubstrateUnavailable(
                f"{self.name}: cannot reach {where} while {action} ({type(exc).__name__})\n"
                f"{details}"
            )
        label = f"HTTP {status}" if status else type(exc).__name__
        return kind(f"{self.name}: {action} failed ({label})\n{details}")


def _own(handle: Handle) -> RunloopHandle:
    """``handle`` as the devbox this substrate made."""
    if not isinstance(handle, RunloopHandle):
        raise TypeError(f"not a runloop devbox: {handle!r}")
    return handle


def _after(status: str) -> list[str]:
    """Every status but ``status``: the long poll answers at the devbox's next one."""
    return [other for other in STATUSES if other != status]
