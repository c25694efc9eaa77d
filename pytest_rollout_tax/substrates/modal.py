"""``modal``: hosted sandboxes on Modal (https://modal.com), through the official ``modal`` SDK.

Cold start is ``Sandbox.create`` (phase ``create``: the image resolved, the sandbox created and
scheduled onto a worker) through the first no-op command (phase ``first_exec``: it opens the
connection to the sandbox's command router too); making the empty workdir in between is phase
``workdir``, not counted. Commands run through ``sb.exec``, files through
``sb.filesystem.write_bytes`` and ``read_bytes``, teardown is ``sb.terminate``. The token comes
from ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` only; ``MODAL_SERVER_URL`` points the SDK at
another control plane. Every sandbox carries the ownership labels as tags, so leftovers can be
listed and terminated. Creates are paced to ``max_creates_per_s`` (Modal's published default,
5/s per workspace); a create the limiter refuses is :class:`~..errors.RateLimited`.

Install with ``pip install 'pytest-rollout-tax[modal]'``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.substrate import SESSION_LABEL, Substrate, SubstrateOptions
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
    import modal
    import modal.exception as mx
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("modal", "modal") from None

TOKEN_VARIABLES = ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")
LABEL_PREFIX = "rollout-tax.io/"
#: Modal's published default limit on sandbox creations per workspace.
PUBLISHED_CREATES_PER_S = 5.0
DEFAULT_SERVER_URL = "https://api.modal.com"
#: Modal's default request: 0.125 physical cores, 128 MiB (modal.com/docs/guide/resources).
DEFAULT_CORES = 0.125
DEFAULT_MIB = 128
#: Libraries under the SDK's gRPC that log every HTTP/2 header, the token's, at DEBUG.
HEADER_LOGGERS = ("hpack", "h2")
#: A wait for the pacer longer than this is its own phase (``pace``), not counted.
PACE_NOTED_S = 0.001


@dataclass
class ModalOptions(SubstrateOptions):
    #: The registry image every sandbox runs (``modal.Image.from_registry``).
    image: str = "python:3.12-slim-bookworm"
    #: The Modal app the sandboxes belong to (looked up, created if missing).
    app: str = "rollout-tax"
    #: Sandbox lifetime in seconds: Modal terminates a sandbox this long after its creation.
    timeout: int = 300
    #: Physical CPU cores to request (Modal's ``cpu``: 1 core = 2 vCPU); none: Modal's default.
    cpu: float | None = None
    #: Memory to request in MiB; none: Modal's default.
    memory: int | None = None
    #: The region to run in (``us-east``, ``eu``...); none: any.
    region: str | None = None
    #: Extra tags on every sandbox (the rollout-tax.io/ ownership labels are added).
    tags: dict[str, str] = field(default_factory=dict)
    #: Environment variables for every command in the sandbox.
    env: dict[str, str] = field(default_factory=dict)
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/workspace"
    #: Sandbox creations per second at most, from this process (none: unpaced).
    max_creates_per_s: float | None = PUBLISHED_CREATES_PER_S
    #: One client connection for every rollout (false: each rollout opens its own, so its
    #: cold start pays connection setup as a fresh worker's would).
    reuse_connection: bool = False

    def check(self) -> None:
        if not self.image.strip():
            raise ValueError("image: must not be empty")
        if not self.app.strip():
            raise ValueError("app: must not be empty")
        if self.timeout < 1:
            raise ValueError(f"timeout={self.timeout}: the sandbox lifetime must be >= 1 s")
        if self.cpu is not None and not 0 < self.cpu <= 64:
            raise ValueError(f"cpu={self.cpu}: physical cores, expected > 0 and <= 64")
        if self.memory is not None and not 0 < self.memory <= 1 << 20:
            raise ValueError(f"memory={self.memory}: MiB, expected > 0 and <= 1048576")
        if self.max_creates_per_s is not None and not 0 <= self.max_creates_per_s <= 10_000:
            raise ValueError(
                f"max_creates_per_s={self.max_creates_per_s}: expected 0 to 10,000 "
                "(0 or none: unpaced)"
            )
        reserved = sorted(key for key in self.tags if key.startswith(LABEL_PREFIX))
        if reserved:
            raise ValueError(f"tags: {', '.join(reserved)}: {LABEL_PREFIX}* is reserved")
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")


@dataclass
class ModalHandle(Handle):
    """One Modal sandbox: ``sdk`` is the SDK's ``Sandbox``; ``client`` its own connection
    (None: the substrate's shared one)."""

    sdk: Any
    client: Any = None


#: File steps run here, so one past its timeout can be abandoned (Modal's file calls take none).
_FILE_STEPS = ThreadPoolExecutor(8, thread_name_prefix="modal-files")


class ModalExec(Transport):
    """The SDK's own data plane: ``sb.exec`` per step (gRPC to the sandbox's command router),
    files through ``sb.filesystem``. Modal offers no held shell to run steps in."""

    name = "exec"

    def __init__(self, handle: ModalHandle, substrate: ModalSubstrate) -> None:
        self.sdk = handle.sdk
        self.sandbox_id = handle.id
        self._substrate = substrate

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        command = timeout_wrapped(["sh", "-c", shell_line(argv, env=env, cwd=cwd)], timeout)
        started = time.perf_counter()
        try:
            process = self.sdk.exec(*command, text=False)
            stdout, stderr = process.stdout.read(), process.stderr.read()
            code = process.wait()
        except Exception as exc:
            raise self._substrate.error(exc, "running a command", self.sandbox_id) from None
        if was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        return RawResult.capped(code, bytes(stdout), bytes(stderr), self.output_cap)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        self._file(lambda: self.sdk.filesystem.write_bytes(data, path), path, timeout, "writing")

    def read(self, path: str, *, timeout: float | None) -> bytes:
        return bytes(
            self._file(lambda: self.sdk.filesystem.read_bytes(path), path, timeout, "reading")
        )

    def _file(self, call: Any, path: str, timeout: float | None, verb: str) -> Any:
        future = _FILE_STEPS.submit(call)
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise step_timeout(
                self._substrate.name, timeout or 0, "it may still be running"
            ) from None
        except mx.SandboxFilesystemError as exc:
            # the sandbox answered about the path: the contract's type is asked of the sandbox
            message = " ".join(self._substrate.redact(exc).split())
            raise OSError(errno.EIO, message, path) from None
        except Exception as exc:
            raise self._substrate.error(exc, f"{verb} a file", self.sandbox_id) from None


class ModalSubstrate(Substrate):
    kind = "modal"
    Options = ModalOptions
    hosted = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        values = {v: os.environ.get(v, "").strip() for v in TOKEN_VARIABLES}
        missing = [v for v, value in values.items() if not value]
        if missing:
            raise CredentialsMissing(
                f"{self.name}: {' and '.join(missing)} not set; export a Modal token "
                "(modal.com/settings/tokens) as MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
            )
        self._token = (values["MODAL_TOKEN_ID"], values["MODAL_TOKEN_SECRET"])
        _quiet_header_loggers()
        #: Where the control plane is reached, for messages (never with the token).
        self.server_url = os.environ.get("MODAL_SERVER_URL") or DEFAULT_SERVER_URL
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        self._lock = threading.Lock()
        self._client: Any = None
        self._app: Any = None

    def __repr__(self) -> str:
        return f"<ModalSubstrate {self.name!r} image={self.options.image!r}>"

    # -- clients -------------------------------------------------------------------------------

    def _new_client(self) -> Any:
        return modal.Client.from_credentials(*self._token)

    @property
    def client(self) -> Any:
        """The substrate's own connection: for the app, listing, reaping, shared rollouts."""
        with self._lock:
            if self._client is None:
                try:
                    self._client = self._new_client()
                except Exception as exc:
                    raise self.error(exc, "connecting") from None
            return self._client

    def _prepare(self) -> None:
        """Look the app up once (created if missing): every sandbox belongs to it."""
        self._app = self._lookup_app()

    def _lookup_app(self) -> Any:
        try:
            return modal.App.lookup(self.options.app, create_if_missing=True, client=self.client)
        except Exception as exc:
            raise self.error(exc, "looking up the app") from None

    # -- the backend interface ----------------------------------------------------------------

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> ModalHandle:
        before = time.perf_counter()
        self.pacer.wait()
        if time.perf_counter() - before > PACE_NOTED_S:  # the limiter's wait, not the service's
            clock.mark("pace", cold_start=False)
        own = None if self.options.reuse_connection else self._new_client_for_rollout()
        try:
            sdk = modal.Sandbox.create(
                image=modal.Image.from_registry(self.options.image),
                app=self._app,
                tags={**self.options.tags, **labels},
                env=dict(self.options.env) or None,
                timeout=self.options.timeout,
                cpu=self.options.cpu,
                memory=self.options.memory,
                region=self.options.region,
                client=own or self.client,
            )
        except BaseException as exc:
            _close(own)
            if isinstance(exc, Exception):
                raise self.error(exc, "creating a sandbox") from None
            raise
        clock.mark("create")
        handle = ModalHandle(id=sdk.object_id, workdir=self.options.workdir, sdk=sdk, client=own)
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

    def _new_client_for_rollout(self) -> Any:
        try:
            return self._new_client()
        except Exception as exc:
            raise self.error(exc, "connecting") from None

    def _transport(self, handle: ModalHandle) -> Transport:
        return ModalExec(handle, self)

    def destroy(self, handle: ModalHandle) -> None:
        try:
            handle.sdk.terminate(wait=True)  # returns once Modal reports it ended
        except mx.NotFoundError:
            pass  # already gone (its lifetime ran out): nothing to terminate
        except Exception as exc:
            raise self.error(exc, "terminating the sandbox", handle.id) from None
        finally:
            with contextlib.suppress(Exception):
                handle.sdk.detach()
            _close(handle.client)

    def list_sandboxes(self, session_id: str | None = None) -> list[Any]:
        """Running sandboxes of the app tagged by ``session_id`` (by any session if None)."""
        app = self._app or self._lookup_app()
        tags = {SESSION_LABEL: session_id} if session_id else None
        try:
            found = list(modal.Sandbox.list(app_id=app.app_id, tags=tags, client=self.client))
            if session_id is None:
                found = [sb for sb in found if SESSION_LABEL in sb.get_tags()]
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None
        return found

    @property
    def connection(self) -> str:
        """``per-rollout`` (each rollout's client connects, paid in its cold start) or
        ``reused`` (the substrate's one client)."""
        return "reused" if self.options.reuse_connection else "per-rollout"

    @property
    def resources(self) -> Resources:
        """The request Modal bills at least (it bills ``max(request, use)``): ``cpu`` physical
        cores, 2 vCPU each, and ``memory`` MiB; unset, Modal's default request."""
        cores = self.options.cpu or DEFAULT_CORES
        return Resources(vcpus=2 * cores, gib=(self.options.memory or DEFAULT_MIB) / 1024)

    @property
    def endpoint(self) -> str:
        return self.server_url

    def ping(self) -> None:
        """List this session's sandboxes: a cheap authenticated call."""
        self.list_sandboxes(self.session_id)

    def reap(self, session_id: str | None = None) -> int:
        """Terminate the sandboxes tagged by ``session_id`` (any session if None); how many."""
        removed = 0
        for sb in self.list_sandboxes(session_id):
            try:
                sb.terminate()
            except Exception as exc:
                raise self.error(exc, "terminating a leftover sandbox", sb.object_id) from None
            removed += 1
        return removed

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        _close(client)

    # -- errors --------------------------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return list(self._token)

    def redact(self, value: object) -> str:
        """``str(value)`` without the token in it."""
        return redact(str(value), self._token)

    def error(
        self, exc: BaseException, action: str, sandbox_id: str | None = None
    ) -> RolloutTaxError:
        """The error for an SDK exception: one countable line naming the cause, no token;
        the service's message follows on a second line."""
        if isinstance(exc, RolloutTaxError):
            return exc
        creating = action == "creating a sandbox"
        kind = SandboxStartError if creating else SandboxError
        where = f"Modal at {self.server_url}"
        said = " ".join(self.redact(exc).split())
        details = f"sandbox {sandbox_id}: {said}" if sandbox_id else said
        if isinstance(exc, mx.AuthError | mx.PermissionDeniedError):
            return SubstrateUnavailable(
                f"{self.name}: {where} rejected the token from MODAL_TOKEN_ID/MODAL_TOKEN_SECRET "
                f"while {action}; check the token and its workspace\n{details}"
            )
        if isinstance(exc, mx.ResourceExhaustedError) and creating:
            return RateLimited(
                f"{self.name}: rate limit or quota exceeded (RESOURCE_EXHAUSTED) while {action}; "
                f"lower {self.name}.max_creates_per_s or raise the workspace's limit\n{details}",
                provider_message=said,
            )
        if (
            isinstance(exc, mx.ImageBuildError | mx.NotFoundError)
            and action == "creating a sandbox"
        ):
            return ConfigError(
                f"{self.name}.image={self.options.image!r}: the image cannot be used "
                f"({type(exc).__name__}) at {where}\n{details}"
            )
        if isinstance(exc, mx.ConnectionError | OSError):
            return SubstrateUnavailable(
                f"{self.name}: cannot reach {where} while {action} ({type(exc).__name__})\n"
                f"{details}"
            )
        if isinstance(exc, mx.NotFoundError | mx.SandboxTerminatedError):
            return SandboxError(
                f"{self.name}: the sandbox is no longer running while {action} (terminated, or "
                f"its lifetime {self.name}.timeout={self.options.timeout} s ran out)\n{details}"
            )
        return kind(f"{self.name}: {action} failed ({type(exc).__name__})\n{details}")


def _quiet_header_loggers() -> None:
    """Keep the token out of any log (``--log-level=DEBUG`` included): the HTTP/2 header
    loggers write at INFO at least."""
    for name in HEADER_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


def _close(client: Any) -> None:
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
