"""``daytona``: hosted sandboxes on Daytona (https://daytona.io), through the official SDK.

Cold start is making the SDK's client (phase ``client``; one per rollout unless
``reuse_connection``), then ``Daytona.create`` up to the service accepting the sandbox (phase
``create``: ``POST /sandbox`` answered), then until the SDK sees it ``started`` (phase
``started``: the SDK polls its state every 0.1 s, so this phase is quantised to 100 ms; from
an ``image`` it includes the service building a snapshot of it), then the first no-op command
(phase ``first_exec``); making the empty workdir in between is phase ``workdir``, not counted.
On ``transport=session`` the session is opened before the first no-op (phase ``session``). A
create held back by pacing (``max_creates_per_s``) records phase ``paced``, not counted.

Commands run through ``process.exec`` (``exec``) or a Daytona session, a shell the service
holds, through ``process.execute_session_command`` (``session``); files go through
``fs.upload_file`` and ``fs.download_file``; teardown is ``delete`` until the sandbox is
destroyed. The key comes from ``DAYTONA_API_KEY`` only; ``DAYTONA_API_URL`` and
``DAYTONA_TARGET`` apply as in the SDK. Every sandbox carries the ownership labels.

Install with ``pip install 'pytest-rollout-tax[daytona]'``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import shlex
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.shell import RELAY
from ..core.substrate import SESSION_LABEL, Substrate, SubstrateOptions
from ..core.transport import (
    NOOP,
    RawResult,
    Transport,
    one_line,
    step_timeout,
    timeout_wrapped,
    was_timed_out,
    with_env,
)
from ..errors import (
    ConfigError,
    CredentialsMissing,
    RateLimited,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    SubstrateUnavailable,
    redact,
)
from .pacing import CreatePacer

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
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the SDK
    raise SubstrateUnavailable(
        f"daytona: the Daytona SDK is not installed ({exc}); "
        "pip install 'pytest-rollout-tax[daytona]'"
    ) from None

API_KEY_VARIABLE = "DAYTONA_API_KEY"
API_URL_VARIABLE = "DAYTONA_API_URL"
DEFAULT_API_URL = "https://app.daytona.io/api"
LABEL_PREFIX = "rollout-tax.io/"
#: Daytona's published limit on sandbox creations: 600 a minute.
PUBLISHED_CREATES_PER_S = 10.0
#: Separates a step's stdout from its stderr in ``process.exec``'s merged ``result``.
_SPLIT = "rollout-tax-stderr-"


@dataclass
class DaytonaOptions(SubstrateOptions):
    #: The snapshot every sandbox starts from (None: the organisation's default snapshot).
    snapshot: str | None = None
    #: Or an image (``debian:12``): the service builds a snapshot of it on first use.
    image: str | None = None
    #: Resources of a sandbox made from ``image`` (vCPUs, GiB of memory and of disk).
    cpu: int | None = None
    memory: int | None = None
    disk: int | None = None
    #: The region (default: ``DAYTONA_TARGET``, else the organisation's default).
    target: str | None = None
    #: Extra labels on every sandbox (the rollout-tax.io/ ownership labels are added).
    labels: dict[str, str] = field(default_factory=dict)
    #: Environment variables of every sandbox.
    env_vars: dict[str, str] = field(default_factory=dict)
    #: Seconds a create may take until the sandbox has started.
    create_timeout: float = 60.0
    #: Minutes without activity after which the service stops a forgotten sandbox (0: never).
    auto_stop_interval: int = 15
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/home/daytona/workspace"
    #: Creates started per second at most (0: no pacing); the default is Daytona's published
    #: limit, 600 a minute.
    max_creates_per_s: float = PUBLISHED_CREATES_PER_S
    #: One client for every rollout (its connection warm), instead of a client, and so a
    #: connection set up, per rollout.
    reuse_connection: bool = False

    def check(self) -> None:
        if self.snapshot is not None and self.image is not None:
            raise ValueError("snapshot and image: give one, not both")
        if self.image is None and any(v is not None for v in (self.cpu, self.memory, self.disk)):
            raise ValueError("cpu, memory, disk: apply to a sandbox made from an image only")
        if self.create_timeout <= 0:
            raise ValueError(f"create_timeout={self.create_timeout}: must be > 0 s")
        if self.auto_stop_interval < 0:
            raise ValueError(f"auto_stop_interval={self.auto_stop_interval}: must be >= 0")
        if self.max_creates_per_s < 0:
            raise ValueError(f"max_creates_per_s={self.max_creates_per_s}: must be >= 0")
        reserved = sorted(key for key in self.labels if key.startswith(LABEL_PREFIX))
        if reserved:
            raise ValueError(f"labels: {', '.join(reserved)}: {LABEL_PREFIX}* is reserved")
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")


@dataclass
class DaytonaHandle(Handle):
    """One Daytona sandbox: ``sdk`` is the SDK's ``Sandbox``; ``client`` made it."""

    sdk: SDKSandbox
    client: Daytona


