"""``prime``: hosted sandboxes on Prime Intellect, through the official ``prime-sandboxes`` SDK.

Cold start: the rollout's SDK client (phase ``client``), ``SandboxClient.create`` answered
(``create``, the sandbox ``PENDING``), then the time the sandbox spent in each status Prime
reports on its way to ``RUNNING``, polled every ``poll_interval`` s (``pending``,
``provisioning``: a status no poll saw has no phase), then the gateway answering a first
command (``reachable``, as the SDK's own ``wait_for_creation`` checks), then the first no-op.
Steps are ``execute_command`` (one Connect stream through the sandbox's gateway), files
``upload_bytes`` and ``download_file``, teardown ``delete``. The key comes from
``PRIME_API_KEY``; the SDK's own ``PRIME_API_BASE_URL`` and ``PRIME_TEAM_ID`` apply as usual.

Prime's labels are strings: the ownership labels are written as ``key=value`` at the create
request. A delete that lands while a sandbox is still ``PENDING`` or ``PROVISIONING`` can be
answered while the provisioning goes on to ``RUNNING`` (the race behind Prime's orphans), so a
leftover still being made is deleted once it leaves those states, and checked gone after.

Install with ``pip install 'pytest-rollout-tax[prime]'``.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import re
import shlex
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.shell import GRACE_S
from ..core.substrate import ROLLOUT_LABEL
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
from .hosted.errors import ErrorTable, Kind, Row, rejected, unreachable

try:
    import httpx
    from prime_sandboxes import (
        APIClient,
        APIError,
        APITimeoutError,
        CommandTimeoutError,
        CreateSandboxRequest,
        DownloadTimeoutError,
        PaymentRequiredError,
        SandboxClient,
        SandboxImagePullError,
        SandboxNotRunningError,
        UnauthorizedError,
        UploadTimeoutError,
    )
    from prime_sandboxes import Sandbox as SDKSandbox
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("prime", "prime") from None

API_KEY_VARIABLE = "PRIME_API_KEY"
#: Prime's published limit on the create endpoint: 500 requests per 60 s per IP and token
#: (https://docs.primeintellect.ai/api-reference/sandbox/create-sandbox-endpoint, 2026-12-06).
PUBLISHED_CREATES_PER_S = 500 / 60
#: The statuses of a sandbox still being made: a delete then may not stop it.
MAKING = ("PENDING", "PROVISIONING")
#: The longest a command may run (Prime's longest sandbox lifetime, 1,440 minutes).
NO_LIMIT_S = 24 * 3600
#: How long the gateway may take to answer a first command once the sandbox is RUNNING.
REACHABLE_S = 60.0
_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


@dataclass
class PrimeOptions(HostedOptions):
    labels_option: ClassVar[str] = "labels"
    #: The docker image every sandbox runs.
    image: str = "python:3.11-slim"
    cpu_cores: float = 1.0
    memory_gb: float = 1.0
    disk_size_gb: float = 5.0
    #: Sandbox lifetime in minutes (Prime: 1 to 1,440).
    timeout_minutes: int = 60
    #: Extra labels on every sandbox, as ``key=value`` (the rollout-tax.io/ ones are added).
    labels: dict[str, str] = field(default_factory=dict)
    #: Environment variables of every sandbox.
    envs: dict[str, str] = field(default_factory=dict)
    #: The team the sandboxes belong to (default: ``PRIME_TEAM_ID``, else the key's user).
    team_id: str | None = None
    #: Seconds between two status polls while a sandbox is being made.
    poll_interval: float = 0.5
    #: Seconds a sandbox may take to be RUNNING (or a leftover to leave PENDING/PROVISIONING).
    start_timeout: float = 600.0
    #: Seconds an API request may take (the SDK's default: 30).
    request_timeout: float = 30.0
    workdir: str = "/workspace"
    max_creates_per_s: float | None = PUBLISHED_CREATES_PER_S
    reuse_connection: bool = False

    def check(self) -> None:
        super().check()
        if not self.image.strip():
            raise ValueError("image: must not be empty")
        if not 1 <= self.timeout_minutes <= 1440:
            raise ValueError(f"timeout_minutes={self.timeout_minutes}: expected 1 to 1440")
        for name in ("cpu_cores", "memory_gb", "disk_size_gb", "poll_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be > 0")
        for name in ("start_timeout", "request_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)}: must be > 0 s")


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status the SDK's APIError names in its message (``HTTP 429: ...``,
    ``Download failed: HTTP 404 GET ...``)."""
    found = _HTTP_STATUS.search(str(exc))
    return int(found[1]) if found else None


