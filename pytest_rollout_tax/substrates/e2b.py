"""``e2b``: hosted sandboxes on E2B (https://e2b.dev), through the official ``e2b`` SDK.

Cold start is ``Sandbox.create`` (phase ``create``) through the first no-op command (phase
``first_exec``); making the empty workdir in between is phase ``workdir``, not counted. Commands
run through ``commands.run``, files go through ``files.write`` and ``files.read``, teardown is
``kill``. The key comes from ``E2B_API_KEY``; the SDK's own knobs
(``E2B_DOMAIN``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``, ``E2B_DEBUG``) apply as usual. Every
sandbox carries the ownership labels as metadata, so leftovers can be listed and killed.

Install with ``pip install 'pytest-rollout-tax[e2b]'``.
"""

from __future__ import annotations

import errno
import shlex
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.transport import RawResult, Transport, step_timeout
from ..errors import ExtraMissing
from .hosted import REUSED, HostedHandle, HostedOptions, HostedSubstrate, HostedTransport, Listed
from .hosted.credentials import Credentials
from .hosted.errors import ErrorTable, Kind, Row, rate_limited, rejected, unreachable

try:
    import httpx
    from e2b import CommandExitException, SandboxInfo, SandboxQuery
    from e2b import Sandbox as SDKSandbox
    from e2b.connection_config import ConnectionConfig
    from e2b.exceptions import (
        AuthenticationException,
        FileNotFoundException,
        InvalidArgumentException,
        RateLimitException,
        SandboxException,
        SandboxNotRunningException,
        SandboxUnreachableException,
        ServiceBusyException,
        TimeoutException,
    )
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("e2b", "e2b") from None

API_KEY_VARIABLE = "E2B_API_KEY"
#: What E2B's default sandbox is billed for (its docs: 2 vCPU, 512 MiB).
DEFAULT_VCPUS = 2.0
DEFAULT_GIB = 0.5
#: What the SDK runs every command with (``commands.run`` wraps it in ``bash -l -c``).
SHELL = "/bin/bash"
#: How long to look for a timed-out command that had not reported its pid yet.
KILL_SEARCH_S = 2.0
#: E2B's published limit on sandbox creations: 1,800 per 10 s per API key.
PUBLISHED_CREATES_PER_S = 180.0


@dataclass
class E2BOptions(HostedOptions):
    labels_option: ClassVar[str] = "metadata"

    #: The template (name or id) every sandbox starts from.
    template: str = "base"
    #: Sandbox lifetime in seconds: E2B kills a sandbox this long after its creation.
    timeout: int = 300
    #: Extra metadata on every sandbox (the rollout-tax.io/ ownership labels are added).
    metadata: dict[str, str] = field(default_factory=dict)
    #: Environment variables for every command in the sandbox.
    envs: dict[str, str] = field(default_factory=dict)
    #: The E2B domain (default: ``E2B_DOMAIN``, else the SDK's ``e2b.app``).
    domain: str | None = None
    #: Seconds an API or envd request may take (default: the SDK's, 60 s).
    request_timeout: float | None = None
    #: The absolute directory relative paths and commands start in; made empty at cold start.
    workdir: str = "/home/user/workspace"
    #: Creates started per second at most (0: no pacing); the default is E2B's published
    #: limit, 1,800 per 10 s per key.
    max_creates_per_s: float | None = PUBLISHED_CREATES_PER_S

    def check(self) -> None:
        super().check()
        if not self.template.strip():
            raise ValueError("template: must not be empty")
        if self.timeout < 1:
            raise ValueError(f"timeout={self.timeout}: the sandbox lifetime must be >= 1 s")
        if self.request_timeout is not None and self.request_timeout <= 0:
            raise ValueError(f"request_timeout={self.request_timeout}: must be > 0 s")