def _wrapped(argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None) -> str:
    """The shell words of one step: under ``timeout -s KILL`` (``0``: no limit) and the relay
    that ends it once every holder of its output closed it (:data:`..core.shell.RELAY`)."""
    unlimited = timeout is None or tuple(argv) == NOOP  # the no-op is never wrapped
    limit = "0" if unlimited else timeout_wrapped(argv, timeout)[3]
    words = ["timeout", "-s", "KILL", limit, "sh", "-c", RELAY, "sh", *with_env(argv, env)]
    return shlex.join(words)


class _Steps(Transport):
    """What both Daytona transports share: files through the SDK's ``fs``, errors."""

    def __init__(self, handle: DaytonaHandle, substrate: DaytonaSubstrate) -> None:
        self.sdk = handle.sdk
        self.sandbox_id = handle.id
        self._substrate = substrate

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        try:
            self.sdk.fs.upload_file(data, path, timeout=_seconds(timeout))
        except Exception as exc:
            raise self._file_failure(exc, path, "writing a file", timeout) from None

    def read(self, path: str, *, timeout: float | None) -> bytes:
        try:
            return bytes(self.sdk.fs.download_file(path, _seconds(timeout)))
        except Exception as exc:
            raise self._file_failure(exc, path, "reading a file", timeout) from None

    def _file_failure(
        self, exc: Exception, path: str, action: str, timeout: float | None
    ) -> Exception:
        """The toolbox's answer about ``path`` as an OSError (the Sandbox asks why); a request
        past the step's timeout as StepTimeout; the sandbox's own failure as SandboxError."""
        if timeout and isinstance(exc, DaytonaTimeoutError):
            return step_timeout(self._substrate.name, timeout, "it may still be running")
        status = getattr(exc, "status_code", None)
        if isinstance(exc, DaytonaNotFoundError) or (
            isinstance(exc, DaytonaError) and status is not None and 400 <= status < 500
        ):  # the Sandbox asks the sandbox why (missing, not a directory, ...)
            return OSError(errno.EIO, one_line(self._substrate.redact(exc)), path)
        return self._fail(exc, action)

    def _fail(self, exc: BaseException, action: str) -> RolloutTaxError:
        return self._substrate.error(exc, action, sandbox_id=self.sandbox_id)

    def _result(
        self,
        argv: list[str],
        timeout: float | None,
        started: float,
        code: int,
        out: bytes,
        err: bytes,
    ) -> RawResult:
        if was_timed_out(argv, timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout)
        return RawResult.capped(code, out, err, self.output_cap)