ERRORS = ErrorTable(
    rejected((UnauthorizedError,), "check the key and its sandbox scope", statuses=(401,)),
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} asks for payment (HTTP 402) while {action}; check the team's billing",
        types=(PaymentRequiredError,),
        refused=True,
    ),
    Row(
        Kind.RATE_LIMITED,
        "{name}: rate limited (HTTP 429) while {action}; creates were {paced} "
        "({name}.max_creates_per_s)",
        types=(APIError,),
        when=lambda exc: _http_status(exc) == 429,
        refused=True,
    ),
    Row(
        Kind.CONFIG,
        "{name}.image={o.image!r}: Prime cannot pull the image (IMAGE_PULL_FAILED)",
        types=(SandboxImagePullError,),
        creating=True,
    ),
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} did not answer in time while {action}; raise "
        "{name}.request_timeout (now {o.request_timeout:g} s)",
        types=(APITimeoutError,),
    ),
    unreachable((APIError,), when=lambda exc: "Request failed: Connect" in str(exc)),
    Row(
        Kind.FAILED,
        "{name}: the sandbox did not start ({type})",
        types=(SandboxNotRunningError,),
        creating=True,
    ),
    Row(
        Kind.SANDBOX,
        "{name}: the sandbox is no longer running while {action} (deleted, or its lifetime "
        "{name}.timeout_minutes={o.timeout_minutes} ran out)",
        types=(SandboxNotRunningError,),
    ),
)


def encode(labels: Mapping[str, str]) -> list[str]:
    """Labels as Prime keeps them: ``key=value`` strings."""
    return [f"{key}={value}" for key, value in labels.items()]


def decode(labels: list[str]) -> dict[str, str]:
    return dict(label.partition("=")[::2] for label in labels)


class PrimeSubstrate(HostedSubstrate):
    kind = "prime"
    Options = PrimeOptions
    credentials = Credentials(
        (API_KEY_VARIABLE,),
        "export a Prime Intellect API key with the sandbox scope "
        "(https://app.primeintellect.ai/dashboard/tokens) to run the prime rollouts",
    )
    errors = ERRORS
    client_phase = True
    #: Sandboxes per page when listing (reap).
    list_page_size = 100

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        #: Where the control plane is reached (the SDK's own setting), never with the key.
        self.api_url = APIClient(api_key="-").base_url

    def _connect(self) -> SandboxClient:
        api = APIClient(api_key=self.credential[API_KEY_VARIABLE])
        bound = httpx.Timeout(self.options.request_timeout, connect=10.0).as_dict()

        def bounded(request: httpx.Request) -> None:
            # the SDK sends its API calls with timeout=None, which lifts its client's 30 s:
            # a create the service never answered would hold the rollout for ever
            if not any(request.extensions.get("timeout", {}).values()):
                request.extensions["timeout"] = bound

        api.client.event_hooks["request"] = [bounded]
        return SandboxClient(api)

    def _disconnect(self, client: Any) -> None:
        client.client.client.close()

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        o = self.options
        request = CreateSandboxRequest(
            name=f"rollout-tax-{labels.get(ROLLOUT_LABEL, 'sandbox')}",
            docker_image=o.image,
            checkpoint_id=None,
            cpu_cores=o.cpu_cores,
            memory_gb=o.memory_gb,
            disk_size_gb=o.disk_size_gb,
            timeout_minutes=o.timeout_minutes,
            environment_vars=dict(o.envs) or None,
            labels=encode(labels),
            team_id=o.team_id,
        )
        sandbox = client.create(request)
        clock.mark("create")
        try:
            self._await_running(client, sandbox, clock)
            self._await_gateway(client, sandbox.id)
        except BaseException:  # it failed to start, or Ctrl-C: it must not outlive the create
            with contextlib.suppress(Exception):  # the start's error is the one to report
                self._settled_delete(client, sandbox.id)
            raise
        clock.mark("reachable")
        return HostedHandle(id=sandbox.id, workdir=o.workdir, sdk=sandbox)

    def _await_running(self, client: Any, sandbox: SDKSandbox, clock: PhaseClock) -> None:
        """Poll the sandbox until RUNNING, marking the time spent in each status seen."""
        status, give_up = sandbox.status, time.monotonic() + self.options.start_timeout
        while status != "RUNNING":
            if status in ("ERROR", "TERMINATED", "TIMEOUT"):
                raise _not_running(sandbox)
            if time.monotonic() > give_up:
                raise SandboxNotRunningError(
                    sandbox.id,
                    status,
                    message=f"not RUNNING after {self.options.start_timeout:g} s "
                    f"({self.name}.start_timeout)",
                )
            time.sleep(self.options.poll_interval)
            sandbox = client.get(sandbox.id)
            if sandbox.status != status:
                clock.mark(status.lower())
                status = sandbox.status

    def _await_gateway(self, client: Any, sandbox_id: str) -> None:
        """A RUNNING sandbox's gateway may lag its status: retry a first command a while."""
        give_up = time.monotonic() + REACHABLE_S
        while True:
            try:
                client.execute_command(sandbox_id, "true", timeout=10)
                return
            except (SandboxNotRunningError, CommandTimeoutError, APIError) as exc:
                if isinstance(exc, APIError) and _http_status(exc) not in (None, 409, 502, 503):
                    raise
                if time.monotonic() > give_up:
                    raise
                time.sleep(self.options.poll_interval)

    def _delete(self, handle: HostedHandle) -> None:
        self._settled_delete(handle.client, handle.id)

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterator[Listed]:
        page = 1
        while True:
            found = client.list(
                team_id=self.options.team_id,
                labels=encode(labels or {}) or None,
                page=page,
                per_page=self.list_page_size,
                exclude_terminated=True,
            )
            for sandbox in found.sandboxes:
                yield Listed(sandbox.id, decode(sandbox.labels), sandbox)
            if not found.has_next:
                return
            page += 1

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        return self._settled_delete(client, listed.id)

    def _settled_delete(self, client: Any, sandbox_id: str) -> bool:
        """Delete a sandbox once it is no longer being made, then again while it still shows
        up alive (a delete that raced its provisioning); False if it was already gone."""
        give_up = time.monotonic() + self.options.start_timeout
        deleted = False
        for _ in range(3):
            status = self._status(client, sandbox_id)
            while status in MAKING and time.monotonic() < give_up:
                time.sleep(self.options.poll_interval)
                status = self._status(client, sandbox_id)
            if status in (None, "TERMINATED"):
                return deleted
            try:
                client.delete(sandbox_id)
            except APIError as exc:
                if _http_status(exc) != 404:
                    raise
                return deleted
            deleted = True
        return deleted

    @staticmethod
    def _status(client: Any, sandbox_id: str) -> str | None:
        try:
            return str(client.get(sandbox_id).status)
        except APIError as exc:
            if _http_status(exc) == 404:
                return None
            raise

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, HostedHandle)
        return PrimeCommands(handle, self)

    @property
    def resources(self) -> Resources:
        return Resources(vcpus=self.options.cpu_cores, gib=self.options.memory_gb)

    @property
    def endpoint(self) -> str:
        return self.api_url

    @property
    def where(self) -> str:
        return f"the Prime API at {self.api_url}"


