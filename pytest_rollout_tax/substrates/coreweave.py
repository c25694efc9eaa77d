"""``coreweave``: hosted sandboxes on CoreWeave (https://docs.coreweave.com/products/sandboxes),
through the official ``cwsandbox`` SDK, on the hosted base (:mod:`.hosted`).

Cold start is the create request (phase ``create``: ``CreateSandbox`` accepted), then the
sandbox's states as the service reports them, each a phase while it lasts (``pending``: accepted,
waiting for placement; ``creating``: its container starting; ``preparing`` where the service
fills an image), until RUNNING, then the first no-op command (phase ``first_exec``). The states
are read by polling ``get_status`` every ``poll_interval`` seconds, so a state shorter than that
may be folded into the one before it. Commands run through ``sb.exec`` (the service's
``StreamExec``), files through ``read_file`` and ``write_file``, teardown is ``stop``. The key
comes from ``CWSANDBOX_API_KEY`` only; ``CWSANDBOX_BASE_URL`` points the SDK at another gateway.
The ownership labels are tags (``KEY=VALUE``) on the create request.

CoreWeave publishes a concurrent-sandbox quota per organization (10 for accounts without a
higher tier), and no create rate we could read: ``max_sandboxes`` keeps this process's live
sandboxes at or under the quota (a create waits, phase ``paced``, not counted), and
``max_creates_per_s`` paces the creates' starts where an organization knows its rate.

Install with ``pip install 'pytest-rollout-tax[coreweave]'``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.transport import (
    RawResult,
    Transport,
    one_line,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ..errors import ExtraMissing, SandboxStartError
from .hosted import (
    PACED_PHASE,
    Credentials,
    ErrorTable,
    HostedHandle,
    HostedOptions,
    HostedSubstrate,
    Kind,
    Listed,
    Row,
)

try:
    import cwsandbox
    import cwsandbox.exceptions as cx
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("coreweave", "coreweave") from None

DEFAULT_BASE_URL = "https://api.cwsandbox.com"
#: CoreWeave's published default concurrent-sandbox quota for accounts without a higher tier
#: (docs.coreweave.com/products/sandboxes/reference/limits-and-quotas, read 2026-12-06).
PUBLISHED_MAX_SANDBOXES = 10
#: A wait for a place under ``max_sandboxes`` longer than this is phase ``paced``.
PACE_NOTED_S = 0.001
#: The deadline of a command given no timeout (the SDK's default would be 300 s).
NO_STEP_LIMIT_S = 24 * 3600.0
#: How long past a step's timeout to wait for its answer before giving up on it.
STEP_GRACE_S = 1.0
#: A serverless sandbox's size when none is requested (the service's default: 1 CPU, 1 GiB).
DEFAULT_VCPUS, DEFAULT_GIB = 1.0, 1.0
#: States a sandbox passes through before RUNNING (phases of the cold start).
STARTING = ("pending", "creating", "preparing")


@dataclass
class CoreWeaveOptions(HostedOptions):
    labels_option: ClassVar[str] = "tags"

    #: The registry image every sandbox runs (the SDK's default: ``python:3.11``).
    image: str = "python:3.11"
    #: Sandbox lifetime in seconds (the service stops it then); none: the service's default.
    max_lifetime: int | None = 3600
    #: vCPUs to request (``"0.5"``, ``"2"``); none: the service's default.
    cpu: str | None = None
    #: Memory to request (``"512Mi"``, ``"2Gi"``); none: the service's default.
    memory: str | None = None
    #: Extra tags on every sandbox, as ``KEY=VALUE`` (the rollout-tax.io/ tags are added).
    tags: dict[str, str] = field(default_factory=dict)
    #: Environment variables for every command in the sandbox.
    env: dict[str, str] = field(default_factory=dict)
    #: The data plane: ``auto`` (direct mTLS, else the gateway: the SDK's default),
    #: ``gateway`` or ``direct``.
    data_plane: str = "auto"
    #: Seconds a control-plane request may take (the create's included).
    request_timeout: float = 60.0
    #: Seconds between two status polls during the cold start.
    poll_interval: float = 0.1
    #: Live sandboxes from this process at most (none or 0: no limit); the default is
    #: CoreWeave's published default concurrent quota.
    max_sandboxes: int | None = PUBLISHED_MAX_SANDBOXES

    def check(self) -> None:
        super().check()
        if not self.image.strip():
            raise ValueError("image: must not be empty")
        if self.max_lifetime is not None and self.max_lifetime < 1:
            raise ValueError(f"max_lifetime={self.max_lifetime}: must be >= 1 s")
        if self.data_plane not in ("auto", "gateway", "direct"):
            raise ValueError(f"data_plane={self.data_plane!r}: expected auto, gateway or direct")
        if self.request_timeout <= 0:
            raise ValueError(f"request_timeout={self.request_timeout}: must be > 0 s")
        if not 0 < self.poll_interval <= 10:
            raise ValueError(f"poll_interval={self.poll_interval}: expected > 0 and <= 10 s")
        if self.max_sandboxes is not None and self.max_sandboxes < 0:
            raise ValueError(f"max_sandboxes={self.max_sandboxes}: must be >= 0 (0: no limit)")


@dataclass
class CoreWeaveHandle(HostedHandle):
    """One CoreWeave sandbox; ``permit``: it holds a place under ``max_sandboxes``."""

    permit: bool = False


ERRORS = ErrorTable(
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} rejected the key from {variables} while {action}; check the key and "
        "its organization",
        types=(cx.CWSandboxAuthenticationError,),
        refused=True,
    ),
    Row(
        Kind.RATE_LIMITED,
        "{name}: rate limit or quota exceeded (RESOURCE_EXHAUSTED) while {action}; lower "
        "{name}.max_sandboxes or {name}.max_creates_per_s (creates were {paced}), or raise the "
        "organization's quota",
        types=(cx.SandboxResourceExhaustedError,),
        refused=True,
    ),
    Row(
        Kind.FAILED,
        "{name}: {where} did not answer the create within {name}.request_timeout="
        "{o.request_timeout:g} s; whatever it made was deleted",
        types=(cx.SandboxTimeoutError,),
        creating=True,
    ),
    Row(
        Kind.CONFIG,
        "{name}: the SDK refused the options ({type})",
        types=(ValueError, TypeError),
        creating=True,
        refused=True,
    ),
    Row(
        Kind.UNAVAILABLE,
        "{name}: cannot reach {where} while {action} ({type})",
        types=(cx.SandboxUnavailableError, OSError),
    ),
    Row(
        Kind.SANDBOX,
        "{name}: the sandbox is no longer running while {action} (deleted, or its lifetime "
        "{name}.max_lifetime={o.max_lifetime} s ran out)",
        types=(cx.SandboxNotFoundError, cx.SandboxNotRunningError),
    ),
)


class CoreWeaveExec(Transport):
    """The SDK's data plane: ``sb.exec`` per step (``StreamExec``, direct or through the
    gateway), files through ``read_file`` and ``write_file``. The SDK's streaming exec hands
    out output as text decoded chunk by chunk, so no held shell can carry bytes exactly:
    ``exec`` is the one transport."""

    name = "exec"

    def __init__(self, handle: HostedHandle, substrate: CoreWeaveSubstrate) -> None:
        self.sdk, self.sandbox_id, self._substrate = handle.sdk, handle.id, substrate

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        command = timeout_wrapped(["sh", "-c", shell_line(argv, env=env, cwd=cwd)], timeout)
        started = time.perf_counter()
        limit = NO_STEP_LIMIT_S if timeout is None else timeout + STEP_GRACE_S + 10
        process = None
        try:
            process = self.sdk.exec(command, timeout_seconds=limit)
            done = process.result(None if timeout is None else timeout + STEP_GRACE_S)
        except TimeoutError:  # the answer is late (a flood still arriving): the step is over
            if process is not None:
                process.cancel()
            fate = "it may still be running"
            raise step_timeout(self._substrate.name, timeout or 0, fate) from None
        except Exception as exc:
            raise self._substrate.error(exc, "running a command", self.sandbox_id) from None
        if was_timed_out(timeout, done.returncode, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        return RawResult.capped(
            done.returncode, done.stdout_bytes, done.stderr_bytes, self.output_cap
        )

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self._file(lambda t: self.sdk.write_file(path, data, timeout_seconds=t), path, timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        read = self._file(lambda t: self.sdk.read_file(path, timeout_seconds=t), path, timeout)
        return bytes(read)

    def _file(self, call: Any, path: str, timeout: float | None) -> Any:
        try:
            return call(timeout or NO_STEP_LIMIT_S).result()
        except cx.SandboxTimeoutError:
            fate = "it may still be running"
            raise step_timeout(self._substrate.name, timeout or 0, fate) from None
        except cx.SandboxFileError as exc:
            # the sandbox answered about the path: the contract's type is asked of the sandbox
            raise OSError(errno.EIO, one_line(self._substrate.redact(exc)), path) from None
        except Exception as exc:
            raise self._substrate.error(exc, "moving a file", self.sandbox_id) from None


class CoreWeaveSubstrate(HostedSubstrate):
    kind = "coreweave"
    Options = CoreWeaveOptions
    credentials = Credentials(
        ("CWSANDBOX_API_KEY",),
        "export a CoreWeave Sandboxes API key "
        "(docs.coreweave.com/products/sandboxes/get-started) as CWSANDBOX_API_KEY",
    )
    errors = ERRORS

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        #: Where the gateway is reached, for messages (never with the key).
        self.server_url = os.environ.get("CWSANDBOX_BASE_URL") or DEFAULT_BASE_URL
        limit = self.options.max_sandboxes or None
        self._slots = threading.BoundedSemaphore(limit) if limit else None
        with contextlib.suppress(RuntimeError):  # the plugin reaps; the SDK's handlers stay off
            cwsandbox.disable_signal_handlers()

    def _auth(self) -> Any:
        return cwsandbox.AuthHeaders(
            {"Authorization": f"Bearer {self.credential['CWSANDBOX_API_KEY']}"}, "api_key"
        )

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        before = time.perf_counter()
        permit = self._slots.acquire() if self._slots else False
        if time.perf_counter() - before > PACE_NOTED_S:  # the quota's wait, not the service's
            clock.mark(PACED_PHASE, cold_start=False)
        options = self.options
        resources = {k: v for k, v in (("cpu", options.cpu), ("memory", options.memory)) if v}
        try:
            sdk = cwsandbox.Sandbox(
                container_image=options.image,
                tags=[f"{key}={value}" for key, value in labels.items()],
                base_url=self.server_url,
                auth=self._auth(),
                request_timeout_seconds=options.request_timeout,
                max_lifetime_seconds=options.max_lifetime,
                resources=resources or None,
                environment_variables=dict(options.env) or None,
                data_plane_mode=options.data_plane,
            )
            sdk.start().result()
        except BaseException:
            self._release(permit)
            raise
        clock.mark("create")
        try:
            self._wait_running(sdk, clock)
        except BaseException:  # it exists: it must not outlive its failed start
            with contextlib.suppress(Exception):
                sdk.stop(missing_ok=True, graceful_shutdown_seconds=0).result()
            self._release(permit)
            raise
        return CoreWeaveHandle(
            id=str(sdk.sandbox_id), workdir=options.workdir, sdk=sdk, permit=permit
        )

    def _wait_running(self, sdk: Any, clock: PhaseClock) -> None:
        """Poll the status until RUNNING; each starting state is a phase while it lasts."""
        patience = self.options.request_timeout * 5
        deadline = time.monotonic() + patience
        state = str(sdk.status.value) if sdk.status is not None else "pending"
        while True:
            now = str(sdk.get_status().value)
            if now != state and state in STARTING:
                clock.mark(state)
            state = now
            if state == "running":
                return
            if state not in STARTING:
                reason = self.redact(sdk.status_reason or "no reason given")
                raise SandboxStartError(
                    f"{self.name}: sandbox {sdk.sandbox_id} is {state} instead of running: {reason}"
                )
            if time.monotonic() > deadline:
                raise SandboxStartError(
                    f"{self.name}: sandbox {sdk.sandbox_id} still {state} after {patience:g} s"
                )
            time.sleep(self.options.poll_interval)

    def _release(self, permit: bool) -> None:
        if permit and self._slots is not None:
            self._slots.release()

    def _delete(self, handle: HostedHandle) -> None:
        try:
            handle.sdk.stop(missing_ok=True, graceful_shutdown_seconds=0).result()
        except cx.SandboxNotFoundError:
            pass  # already gone (its lifetime ran out): nothing to delete
        finally:
            if isinstance(handle, CoreWeaveHandle):
                permit, handle.permit = handle.permit, False
                self._release(permit)

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterable[Listed]:
        tags = [f"{key}={value}" for key, value in (labels or {}).items()]
        found = cwsandbox.Sandbox.list(
            tags=tags, base_url=self.server_url, auth=self._auth(), timeout_seconds=30
        ).result()
        for sb in found:  # pending and creating included; one terminating is on its way out
            if getattr(sb.status, "value", "") != "terminating":
                yield Listed(str(sb.sandbox_id), dict(t.partition("=")[::2] for t in sb.tags), sb)

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        try:
            cwsandbox.Sandbox.delete(
                listed.id, base_url=self.server_url, auth=self._auth()
            ).result()
        except cx.SandboxNotFoundError:
            return False
        return True

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, HostedHandle)
        return CoreWeaveExec(handle, self)

    @property
    def endpoint(self) -> str:
        return self.server_url

    @property
    def where(self) -> str:
        return f"CoreWeave at {self.server_url}"

    @property
    def resources(self) -> Resources:
        """What is requested (``cpu`` vCPUs, ``memory``); unset, the service's 1 CPU, 1 GiB
        (serverless limits equal requests)."""
        return Resources(
            vcpus=float(self.options.cpu) if self.options.cpu else DEFAULT_VCPUS,
            gib=_gib(self.options.memory) if self.options.memory else DEFAULT_GIB,
        )


def _gib(quantity: str) -> float:
    """A Kubernetes memory quantity (``512Mi``, ``2Gi``, ``1G``) in GiB."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[: -len(unit)]) * factor / 2**30
    return float(quantity) / 2**30
