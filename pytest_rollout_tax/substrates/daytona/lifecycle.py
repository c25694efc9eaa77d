"""The daytona substrate: clients, create (paced), delete, list and reap by label, errors."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ...core.price import Resources as Billed
from ...core.record import PhaseClock
from ...core.substrate import SESSION_LABEL, Substrate
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
    API_URL_VARIABLE,
    DEFAULT_API_URL,
    DaytonaHandle,
    DaytonaOptions,
)
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
    SDKSandbox,
)
from .steps import DaytonaExec, DaytonaSession

#: Daytona's default sandbox: "1 vCPU, 1GB RAM, and 3GiB disk" (daytona.io/docs/en/sandboxes).
DEFAULT_VCPUS = 1.0
DEFAULT_GIB = 1.0


class DaytonaSubstrate(Substrate):
    kind = "daytona"
    Options = DaytonaOptions
    transports = ("exec", "session")
    hosted = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        key = os.environ.get(API_KEY_VARIABLE, "").strip()
        if not key:
            raise CredentialsMissing(
                f"{self.name}: {API_KEY_VARIABLE} is not set; export a Daytona API key "
                "(https://app.daytona.io/dashboard/keys) to run the daytona rollouts"
            )
        self._key = key
        #: Where the control plane is reached, for messages (never with the key).
        self.api_url = os.environ.get(API_URL_VARIABLE, "").strip() or DEFAULT_API_URL
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        self._local = threading.local()  # the cold-start clock of this thread's create
        self._shared: Daytona | None = None
        self._shared_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<DaytonaSubstrate {self.name!r} {self._source()}>"

    def _source(self) -> str:
        if self.options.image:
            return f"image={self.options.image!r}"
        return f"snapshot={self.options.snapshot or 'default'!r}"

    # -- clients -----------------------------------------------------------------------------

    @property
    def connection(self) -> str:
        """How rollouts reach the service: ``per-rollout`` (each rollout's client sets up its
        own connection, paid in its cold start) or ``reused`` (one warm client)."""
        return "reused" if self.options.reuse_connection else "per-rollout"

    def _client(self) -> Daytona:
        """A new client (``reuse_connection=false``), else the one shared client."""
        if not self.options.reuse_connection:
            return self._new_client()
        with self._shared_lock:
            if self._shared is None:
                self._shared = self._new_client()
            return self._shared

    def _new_client(self) -> Daytona:
        config = DaytonaConfig(api_key=self._key, api_url=self.api_url, target=self.options.target)
        try:
            client = Daytona(config)
        except Exception as exc:
            raise self.error(exc, "connecting") from None
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

            api.create_sandbox = create_sandbox
        return client

    @staticmethod
    def _release(client: Daytona) -> None:
        """Drop a per-rollout client's event connection (the SDK has no ``close``)."""
        dispatcher = getattr(client, "_event_dispatcher", None)
        with contextlib.suppress(Exception):
            if dispatcher is not None:
                dispatcher.disconnect()

    # -- the lifecycle -------------------------------------------------------------------------

    def _params(self, labels: dict[str, str]) -> Any:
        common = {
            "labels": {**self.options.labels, **labels},
            "env_vars": dict(self.options.env_vars) or None,
            "auto_stop_interval": self.options.auto_stop_interval,
            "target": self.options.target,
        }
        if self.options.image:
            o = self.options
            resources = None
            if any(v is not None for v in (o.cpu, o.memory, o.disk)):
                resources = Resources(cpu=o.cpu, memory=o.memory, disk=o.disk)
            return CreateSandboxFromImageParams(image=o.image, resources=resources, **common)
        return CreateSandboxFromSnapshotParams(snapshot=self.options.snapshot, **common)

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> DaytonaHandle:
        client = self._client()
        clock.mark("client")  # a client of its own per rollout, unless reuse_connection
        if self.pacer.wait() > 0:  # right before the request: later, not slower; not counted
            clock.mark("paced", cold_start=False)
        self._local.clock = clock
        try:
            sdk = client.create(self._params(labels), timeout=self.options.create_timeout)
        except Exception as exc:
            if not self.options.reuse_connection:
                self._release(client)
            raise self.error(exc, "creating a sandbox") from None
        finally:
            self._local.clock = None
        if "create" not in clock.phases:
            clock.mark("create")
        else:
            clock.mark("started")
        handle = DaytonaHandle(id=sdk.id, workdir=self.options.workdir, sdk=sdk, client=client)
        try:  # every sandbox starts in an empty workdir, not in the snapshot user's home
            made = DaytonaExec(handle, self).run(
                ["mkdir", "-p", "--", handle.workdir], timeout=None, env=None, cwd="/"
            )
            if made.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: cannot make the workdir {handle.workdir} "
                    f"({self.name}.workdir): {made.reason()[:120]}"
                )
        except BaseException:  # a failure or Ctrl-C: the sandbox must not outlive it
            with contextlib.suppress(Exception):
                self.destroy(handle)
            raise
        clock.mark("workdir", cold_start=False)
        return handle

    def _transport(self, handle: DaytonaHandle) -> Transport:
        if self.options.transport == "session":
            return DaytonaSession(handle, self)
        return DaytonaExec(handle, self)

    def destroy(self, handle: DaytonaHandle) -> None:
        try:
            handle.sdk.delete(timeout=self.options.create_timeout, wait=True)
        except Exception as exc:
            raise self.error(exc, "deleting the sandbox", sandbox_id=handle.id) from None
        finally:
            if handle.client is not self._shared:
                self._release(handle.client)

    def _listed(self, client: Daytona, session_id: str | None) -> Iterator[SDKSandbox]:
        labels = {SESSION_LABEL: session_id} if session_id else None
        for sandbox in client.list(ListSandboxesQuery(labels=labels)):
            label = (sandbox.labels or {}).get(SESSION_LABEL)
            if label is not None and (session_id is None or label == session_id):
                yield sandbox

    def list_sandboxes(self, session_id: str | None = None) -> list[str]:
        """Ids of the sandboxes labelled by ``session_id`` (by any session if None)."""
        client = self._client()
        try:
            return [sandbox.id for sandbox in self._listed(client, session_id)]
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None

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

    def ping(self) -> None:
        """List this session's sandboxes: the cheapest authenticated call."""
        self.list_sandboxes(self.session_id)

    def reap(self, session_id: str | None = None) -> int:
        """Delete the sandboxes labelled by ``session_id`` (any session if None); how many."""
        client = self._client()
        removed = 0
        try:
            leftovers = list(self._listed(client, session_id))
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None
        for sandbox in leftovers:
            try:
                sandbox.delete(timeout=self.options.create_timeout, wait=True)
            except DaytonaNotFoundError:
                continue
            except Exception as exc:
                raise self.error(exc, "deleting a leftover sandbox", sandbox.id) from None
            removed += 1
        return removed

    def close(self) -> None:
        if self._shared is not None:
            self._release(self._shared)
            self._shared = None

    # -- errors ------------------------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return [self._key]

    def redact(self, value: object) -> str:
        """``str(value)`` without the API key in it."""
        return redact(str(value), [self._key])

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError:
        """The error to raise for an SDK exception: one countable first line naming the
        cause, the service's message (without the key) on the second."""
        if isinstance(exc, RolloutTaxError):
            return exc
        creating = action == "creating a sandbox"
        kind = SandboxStartError if creating else SandboxError
        status = getattr(exc, "status_code", None)
        where = f"the Daytona API at {self.api_url}"
        details = one_line(self.redact(exc), 400)
        if sandbox_id:
            details = f"sandbox {sandbox_id}: {details}"
        if isinstance(exc, DaytonaAuthenticationError | DaytonaForbiddenError) or status in (
            401,
            403,
        ):
            return SubstrateUnavailable(
                f"{self.name}: {where} rejected the API key from {API_KEY_VARIABLE} "
                f"(HTTP {status or 401}) while {action}; check the key and its organisation\n"
                f"{details}"
            )
        if isinstance(exc, DaytonaRateLimitError) or status == 429:
            limit = self.options.max_creates_per_s
            paced = f"paced at {limit:g}/s" if limit else "not paced"
            message = (
                f"{self.name}: rate limited (HTTP 429) while {action}; creates were {paced} "
                f"({self.name}.max_creates_per_s)\n{details}"
            )
            return RateLimited(message, details) if creating else SandboxError(message)
        if creating and isinstance(exc, DaytonaNotFoundError):
            return ConfigError(
                f"{self.name}.{self._source()}: not found (HTTP 404) at {where}; check the "
                f"name with 'daytona snapshot list'\n{details}"
            )
        if isinstance(exc, DaytonaConnectionError):
            return SubstrateUnavailable(
                f"{self.name}: cannot reach {where} while {action} ({type(exc).__name__})\n"
                f"{details}"
            )
        if creating and isinstance(exc, DaytonaTimeoutError):
            return kind(
                f"{self.name}: the sandbox did not start within {self.name}.create_timeout="
                f"{self.options.create_timeout:g} s\n{details}"
            )
        label = f"HTTP {status}" if status else type(exc).__name__
        return kind(f"{self.name}: {action} failed ({label})\n{details}")