def _not_running(sandbox: SDKSandbox) -> SandboxNotRunningError:
    """The SDK's own error for a sandbox that ended while being made."""
    kind = SandboxImagePullError if sandbox.error_type == "IMAGE_PULL_FAILED" else None
    message = f"Sandbox {sandbox.id} {sandbox.status}: {sandbox.error_message or '-'}"
    return (kind or SandboxNotRunningError)(
        sandbox.id, sandbox.status, sandbox.error_type, message=message
    )


class PrimeCommands(HostedTransport):
    """The SDK's own data plane: ``execute_command`` per step (a Connect stream through the
    sandbox's gateway), files through the gateway's upload and download. Prime's held
    processes (``start_process``, stdin) exist only on its async client: not offered."""

    name = "exec"

    def __init__(self, handle: HostedHandle, substrate: PrimeSubstrate) -> None:
        super().__init__(handle, substrate)
        self.client: Any = handle.client or substrate.clients.shared

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # the sandbox's timeout(1) kills the step's group at the deadline; the stream's own
        # deadline, a grace later, only bounds a sandbox that stopped answering
        command = timeout_wrapped(["sh", "-c", shell_line(argv, env=env, cwd=cwd)], timeout)
        limit = math.ceil(timeout + GRACE_S) if timeout is not None else NO_LIMIT_S
        started = time.perf_counter()
        try:
            result = self.client.execute_command(
                self.sandbox_id, shlex.join(command), timeout=limit
            )
        except CommandTimeoutError:
            raise step_timeout(self._substrate.name, timeout or limit) from None
        except Exception as exc:
            raise self._fail(exc, "running a command") from None
        code = int(result.exit_code)
        if was_timed_out(timeout, code, time.perf_counter() - started):
            raise step_timeout(self._substrate.name, timeout or 0)
        stdout, stderr = result.stdout.encode(), result.stderr.encode()
        return RawResult.capped(code, stdout, stderr, self.output_cap)

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        name = posixpath.basename(path) or "file"
        try:
            self.client.upload_bytes(self.sandbox_id, path, data, name, timeout=_seconds(timeout))
        except Exception as exc:
            raise self._file_failure(exc, path, "writing a file", timeout) from None

    def read(self, path: str, *, timeout: float | None) -> bytes:
        with tempfile.TemporaryDirectory(prefix="rollout-tax-prime-") as scratch:
            local = os.path.join(scratch, "file")
            try:
                self.client.download_file(self.sandbox_id, path, local, timeout=_seconds(timeout))
            except Exception as exc:
                raise self._file_failure(exc, path, "reading a file", timeout) from None
            with open(local, "rb") as file:
                return file.read()

    def _file_failure(
        self, exc: Exception, path: str, action: str, timeout: float | None
    ) -> Exception:
        """The gateway's answer about ``path`` as an OSError (the Sandbox asks why); past the
        step's timeout as StepTimeout; the sandbox's own failure as the substrate's error."""
        if isinstance(exc, UploadTimeoutError | DownloadTimeoutError):
            return self._file_timeout(timeout)
        status = _http_status(exc)
        if status is not None and 400 <= status < 500 and status not in (401, 409, 410):
            return self._answered(exc, path)  # the gateway's answer about the path
        return self._fail(exc, action)


def _seconds(timeout: float | None) -> int | None:
    return None if timeout is None else max(1, math.ceil(timeout))