class E2BCommands(HostedTransport):
    """The SDK's own data plane: ``commands.run`` per step (over envd's Connect-RPC), files
    through envd's ``/files``. E2B offers no other transport to choose."""

    name = "exec"

    def run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # Variables go through env(1): envd's shell would drop names that are not identifiers.
        assignments = [f"{name}={value}" for name, value in (env or {}).items()]
        command = shlex.join(["env", "--", *assignments, *argv] if assignments else argv)
        handle = None
        try:
            # background=True hands out the pid, so a command past its timeout can be killed.
            handle = self.sdk.commands.run(
                command,
                background=True,
                cwd=cwd,
                timeout=timeout or 0,
            )
            result = handle.wait()
        except CommandExitException as exc:  # the SDK keeps output whole: cut to the cap here
            stdout, stderr = _encode(exc.stdout), _encode(exc.stderr)
            return RawResult.capped(exc.exit_code, stdout, stderr, self.output_cap)
        except (SandboxNotRunningException, SandboxUnreachableException) as exc:
            raise self._fail(exc, "running a command") from None
        except TimeoutException as exc:
            if not timeout:
                raise self._fail(exc, "running a command") from None
            self._kill(handle.pid if handle is not None else None, command)
            # No command line in the message: it may carry secrets, and the message is
            # counted as a failure reason, the same for every step with this timeout.
            raise step_timeout(self._substrate.name, timeout) from None
        except InvalidArgumentException as exc:
            if "cwd" in str(exc):  # envd refuses a missing directory: the workload's error
                return RawResult(127, b"", f"directory {cwd}: not found\n".encode())
            raise self._fail(exc, "running a command") from None
        except Exception as exc:
            raise self._fail(exc, "running a command") from None
        stdout, stderr = _encode(result.stdout), _encode(result.stderr)
        return RawResult.capped(result.exit_code, stdout, stderr, self.output_cap)

    def _kill(self, pid: int | None, command: str) -> None:
        """Kill a timed-out command: by pid, or, if it timed out before it reported one, by
        its command line once it shows up (it may still be starting)."""
        try:
            pids = [pid] if pid is not None else []
            give_up = time.monotonic() + KILL_SEARCH_S
            while not pids and time.monotonic() < give_up:
                pids = [
                    process.pid
                    for process in self.sdk.commands.list()
                    if process.cmd == SHELL and process.args[-1:] == [command]
                ]
                time.sleep(0 if pids else 0.1)
            for found in pids:
                self.sdk.commands.kill(found)
        except Exception as exc:
            raise self._fail(exc, "killing a command past its timeout") from None

    def write(self, path: str, data: bytes, *, timeout: float | None) -> None:
        try:
            self.sdk.files.write(path, data, request_timeout=timeout)
        except Exception as exc:
            raise self._file_failure(exc, path, "writing a file", timeout) from None

    def read(self, path: str, *, timeout: float | None) -> bytes:
        try:
            return bytes(self.sdk.files.read(path, format="bytes", request_timeout=timeout))
        except Exception as exc:
            raise self._file_failure(exc, path, "reading a file", timeout) from None

    def _file_failure(
        self, exc: Exception, path: str, action: str, timeout: float | None
    ) -> Exception:
        """envd's answer about ``path`` as an OSError (the sandbox names its cause); a request
        past the step's timeout as StepTimeout; the sandbox's own failure as a SandboxError."""
        if timeout and type(exc) is TimeoutException:
            return self._file_timeout(timeout)
        if isinstance(exc, FileNotFoundException):
            return FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if isinstance(exc, InvalidArgumentException) or type(exc) is SandboxException:
            return self._answered(exc, path)
        return self._fail(exc, action)


