"""The runloop substrate on the hosted base: its SDK calls (client, create through the devbox's
states, shutdown, list by metadata) and its table of errors."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ...core.price import Resources
from ...core.record import PhaseClock
from ...core.sandbox import Handle
from ...core.transport import Transport
from ...errors import SandboxStartError
from ..hosted import (
    Credentials,
    ErrorTable,
    HostedHandle,
    HostedSubstrate,
    Kind,
    Listed,
    Row,
)
from .options import (
    API_KEY_VARIABLE,
    BASE_URL_VARIABLE,
    DEFAULT_BASE_URL,
    DEFAULT_SIZE,
    SIZES,
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
from .steps import TRANSPORTS, RunloopExec

#: A devbox's states before it runs (a FLEX devbox queues first), and those it never leaves.
BOOTING = ("queued", "scheduled", "provisioning", "initializing")
ENDED = ("failure", "shutdown")
STATUSES = (*BOOTING, "running", "suspending", "suspended", "resuming", *ENDED)
#: The longest Runloop holds a status long poll, and the client's margin past it.
LONG_POLL_S, POLL_MARGIN_S = 30.0, 5.0
#: Devboxes per page when listing (Runloop's maximum is 5,000).
PAGE = 100

ERRORS = ErrorTable(
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} rejected the API key from {variables} (HTTP {status}) while {action}; "
        "check the key",
        types=(AuthenticationError, PermissionDeniedError),
        refused=True,
    ),
    Row(
        Kind.RATE_LIMITED,
        "{name}: rate limited (HTTP 429) while {action}; creates were {paced} "
        "({name}.max_creates_per_s)",
        types=(RateLimitError,),
        refused=True,
    ),
    Row(
        Kind.CONFIG,
        "{name}.blueprint={o.blueprint!r}: not found (HTTP 404) at {where}",
        types=(NotFoundError,),
        creating=True,
        refused=True,
    ),
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} did not answer within {name}.request_timeout={o.request_timeout:g} s "
        "while {action}",
        types=(APITimeoutError,),
    ),
    Row(
        Kind.UNAVAILABLE,
        "{name}: cannot reach {where} while {action} ({type})",
        types=(APIConnectionError,),
    ),
)


class RunloopSubstrate(HostedSubstrate):
    kind = "runloop"
    Options = RunloopOptions
    transports = ("exec", "session")
    credentials = Credentials(
        (API_KEY_VARIABLE,), "export a Runloop API key (https://platform.runloop.ai/settings)"
    )
    errors = ERRORS
    client_phase = True
    delete_verb = "shutting down"

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        #: Where the control plane is reached, for messages (never with the key).
        self.base_url = os.environ.get(BASE_URL_VARIABLE, "").strip() or DEFAULT_BASE_URL

    # -- the SDK's calls ---------------------------------------------------------------------------

    def _connect(self) -> Any:
        """A client of its own (its own connections) unless ``reuse_connection``, which puts it
        on the SDK's process-wide HTTP/2 pool."""
        return Runloop(
            bearer_token=self.credential[API_KEY_VARIABLE],
            base_url=self.base_url,
            timeout=self.options.request_timeout,
            shared_http_pool=self.options.reuse_connection,
        )

    def _disconnect(self, client: Any) -> None:
        client.close()

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        # never retried: a 429 is the limiter's answer, not a slow create
        view = client.with_options(max_retries=0).devboxes.create(
            blueprint_name=self.options.blueprint,
            environment_variables=dict(self.options.env) or None,
            launch_parameters=self.options.launch_parameters(),
            metadata=labels,
        )
        clock.mark("create")  # accepted: queued or provisioning
        handle = HostedHandle(id=view.id, workdir=self.options.workdir, sdk=view, client=client)
        self._await_running(handle, view, clock)
        return handle

    def _await_running(self, handle: HostedHandle, view: Any, clock: PhaseClock) -> None:
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
                    body={"statuses": _after(status), "timeout_seconds": hold},
                    cast_to=DevboxView,
                    options={
                        "max_retries": 0,
                        "timeout": httpx.Timeout(hold + POLL_MARGIN_S, connect=5.0),
                    },
                )
            except APIStatusError as exc:
                if exc.status_code == 408:  # the hold ran out in the same state
                    continue
                waiting = self.error(exc, "waiting for the devbox to run", handle.id)
                raise SandboxStartError(str(waiting)) from None
            clock.mark(status)
            status = view.status

    def _delete(self, handle: HostedHandle) -> None:
        with contextlib.suppress(NotFoundError):  # already gone: nothing to shut down
            handle.client.devboxes.shutdown(handle.id)

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterable[Listed]:
        """Devboxes not shut down, whatever else their state: Runloop lists by status only,
        so their metadata is matched by the base."""
        for devbox in client.devboxes.list(limit=PAGE, include_total_count=False):
            if devbox.status not in ENDED:
                yield Listed(devbox.id, devbox.metadata or {}, devbox)

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        try:
            client.devboxes.shutdown(listed.id)
        except NotFoundError:
            return False
        return True

    def _transport(self, handle: Handle) -> Transport:
        return TRANSPORTS[self.options.transport](_own(handle), self)

    def _setup_transport(self, handle: HostedHandle) -> Transport:
        return RunloopExec(handle, self)  # the workdir is made before any session opens

    # -- what it is --------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self.base_url

    @property
    def where(self) -> str:
        return f"the Runloop API at {self.base_url}"

    @property
    def resources(self) -> Resources:
        """The preset size billed (``size``; Runloop's default SMALL: 1 vCPU, 2 GiB). A
        blueprint of a custom size says ``price.vcpus`` and ``price.gib``."""
        vcpus, gib = SIZES[self.options.size or DEFAULT_SIZE]
        return Resources(vcpus=vcpus, gib=gib)


def _after(status: str) -> list[str]:
    """Every status but ``status``: the long poll answers at the devbox's next one."""
    return [other for other in STATUSES if other != status]


def _own(handle: Handle) -> HostedHandle:
    if not isinstance(handle, HostedHandle):
        raise TypeError(f"runloop: {handle!r} is not a devbox's handle")
    return handle
