"""``coreweave``: hosted sandboxes on CoreWeave (https://docs.coreweave.com/products/sandboxes),
through the official ``cwsandbox`` SDK.

Cold start is the create request (phase ``create``: ``CreateSandbox`` accepted), then the
sandbox's states as the service reports them, each a phase while it lasts (``pending``: accepted,
waiting for placement; ``creating``: its container starting; ``preparing`` where the service
fills an image), until RUNNING, then the first no-op command (phase ``first_exec``). The states
are read by polling ``get_status`` every ``poll_interval`` seconds, so a state shorter than that
may be folded into the one before it. Making the empty workdir is phase ``workdir``, not counted.
Commands run through ``sb.exec`` (the service's ``StreamExec``), files through ``read_file``
and ``write_file``, teardown is ``stop``. The key comes from ``CWSANDBOX_API_KEY`` only;
``CWSANDBOX_BASE_URL`` points the SDK at another gateway. Every sandbox carries the ownership
labels as tags (``KEY=VALUE``), so leftovers can be listed and deleted by session or by owner;
a create that timed out or was interrupted is looked up by its rollout's own tag and deleted.

CoreWeave publishes a concurrent-sandbox quota per organization (10 for accounts without a
higher tier), not a create rate: ``max_sandboxes`` keeps this process's live sandboxes at or
under it (a create waits, phase ``paced``, not counted), and ``max_creates_per_s`` paces the
creates' starts where an organization knows its rate. A create the service refuses
(RESOURCE_EXHAUSTED) is :class:`~..errors.RateLimited`.

Install with ``pip install 'pytest-rollout-tax[coreweave]'``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Substrate, SubstrateOptions
from ..core.transport import (
    RawResult,
    Transport,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ..errors import (
    ConfigError,
    CredentialsMissing,
    ExtraMissing,
    RateLimited,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
    redact,
)
from .pacing import CreatePacer

try:
    import cwsandbox
    import cwsandbox.exceptions as cx
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("coreweave", "coreweave") from None

API_KEY_VARIABLE = "CWSANDBOX_API_KEY"
DEFAULT_BASE_URL = "https://api.cwsandbox.com"
LABEL_PREFIX = "rollout-tax.io/"
#: Which process created a sandbox (``HOST:PID``): ``reap(owner=...)`` deletes only its own.
OWNER_LABEL = "rollout-tax.io/owner"
#: CoreWeave's published default concurrent-sandbox quota for accounts without a higher tier
#: (docs.coreweave.com/products/sandboxes/reference/limits-and-quotas).
PUBLISHED_MAX_SANDBOXES = 10
#: A wait for the pacer longer than this is its own phase (``paced``), not counted.
PACE_NOTED_S = 0.001
#: The deadline of a command given no timeout (the SDK's default would be 300 s).
NO_STEP_LIMIT_S = 24 * 3600.0
#: How long past a step's timeout to wait for its answer before giving up on it.
STEP_GRACE_S = 1.0
#: How long to look for the sandbox of a create that timed out or was interrupted.
LATE_CREATE_SEARCH_S = 5.0
#: The SDK's default container request when none is given.
DEFAULT_VCPUS, DEFAULT_GIB = 1.0, 1.0
#: States a sandbox passes through before RUNNING (phases of the cold start).
STARTING = ("pending", "creating", "preparing")


@dataclass
class CoreWeaveOptions(SubstrateOptions):
    #: The registry image every sandbox runs (the SDK's default: ``python:3.11``).
    image: str = "python:3.11"
    #: Sandbox lifetime in seconds (the service stops it then); none: the service's default.
    max_lifetime: int | None = 3600
    #: vCPUs to request (``"0.5"``, ``"2"``); none: the service's default.
    cpu: str | None = None
    #: Memory to request (``"512Mi"``, ``"2Gi"``); none: the service's default.
    memory: str | None = None
    #: Extra tags on every sandbox (the rollout-tax.io/ ownership tags are added).
    tags: list[str] = field(default_factory=list)
    #: Environment variables for every command in the sandbox.
    env: dict[str, str] = field(default_factory=dict)
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/workspace"
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
    #: Creates started per second at most (none or 0: unpaced; CoreWeave publishes none).
    max_creates_per_s: float | None = None

    def check(self) -> None:
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
        if self.max_creates_per_s is not None and not 0 <= self.max_creates_per_s <= 10_000:
            raise ValueError(
                f"max_creates_per_s={self.max_creates_per_s}: expected 0 to 10,000 (0: unpaced)"
            )
        reserved = sorted(tag for tag in self.tags if tag.startswith(LABEL_PREFIX))
        if reserved:
            raise ValueError(f"tags: {', '.join(reserved)}: {LABEL_PREFIX}* is reserved")
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")


@dataclass
class CoreWeaveHandle(Handle):
    """One CoreWeave sandbox: ``sdk`` is the SDK's ``Sandbox``; ``permit`` its place under
    ``max_sandboxes`` (released at teardown)."""

    sdk: Any
    permit: bool = False


class CoreWeaveExec(Transport):
    """The SDK's data plane: ``sb.exec`` per step (``StreamExec``, direct or through the
    gateway), files through ``read_file`` and ``write_file``. The SDK's streaming exec hands
    out output as text decoded chunk by chunk, so no held shell can carry bytes exactly:
    ``exec`` is the one transport."""

    name = "exec"

    def __init__(self, handle: CoreWeaveHandle, substrate: CoreWeaveSubstrate) -> None:
        self.sdk = handle.sdk
        self.sandbox_id = handle.id
        self._substrate = substrate

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
            raise step_timeout(
                self._substrate.name, timeout or 0, "it may still be running"
            ) from None
        except Exception as exc:
            raise self._substrate.error(exc, "running a command", self.sandbox_id) from None
        code = done.returncode
        if was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        return RawResult.capped(code, done.stdout_bytes, done.stderr_bytes, self.output_cap)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self._file(lambda t: self.sdk.write_file(path, data, timeout_seconds=t), path, timeout)

    def read(self, path: str, *, timeout: float | None) -> bytes:
        return bytes(
            self._file(lambda t: self.sdk.read_file(path, timeout_seconds=t), path, timeout)
        )

    def _file(self, call: Any, path: str, timeout: float | None) -> Any:
        try:
            return call(timeout or NO_STEP_LIMIT_S).result()
        except cx.SandboxTimeoutError:
            raise step_timeout(
                self._substrate.name, timeout or 0, "it may still be running"
            ) from None
        except cx.SandboxFileError as exc:
            # the sandbox answered about the path: the contract's type is asked of the sandbox
            message = " ".join(self._substrate.redact(exc).split())
            raise OSError(errno.EIO, message, path) from None
        except Exception as exc:
            raise self._substrate.error(exc, "moving a file", self.sandbox_id) from None


class CoreWeaveSubstrate(Substrate):
    kind = "coreweave"
    Options = CoreWeaveOptions
    hosted = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        key = os.environ.get(API_KEY_VARIABLE, "").strip()
        if not key:
            raise CredentialsMissing(
                f"{self.name}: {API_KEY_VARIABLE} not set; export a CoreWeave Sandboxes API key "
                "(docs.coreweave.com/products/sandboxes/get-started) as CWSANDBOX_API_KEY"
            )
        self._key = key
        #: Where the gateway is reached, for messages (never with the key).
        self.server_url = os.environ.get("CWSANDBOX_BASE_URL") or DEFAULT_BASE_URL
        #: Which process creates this substrate's sandboxes.
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        limit = self.options.max_sandboxes or None
        self._slots = threading.BoundedSemaphore(limit) if limit else None
        with contextlib.suppress(RuntimeError):  # the plugin reaps; the SDK's handlers stay off
            cwsandbox.disable_signal_handlers()

    def __repr__(self) -> str:
        return f"<CoreWeaveSubstrate {self.name!r} image={self.options.image!r}>"

    # -- the SDK's calls -------------------------------------------------------------------------

    def _new_sdk_sandbox(self, tags: list[str]) -> Any:
        options = self.options
        resources = {k: v for k, v in (("cpu", options.cpu), ("memory", options.memory)) if v}
        return cwsandbox.Sandbox(
            container_image=options.image,
            tags=tags,
            base_url=self.server_url,
            auth=cwsandbox.AuthHeaders({"Authorization": f"Bearer {self._key}"}, "api_key"),
            request_timeout_seconds=options.request_timeout,
            max_lifetime_seconds=options.max_lifetime,
            resources=resources or None,
            environment_variables=dict(options.env) or None,
            data_plane_mode=options.data_plane,
        )

    def _list(self, tags: list[str]) -> list[Any]:
        found = cwsandbox.Sandbox.list(
            tags=tags, base_url=self.server_url, auth=self._auth(), timeout_seconds=30
        )
        return list(found.result())

    def _delete(self, sandbox_id: str) -> None:
        cwsandbox.Sandbox.delete(
            sandbox_id, base_url=self.server_url, auth=self._auth(), missing_ok=True
        ).result()

    def _auth(self) -> Any:
        return cwsandbox.AuthHeaders({"Authorization": f"Bearer {self._key}"}, "api_key")

    # -- the backend interface ----------------------------------------------------------------

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> CoreWeaveHandle:
        before = time.perf_counter()
        permit = self._slots.acquire() if self._slots else False
        self.pacer.wait()
        if time.perf_counter() - before > PACE_NOTED_S:  # the limiter's wait, not the service's
            clock.mark("paced", cold_start=False)
        tags = [*self.options.tags, *_tags(labels | {OWNER_LABEL: self.owner})]
        try:
            sdk = self._new_sdk_sandbox(tags)
            sdk.start().result()
            clock.mark("create")
            self._wait_running(sdk, clock)
        except BaseException as exc:
            self._release(permit)
            self._delete_late({ROLLOUT_LABEL: labels[ROLLOUT_LABEL]})
            if isinstance(exc, Exception):
                raise self.error(exc, "creating a sandbox") from None
            raise
        handle = CoreWeaveHandle(id=sdk.sandbox_id, workdir=self.options.workdir, sdk=sdk)
        handle.permit = permit
        try:  # every sandbox starts in an empty workdir
            mkdir = ["mkdir", "-p", "--", handle.workdir]
            made = self._transport(handle).run(mkdir, timeout=None, env=None, cwd="/")
            if made.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: cannot make the workdir {handle.workdir} ({self.name}.workdir): "
                    f"{made.stderr.decode('utf-8', 'replace').strip()[:120]}"
                )
        except BaseException:
            with contextlib.suppress(Exception):
                self.destroy(handle)
            raise
        clock.mark("workdir", cold_start=False)
        return handle

    def _wait_running(self, sdk: Any, clock: PhaseClock) -> None:
        """Poll the status until RUNNING; each starting state is a phase while it lasts."""
        deadline = time.monotonic() + self.options.request_timeout * 5
        state = str(sdk.status.value) if sdk.status is not None else "pending"
        while True:
            now = str(sdk.get_status().value)
            if now != state and state in STARTING:
                clock.mark(state)
            state = now
            if state == "running":
                return
            if state not in STARTING:
                reason = sdk.status_reason or "no reason given"
                raise SandboxStartError(
                    f"{self.name}: sandbox {sdk.sandbox_id} is {state} instead of running: "
                    f"{self.redact(reason)}"
                )
            if time.monotonic() > deadline:
                raise SandboxStartError(
                    f"{self.name}: sandbox {sdk.sandbox_id} still {state} after "
                    f"{self.options.request_timeout * 5:g} s"
                )
            time.sleep(self.options.poll_interval)

    def _delete_late(self, labels: Mapping[str, str]) -> None:
        """A create that failed, timed out or was interrupted may have made a sandbox anyway:
        find it by its rollout's own tag (for a few seconds: the service may register it
        late) and delete it."""
        deadline = time.monotonic() + LATE_CREATE_SEARCH_S
        while True:
            with contextlib.suppress(Exception):
                if self.reap_tagged(labels):
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(0.25)

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Delete every sandbox carrying all of ``labels`` as tags, in any state (one still
        pending or creating included); how many."""
        found = self._list(_tags(labels))
        for sb in found:
            self._delete(sb.sandbox_id)
        return len(found)

    def _release(self, permit: bool) -> None:
        if permit and self._slots is not None:
            self._slots.release()

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, CoreWeaveHandle)
        return CoreWeaveExec(handle, self)

    def destroy(self, handle: Handle) -> None:
        assert isinstance(handle, CoreWeaveHandle)
        try:
            handle.sdk.stop(missing_ok=True, graceful_shutdown_seconds=0).result()
        except cx.SandboxNotFoundError:
            pass  # already gone (its lifetime ran out): nothing to delete
        except Exception as exc:
            raise self.error(exc, "deleting the sandbox", handle.id) from None
        finally:
            permit, handle.permit = handle.permit, False
            self._release(permit)

    def list_sandboxes(self, session_id: str | None = None, owner: str | None = None) -> list[Any]:
        """Live sandboxes tagged by ``session_id`` and ``owner`` (any, if None) that carry
        this plugin's session tag; those already terminating are not listed."""
        wanted = _tags({SESSION_LABEL: session_id} if session_id else {})
        wanted += _tags({OWNER_LABEL: owner} if owner else {})
        try:
            found = self._list(wanted)
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None
        ours = [sb for sb in found if any(t.startswith(f"{SESSION_LABEL}=") for t in sb.tags)]
        return [sb for sb in ours if getattr(sb.status, "value", "") != "terminating"]

    @property
    def connection(self) -> str:
        """``per-rollout``: the SDK opens a gRPC channel per sandbox object (no shared client)."""
        return "per-rollout"

    @property
    def resources(self) -> Resources:
        """What is requested (``cpu`` vCPUs, ``memory``); unset, 1 vCPU and 1 GiB."""
        return Resources(
            vcpus=float(self.options.cpu) if self.options.cpu else DEFAULT_VCPUS,
            gib=_gib(self.options.memory) if self.options.memory else DEFAULT_GIB,
        )

    @property
    def endpoint(self) -> str:
        return self.server_url

    def ping(self) -> None:
        """List this session's sandboxes: a cheap authenticated call."""
        self.list_sandboxes(self.session_id)

    def reap(self, session_id: str | None = None, owner: str | None = None) -> int:
        """Delete the sandboxes tagged by ``session_id`` and ``owner`` (any, if None); how
        many."""
        removed = 0
        for sb in self.list_sandboxes(session_id, owner):
            try:
                self._delete(sb.sandbox_id)
            except Exception as exc:
                raise self.error(exc, "deleting a leftover sandbox", sb.sandbox_id) from None
            removed += 1
        return removed

    # -- errors --------------------------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return [self._key]

    def redact(self, value: object) -> str:
        """``str(value)`` without the key in it."""
        return redact(str(value), [self._key])

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError:
        """The error for an SDK exception: one countable line naming the cause, no key; the
        service's message follows on a second line."""
        if isinstance(exc, RolloutTaxError):
            return exc
        creating = action == "creating a sandbox"
        kind = SandboxStartError if creating else SandboxError
        where = f"CoreWeave at {self.server_url}"
        said = " ".join(self.redact(exc).split())
        details = f"sandbox {sandbox_id}: {said}" if sandbox_id else said
        if isinstance(exc, cx.CWSandboxAuthenticationError):
            return SubstrateUnavailable(
                f"{self.name}: {where} rejected the key from {API_KEY_VARIABLE} while {action}; "
                f"check the key and its organization\n{details}"
            )
        if isinstance(exc, cx.SandboxResourceExhaustedError) and creating:
            return RateLimited(
                f"{self.name}: rate limit or quota exceeded (RESOURCE_EXHAUSTED) while {action}; "
                f"lower {self.name}.max_sandboxes or {self.name}.max_creates_per_s, or raise "
                f"the organization's quota\n{details}",
                provider_message=said,
            )
        if isinstance(exc, cx.SandboxUnavailableError | OSError):
            return SubstrateUnavailable(
                f"{self.name}: cannot reach {where} while {action} ({type(exc).__name__})\n"
                f"{details}"
            )
        if isinstance(exc, cx.SandboxTimeoutError) and creating:
            return SandboxStartError(
                f"{self.name}: {where} did not answer the create within "
                f"{self.name}.request_timeout={self.options.request_timeout:g} s; "
                f"whatever it made was deleted\n{details}"
            )
        if isinstance(exc, cx.SandboxNotFoundError | cx.SandboxNotRunningError):
            return SandboxError(
                f"{self.name}: the sandbox is no longer running while {action} (deleted, or "
                f"its lifetime {self.name}.max_lifetime={self.options.max_lifetime} s ran out)"
                f"\n{details}"
            )
        if isinstance(exc, ValueError | TypeError) and creating:
            return ConfigError(f"{self.name}: the SDK refused the options: {said}")
        return kind(f"{self.name}: {action} failed ({type(exc).__name__})\n{details}")


def _tags(labels: Mapping[str, str]) -> list[str]:
    """Labels as CoreWeave tags (plain strings): ``KEY=VALUE``."""
    return [f"{key}={value}" for key, value in labels.items()]


def _gib(quantity: str) -> float:
    """A Kubernetes memory quantity (``512Mi``, ``2Gi``, ``1G``) in GiB."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[: -len(unit)]) * factor / 2**30
    return float(quantity) / 2**30