class DaytonaExec(_Steps):
    """One ``process.exec`` (``POST /process/execute``) per step. The service merges stdout
    and stderr into one ``result``: the step's stderr goes to a file in the sandbox and follows
    its stdout after a random separator, in the same call."""

    name = "exec"

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        if tuple(argv) == NOOP and not env:  # the tax is measured bare
            started = time.perf_counter()
            bare = self._exec(f"cd -- {shlex.quote(cwd)} && true")
            if bare.exit_code == 0:
                return self._result(argv, timeout, started, 0, b"", b"")
        # The service merges the streams: stderr goes to a file, printed after a separator.
        separator = f"{_SPLIT}{uuid.uuid4().hex}"
        step, quoted = _wrapped(argv, timeout=timeout, env=env), shlex.quote(cwd)
        command = (
            f'f=$(mktemp) || exit 125; (cd -- {quoted} || exit 127; exec {step}) 2>"$f"; '
            f'c=$?; printf \'\\n%s\\n\' {separator}; cat "$f"; rm -f "$f"; exit $c'
        )
        started = time.perf_counter()
        response = self._exec(shlex.join(["sh", "-c", command]))
        out, found, err = (response.result or "").rpartition(f"\n{separator}\n")
        if not found:
            lost = one_line(response.result or "no output", 120)
            raise self._fail(
                SandboxError(f"the step's output has no separator: {lost}"), "running a command"
            )
        return self._result(
            argv, timeout, started, int(response.exit_code or 0), out.encode(), err.encode()
        )

    def _exec(self, command: str) -> Any:
        try:
            return self.sdk.process.exec(command, cwd="/")
        except Exception as exc:
            raise self._fail(exc, "running a command") from None


class DaytonaSession(_Steps):
    """Every step is one command in a Daytona session (``process.create_session``), a shell the
    service holds; each runs in a subshell so nothing leaks into the next, with stdout and
    stderr apart (``execute_session_command``)."""

    name = "session"

    def __init__(self, handle: DaytonaHandle, substrate: DaytonaSubstrate) -> None:
        super().__init__(handle, substrate)
        self.session_id: str | None = None

    def open(self, clock: PhaseClock) -> None:
        session_id = f"rollout-tax-{uuid.uuid4().hex[:12]}"
        try:
            self.sdk.process.create_session(session_id)
        except Exception as exc:
            raise self._substrate.error(exc, "creating a session", self.sandbox_id) from None
        self.session_id = session_id
        clock.mark("session")

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        if self.session_id is None:
            raise SandboxError(f"{self._substrate.name}: the session is closed")
        if tuple(argv) == NOOP and not env:  # the tax is measured bare
            started = time.perf_counter()
            bare = self._command(f"cd -- {shlex.quote(cwd)} && true")
            if bare.exit_code == 0:
                return self._result(argv, timeout, started, 0, b"", b"")
        step = _wrapped(argv, timeout=timeout, env=env)
        started = time.perf_counter()
        response = self._command(
            f"(exec </dev/null; cd -- {shlex.quote(cwd)} || exit 127; exec {step})"
        )
        out, err = (response.stdout or "").encode(), (response.stderr or "").encode()
        return self._result(argv, timeout, started, int(response.exit_code or 0), out, err)

    def _command(self, line: str) -> Any:
        """One command in the session; its exit code, stdout and stderr."""
        if self.session_id is None:
            raise SandboxError(f"{self._substrate.name}: the session is closed")
        try:
            return self.sdk.process.execute_session_command(
                self.session_id, SessionExecuteRequest(command=line, run_async=False)
            )
        except Exception as exc:
            raise self._fail(exc, "running a command") from None

    def close(self) -> None:
        session_id, self.session_id = self.session_id, None
        if session_id is not None:
            with contextlib.suppress(Exception):  # the sandbox is deleted right after
                self.sdk.process.delete_session(session_id)


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


def _seconds(timeout: float | None) -> int:
    """A file step's timeout as the SDK takes it: whole seconds, 30 minutes without one."""
    return 30 * 60 if timeout is None else max(1, int(timeout + 0.999))
