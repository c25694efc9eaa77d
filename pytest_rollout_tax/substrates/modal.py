"""``modal``: hosted sandboxes on Modal (https://modal.com), through the official ``modal`` SDK.

Cold start is ``Sandbox.create`` (phase ``create``: the image resolved, the sandbox created and
scheduled onto a worker) through the first no-op command (phase ``first_exec``: it opens the
connection to the sandbox's command router too); making the empty workdir in between is phase
``workdir``, not counted. Commands run through ``sb.exec``, files through
``sb.filesystem.write_bytes`` and ``read_bytes``, teardown is ``sb.terminate``. The token comes
from ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` only; ``MODAL_SERVER_URL`` points the SDK at
another control plane. Every sandbox carries the ownership labels as tags, so leftovers can be
listed and terminated. Creates are paced to ``max_creates_per_s`` (Modal's published default,
5/s per workspace), the wait phase ``paced``; a create the limiter refuses is
:class:`~..errors.RateLimited`.

Install with ``pip install 'pytest-rollout-tax[modal]'``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.transport import (
    RawResult,
    Transport,
    shell_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
)
from ..errors import ExtraMissing
from .hosted import HostedHandle, HostedOptions, HostedSubstrate, HostedTransport, Listed
from .hosted.credentials import Credentials
from .hosted.errors import ErrorTable, Kind, Row, rate_limited, rejected, unreachable

try:
    import modal
    import modal.exception as mx
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("modal", "modal") from None

TOKEN_VARIABLES = ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")
#: Modal's published default limit on sandbox creations per workspace.
PUBLISHED_CREATES_PER_S = 5.0
DEFAULT_SERVER_URL = "https://api.modal.com"
#: Modal's default request: 0.125 physical cores, 128 MiB (modal.com/docs/guide/resources).
DEFAULT_CORES = 0.125
DEFAULT_MIB = 128
#: Libraries under the SDK's gRPC that log every HTTP/2 header, the token's, at DEBUG.
HEADER_LOGGERS = ("hpack", "h2")


@dataclass
class ModalOptions(HostedOptions):
    labels_option: ClassVar[str] = "tags"

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
        super().check()
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


#: File steps run here, so one past its timeout can be abandoned (Modal's file calls take none).
_FILE_STEPS = ThreadPoolExecutor(8, thread_name_prefix="modal-files")


class ModalExec(HostedTransport):
    """The SDK's own data plane: ``sb.exec`` per step (gRPC to the sandbox's command router),
    files through ``sb.filesystem``. Modal offers no held shell to run steps in."""

    name = "exec"

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
            raise self._fail(exc, "running a command") from None
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
            raise self._file_timeout(timeout) from None
        except mx.SandboxFilesystemError as exc:  # the contract's type is asked of the sandbox
            raise self._answered(exc, path) from None
        except Exception as exc:
            raise self._fail(exc, f"{verb} a file") from None


#: Modal's errors as ours: the first row that covers an exception wins.
ERRORS = ErrorTable(
    rejected(
        (mx.AuthError, mx.PermissionDeniedError),
        "check the token and its workspace",
        credential="token",
        statuses=(),
    ),
    rate_limited(
        (mx.ResourceExhaustedError,),
        "rate limit or quota exceeded (RESOURCE_EXHAUSTED) while {action}; lower "
        "{name}.max_creates_per_s or raise the workspace's limit",
        statuses=(),
    ),
    Row(
        Kind.CONFIG,
        "{name}.image={o.image!r}: the image cannot be used ({type}) at {where}",
        types=(mx.ImageBuildError, mx.NotFoundError),
        creating=True,
        refused=True,
    ),
    unreachable((mx.ConnectionError, OSError)),
    Row(
        Kind.SANDBOX,
        "{name}: the sandbox is no longer running while {action} (terminated, or its lifetime "
        "{name}.timeout={o.timeout} s ran out)",
        types=(mx.NotFoundError, mx.SandboxTerminatedError),
    ),
)


class ModalSubstrate(HostedSubstrate):
    kind = "modal"
    Options = ModalOptions
    credentials = Credentials(
        TOKEN_VARIABLES,
        "export a Modal token (modal.com/settings/tokens) as MODAL_TOKEN_ID and MODAL_TOKEN_SECRET",
    )
    errors = ERRORS
    delete_verb = "terminating"

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        _quiet_header_loggers()
        #: Where the control plane is reached, for messages (never with the token).
        self.server_url = os.environ.get("MODAL_SERVER_URL") or DEFAULT_SERVER_URL
        self._app: Any = None

    def __repr__(self) -> str:
        return f"<ModalSubstrate {self.name!r} image={self.options.image!r}>"

    def _connect(self) -> Any:
        return modal.Client.from_credentials(*(self.credential[v] for v in TOKEN_VARIABLES))

    def _disconnect(self, client: Any) -> None:
        client.close()

    @property
    def client(self) -> Any:
        """The substrate's own connection: for the app, listing, reaping, shared rollouts."""
        return self.clients.shared

    def _prepare(self) -> None:
        """Look the app up once (created if missing): every sandbox belongs to it."""
        self._app = self._lookup_app()

    def _lookup_app(self) -> Any:
        try:
            return modal.App.lookup(self.options.app, create_if_missing=True, client=self.client)
        except Exception as exc:
            raise self.error(exc, "looking up the app") from None

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        sdk = modal.Sandbox.create(
            image=modal.Image.from_registry(self.options.image),
            app=self._app,
            tags=labels,
            env=dict(self.options.env) or None,
            timeout=self.options.timeout,
            cpu=self.options.cpu,
            memory=self.options.memory,
            region=self.options.region,
            client=client,
        )
        return HostedHandle(id=sdk.object_id, workdir=self.options.workdir, sdk=sdk)

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, HostedHandle)
        return ModalExec(handle, self)

    def _delete(self, handle: HostedHandle) -> None:
        try:
            handle.sdk.terminate(wait=True)  # returns once Modal reports it ended
        except mx.NotFoundError:
            pass  # already gone (its lifetime ran out): nothing to terminate
        finally:
            with contextlib.suppress(Exception):
                handle.sdk.detach()

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterator[Listed]:
        """Running sandboxes of the app; Modal filters by tags itself, so only an unfiltered
        list asks each sandbox its tags."""
        app = self._app or self._lookup_app()
        tags = dict(labels) if labels else None
        for sb in modal.Sandbox.list(app_id=app.app_id, tags=tags, client=client):
            yield Listed(sb.object_id, tags or sb.get_tags(), sb)

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        listed.sdk.terminate()
        return True

    def list_sandboxes(self, session_id: str | None = None) -> list[Any]:
        """Running sandboxes of the app tagged by ``session_id`` (by any session if None)."""
        return [one.sdk for one in self.listed(session_id)]

    @property
    def resources(self) -> Resources:
        """The request Modal bills at least (it bills ``max(request, use)``): ``cpu`` physical
        cores, 2 vCPU each, and ``memory`` MiB; unset, Modal's default request."""
        cores = self.options.cpu or DEFAULT_CORES
        return Resources(vcpus=2 * cores, gib=(self.options.memory or DEFAULT_MIB) / 1024)

    @property
    def endpoint(self) -> str:
        return self.server_url

    @property
    def where(self) -> str:
        return f"Modal at {self.server_url}"


def _quiet_header_loggers() -> None:
    """Keep the token out of any log (``--log-level=DEBUG`` included): the HTTP/2 header
    loggers write at INFO at least."""
    for name in HEADER_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)