#: E2B's errors as ours: the first row that covers an exception wins.
ERRORS = ErrorTable(
    rejected((AuthenticationException,), "check the key and its team's access"),
    rate_limited(
        (RateLimitException,),
        "rate limit or quota exceeded (HTTP 429) while {action}; pace creates "
        "({name}.max_creates_per_s) or raise the team's quota",
    ),
    Row(
        Kind.CONFIG,
        "{name}.template={o.template!r}: template not found (HTTP 404) at {where}; check the "
        "name with 'e2b template list'",
        statuses=(404,),
        creating=True,
        refused=True,
    ),
    unreachable(
        (httpx.TransportError,), when=lambda exc: not isinstance(exc, httpx.TimeoutException)
    ),
    Row(
        Kind.UNAVAILABLE,
        "{name}: {where} did not answer in time while {action}; raise "
        "{name}.request_timeout (now {s.request_timeout_s} s)",
        types=(httpx.TimeoutException, TimeoutException),
        when=lambda exc: (
            isinstance(exc, httpx.TimeoutException)
            or (type(exc) is TimeoutException and "request_timeout" in str(exc))
        ),
    ),
    Row(
        Kind.SANDBOX,
        "{name}: the sandbox is no longer running while {action} (killed, or its lifetime "
        "{name}.timeout={o.timeout} s ran out)",
        types=(SandboxNotRunningException,),
    ),
    Row(
        Kind.SANDBOX,
        "{name}: the sandbox cannot be reached while {action} (domain {s.domain})",
        types=(SandboxUnreachableException,),
    ),
    Row(
        Kind.FAILED,
        "{name}: the service is busy (HTTP 503) while {action}; retry later",
        types=(ServiceBusyException,),
    ),
)


class E2BSubstrate(HostedSubstrate):
    kind = "e2b"
    Options = E2BOptions
    credentials = Credentials(
        (API_KEY_VARIABLE,),
        "export an E2B API key (https://e2b.dev/dashboard?tab=keys) to run the e2b rollouts",
    )
    errors = ERRORS
    #: The SDK keeps one connection pool per process: rollouts after the first reuse it.
    fixed_connection = REUSED
    delete_verb = "killing"
    #: Sandboxes per page when listing (reap).
    list_page_size = 100

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        self._params: dict[str, Any] = {"api_key": self.credential[API_KEY_VARIABLE]}
        if self.options.domain:
            self._params["domain"] = self.options.domain
        if self.options.request_timeout is not None:
            self._params["request_timeout"] = self.options.request_timeout
        config = ConnectionConfig(domain=self.options.domain, api_key="-")
        #: Where the control plane is reached, for messages (never with the key).
        self.api_url: str = config.api_url
        self.domain: str = config.domain

    def __repr__(self) -> str:
        return f"<E2BSubstrate {self.name!r} template={self.options.template!r}>"

    def _request(self, client: Any, labels: dict[str, str], clock: PhaseClock) -> HostedHandle:
        sdk = SDKSandbox.create(
            template=self.options.template,
            timeout=self.options.timeout,
            metadata=labels,
            envs=dict(self.options.envs) or None,
            **self._params,
        )
        return HostedHandle(id=sdk.sandbox_id, workdir=self.options.workdir, sdk=sdk)

    def _transport(self, handle: Handle) -> Transport:
        assert isinstance(handle, HostedHandle)
        return E2BCommands(handle, self)

    def _delete(self, handle: HostedHandle) -> None:
        handle.sdk.kill()

    def _list(self, client: Any, labels: Mapping[str, str] | None) -> Iterator[Listed]:
        query = SandboxQuery(metadata=dict(labels)) if labels else None
        pages = SDKSandbox.list(query=query, limit=self.list_page_size, **self._params)
        while pages.has_next:
            for info in pages.next_items():
                yield Listed(info.sandbox_id, info.metadata, info)

    def _delete_listed(self, client: Any, listed: Listed) -> bool:
        return bool(SDKSandbox.kill(listed.id, **self._params))

    def list_sandboxes(self, session_id: str | None = None) -> list[SandboxInfo]:
        """Sandboxes labelled by ``session_id`` (by any session if None), running or paused."""
        return [one.sdk for one in self.listed(session_id)]

    @property
    def resources(self) -> Resources:
        """E2B's default sandbox (2 vCPU, 512 MiB); a template of its own says
        ``price.vcpus`` and ``price.gib``."""
        return Resources(vcpus=DEFAULT_VCPUS, gib=DEFAULT_GIB)

    @property
    def endpoint(self) -> str:
        return self.api_url

    @property
    def where(self) -> str:
        return f"the E2B API at {self.api_url} (domain {self.domain})"

    @property
    def request_timeout_s(self) -> float:
        """The API's request timeout in force (the SDK's default: 60 s)."""
        return self.options.request_timeout or 60


def _encode(text: str | None) -> bytes:
    return (text or "").encode()
