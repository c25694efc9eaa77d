"""The daytona substrate on the hosted base: its client, create, delete, list, and errors."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ...core.price import Resources as Billed
from ...core.record import PhaseClock
from ...core.sandbox import Handle
from ...core.transport import Transport
from ..hosted import HostedHandle, HostedSubstrate, Listed
from ..hosted.credentials import Credentials
from ..hosted.errors import ErrorTable, Kind, Row, rate_limited, rejected, unreachable
from .options import API_KEY_VARIABLE, API_URL_VARIABLE, DEFAULT_API_URL, DaytonaOptions
from .sdk import (
    CreateSandboxFromImageParams,
    CreateSandboxFromSnapshotParams,
    Daytona,
    DaytonaAuthenticationError,
    DaytonaConfig,
    DaytonaConnectionError,
    DaytonaForbiddenError,
    DaytonaNotFoundError,
    DaytonaRateLimitError,
    DaytonaTimeoutError,
    ListSandboxesQuery,
    Resources,
)
from .steps import DaytonaExec, DaytonaSession

#: Daytona's default sandbox: "1 vCPU, 1GB RAM, and 3GiB disk" (daytona.io/docs/en/sandboxes).
DEFAULT_VCPUS = 1.0
DEFAULT_GIB = 1.0

#: Daytona's errors as ours: the first row that covers an exception wins.
ERRORS = ErrorTable(
    rejected(
        (DaytonaAuthenticationError, DaytonaForbiddenError), "check the key and its organisation"
    ),
    rate_limited(
        (DaytonaRateLimitError,),
        "rate limited (HTTP 429) while {action}; creates were {paced} ({name}.max_creates_per_s)",
    ),
    Row(
        Kind.CONFIG,
        "{name}.{s.source}: not found (HTTP 404) at {where}; check the name with "
        "'daytona snapshot list'",
        types=(DaytonaNotFoundError,),
        creating=True,
        refused=True,
    ),
    unreachable((DaytonaConnectionError,)),
    Row(
        Kind.FAILED,
        "{name}: the sandbox did not start within {name}.create_timeout={o.create_timeout:g} s",
        types=(DaytonaTimeoutError,),
        creating=True,
    ),
)


class DaytonaSubstrate(HostedSubstrate):
    kind = "daytona"
    Options = DaytonaOptions
    transports = ("exec", "session")
    credentials = Credentials(
        (API_KEY_VARIABLE,),
        "export a Daytona API key (https://app.daytona.io/dashboard/keys) to run the daytona "
        "rollouts",
    )
    errors = ERRORS
    client_phase = True  # a client of its own per rollout, unless reuse_connection

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        #: Where the control plane is reached, for messages (never with the key).
        self.api_url = os.environ.get(API_URL_VARIABLE, "").strip() or DEFAULT_API_URL
        self._local = threading.local()  # the cold-start clock of this thread's create

    def __repr__(self) -> str:
        return f"<DaytonaSubstrate {self.name!r} {self.source}>"

    @property
    def source(self) -> str:
        """What sandboxes start from, as the option says it: ``image='...'``, ``snapshot=...``."""
        if self.options.image:
            return f"image={self.options.image!r}"
        return f"snapshot={self.options.snapshot or 'default'!r}"

    # -- the client ----------------------------------------------------------------------------

    def _connect(self) -> Daytona:
        config = DaytonaConfig(
            api_key=self.credential[API_KEY_VARIABLE],
            api_url=self.api_url,
            target=self.options.target,
        )
        client = Daytona(config)
        # Mark the moment the service accepts a create (``POST /sandbox`` answered), between
        # the SDK's request and its wait for the sandbox to start. Without that hook (an SDK
        # that changed inside) create and started are one phase, ``create``.
        api = getattr(client, "_sandbox_api", None)
        original = getattr(api, "create_sandbox", None)
        if original is not None:
            local = self._local

            def create_sandbox(*args: Any, **kwargs: Any) -> Any:
                response = original(*args, **kwargs)
                clock = getattr(local, "clock", None)
                if clock is not None:
                    clock.mark("create")
                return response

            setattr(api, "create_sandbox", create_sandbox)  # noqa: B010 - an SDK internal
        return client

    def _disconnect(self, client: Any) -> None:
        """Drop a client's event connection (the SDK has no ``close``)."""
        dispatcher = getattr(client, "_event_dispatcher", None)
        if dispatcher is not None:
            dispatcher.disconnect()

    # -- the lifecycle -------------------------------------------------------------------------

    def _params(self, labels: dict[str, str]) -> Any:
        o = self.options
        common = {
            "labels": labels,
            "env_vars": dict(o.env_vars) or None,
            "auto_stop_interval": o.auto_stop_interval,
            "target": o.target,
        }
        if o.image:
            resources = None
            if any(v is not None for v in (o.cpu, o.memory, o.disk)):
                resources = Resources(cpu=o.cpu, memory=o.memory, disk=o.disk)
            return CreateSandboxFromImageParams(image=o.image, resources=resources, **common)
        return CreateSandboxFromSnapshotParams(snapshot=o.snapshot, **common)

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        self._local.clock = clock
        try:
            sdk = client.create(self._params(labels), timeout=self.options.create_timeout)
        finally:
            self._local.clock = None
        clock.mark("create" if "create" not in clock.phases else "started")
        return HostedHandle(id=sdk.id, workdir=self.options.workdir, sdk=sdk)

    def _setup_transport(self, handle: HostedHandle) -> Transport:
        return DaytonaExec(handle, self)  # the session, if any, is opened after

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, HostedHandle)
        if self.options.transport == "session":
            return DaytonaSession(handle, self)
        return DaytonaExec(handle, self)

    def _delete(self, handle: HostedHandle) -> None:
        handle.sdk.delete(timeout=self.options.create_timeout, wait=True)

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterator[Listed]:
        query = ListSandboxesQuery(labels=dict(labels) if labels else None)
        for sandbox in client.list(query):
            yield Listed(sandbox.id, sandbox.labels or {}, sandbox)

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        try:
            listed.sdk.delete(timeout=self.options.create_timeout, wait=True)
        except DaytonaNotFoundError:
            return False
        return True

    def list_sandboxes(self, session_id: str | None = None) -> list[str]:
        """Ids of the sandboxes labelled by ``session_id`` (by any session if None)."""
        return [one.id for one in self.listed(session_id)]

    @property
    def resources(self) -> Billed:
        """A sandbox made from ``image`` is billed for its ``cpu`` and ``memory``; one from the
        organisation's default snapshot for Daytona's default size (1 vCPU, 1 GiB). A snapshot
        of the user's own carries its own size: ``price.vcpus`` and ``price.gib`` say it."""
        o = self.options
        if o.snapshot is not None:
            return Billed()
        return Billed(vcpus=o.cpu or DEFAULT_VCPUS, gib=o.memory or DEFAULT_GIB)

    @property
    def endpoint(self) -> str:
        return self.api_url

    @property
    def where(self) -> str:
        return f"the Daytona API at {self.api_url}"
