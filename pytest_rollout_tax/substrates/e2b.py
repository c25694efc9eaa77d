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

import contextlib
import errno
import os
import posixpath
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.price import Resources
from ..core.record import PhaseClock
from ..core.sandbox import Handle
from ..core.substrate import SESSION_LABEL, Substrate, SubstrateOptions
from ..core.transport import RawResult, Transport, step_timeout
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
LABEL_PREFIX = "rollout-tax.io/"
#: What the SDK runs every command with (``commands.run`` wraps it in ``bash -l -c``).
SHELL = "/bin/bash"
#: How long to look for a timed-out command that had not reported its pid yet.
KILL_SEARCH_S = 2.0
#: E2B's published limit on sandbox creations: 1,800 per 10 s per API key.
PUBLISHED_CREATES_PER_S = 180.0


@dataclass
class E2BOptions(SubstrateOptions):
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
    max_creates_per_s: float = PUBLISHED_CREATES_PER_S

    def check(self) -> None:
        if self.max_creates_per_s < 0:
            raise ValueError(f"max_creates_per_s={self.max_creates_per_s}: must be >= 0")
        if not self.template.strip():
            raise ValueError("template: must not be empty")
        if self.timeout < 1:
            raise ValueError(f"timeout={self.timeout}: the sandbox lifetime must be >= 1 s")
        if self.request_timeout is not None and self.request_timeout <= 0:
            raise ValueError(f"request_timeout={self.request_timeout}: must be > 0 s")
        reserved = sorted(key for key in self.metadata if key.startswith(LABEL_PREFIX))
        if reserved:
            raise ValueError(f"metadata: {', '.join(reserved)}: {LABEL_PREFIX}* is reserved")
        if not posixpath.isabs(self.workdir):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")


@dataclass
class E2BHandle(Handle):
    """One E2B sandbox: ``sdk`` is the SDK's own ``Sandbox`` object for it."""

    sdk: SDKSandbox


class E2BCommands(Transport):
    """The SDK's own data plane: ``commands.run`` per step (over envd's Connect-RPC), files
    through envd's ``/files``. E2B offers no other transport to choose."""

    name = "exec"

    def __init__(self, handle: E2BHandle, substrate: E2BSubstrate) -> None:
        self.sdk = handle.sdk
        self.sandbox_id = handle.id
        self._substrate = substrate

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
            return step_timeout(self._substrate.name, timeout, "it may still be running")
        if isinstance(exc, FileNotFoundException):
            return FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if isinstance(exc, InvalidArgumentException) or type(exc) is SandboxException:
            return OSError(errno.EIO, " ".join(self._substrate.redact(exc).split()), path)
        return self._fail(exc, action)

    def _fail(self, exc: BaseException, action: str) -> RolloutTaxError:
        return self._substrate.error(exc, action, sandbox_id=self.sandbox_id)


class E2BSubstrate(Substrate):
    kind = "e2b"
    Options = E2BOptions
    #: Sandboxes per page when listing (reap).
    list_page_size = 100

    hosted = True

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)
        key = os.environ.get(API_KEY_VARIABLE, "").strip()
        if not key:
            raise CredentialsMissing(
                f"{self.name}: {API_KEY_VARIABLE} is not set; export an E2B API key "
                "(https://e2b.dev/dashboard?tab=keys) to run the e2b rollouts"
            )
        self._key = key
        self._params: dict[str, Any] = {"api_key": key}
        if self.options.domain:
            self._params["domain"] = self.options.domain
        if self.options.request_timeout is not None:
            self._params["request_timeout"] = self.options.request_timeout
        self.pacer = CreatePacer(self.options.max_creates_per_s)
        config = ConnectionConfig(domain=self.options.domain, api_key="-")
        #: Where the control plane is reached, for messages (never with the key).
        self.api_url = config.api_url
        self.domain = config.domain

    def __repr__(self) -> str:
        return f"<E2BSubstrate {self.name!r} template={self.options.template!r}>"

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> E2BHandle:
        if self.pacer.wait() > 0:  # a paced create is later, not slower: not counted
            clock.mark("paced", cold_start=False)
        try:
            sdk = SDKSandbox.create(
                template=self.options.template,
                timeout=self.options.timeout,
                metadata={**self.options.metadata, **labels},
                envs=dict(self.options.envs) or None,
                **self._params,
            )
        except Exception as exc:
            raise self.error(exc, "creating a sandbox") from None
        clock.mark("create")
        handle = E2BHandle(id=sdk.sandbox_id, workdir=self.options.workdir, sdk=sdk)
        try:  # every sandbox starts in an empty workdir, not in the template user's dotfiles
            mkdir = ["mkdir", "-p", "--", handle.workdir]
            made = self._transport(handle).run(mkdir, timeout=None, env=None, cwd="/")
            if made.exit_code != 0:
                raise SandboxStartError(
                    f"{self.name}: cannot make the workdir {handle.workdir} "
                    f"({self.name}.workdir): {made.stderr.decode('utf-8', 'replace').strip()[:120]}"
                )
        except BaseException:  # a failure or Ctrl-C: the sandbox must not outlive it
            with contextlib.suppress(Exception):  # the start error is the one to report
                self.destroy(handle)
            raise
        # Our own setup, not the service's cold start (Sandbox.create through the first no-op).
        clock.mark("workdir", cold_start=False)
        return handle

    def _transport(self, handle: E2BHandle) -> Transport:
        return E2BCommands(handle, self)

    def destroy(self, handle: E2BHandle) -> None:
        try:
            handle.sdk.kill()
        except Exception as exc:
            raise self.error(exc, "killing the sandbox", sandbox_id=handle.id) from None

    def list_sandboxes(self, session_id: str | None = None) -> list[SandboxInfo]:
        """Sandboxes labelled by ``session_id`` (by any session if None), running or paused."""
        query = SandboxQuery(metadata={SESSION_LABEL: session_id}) if session_id else None
        try:
            pages = SDKSandbox.list(query=query, limit=self.list_page_size, **self._params)
            found = []
            while pages.has_next:
                for info in pages.next_items():
                    label = info.metadata.get(SESSION_LABEL)
                    if label is not None and (session_id is None or label == session_id):
                        found.append(info)
        except Exception as exc:
            raise self.error(exc, "listing sandboxes") from None
        return found

    @property
    def resources(self) -> Resources:
        """E2B's default sandbox (2 vCPU, 512 MiB); a template of its own says
        ``price.vcpus`` and ``price.gib``."""
        return Resources(vcpus=DEFAULT_VCPUS, gib=DEFAULT_GIB)

    @property
    def endpoint(self) -> str:
        return self.api_url

    @property
    def connection(self) -> str:
        """The SDK keeps one connection pool per process: rollouts after the first reuse it."""
        return "reused"

    def ping(self) -> None:
        """List one page of this session's sandboxes: the cheapest authenticated call."""
        self.list_sandboxes(self.session_id)

    def reap(self, session_id: str | None = None) -> int:
        """Kill the sandboxes labelled by ``session_id`` (any session if None); return how many."""
        removed = 0
        for info in self.list_sandboxes(session_id):
            try:
                removed += bool(SDKSandbox.kill(info.sandbox_id, **self._params))
            except Exception as exc:
                raise self.error(exc, "killing a leftover sandbox", info.sandbox_id) from None
        return removed

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
        """The error to raise for an SDK exception: one line that names the cause, no key.

        The first line is the same for every rollout with the same cause (so the summary can
        count it); specifics (the service's message, the sandbox id) follow on a second line.
        """
        if isinstance(exc, RolloutTaxError):
            return exc
        # A sandbox that never started is a start error; one that fails mid-rollout is not.
        kind = SandboxStartError if action == "creating a sandbox" else SandboxError
        status = 401 if isinstance(exc, AuthenticationException) else _status(exc)
        where = f"the E2B API at {self.api_url} (domain {self.domain})"
        details = self.redact(exc).strip().replace("\n", " ")
        if sandbox_id:
            details = f"sandbox {sandbox_id}: {details}"
        if status in (401, 403):
            return SubstrateUnavailable(
                f"{self.name}: {where} rejected the API key from {API_KEY_VARIABLE} "
                f"(HTTP {status}) while {action}; check the key and its team's access\n{details}"
            )
        if isinstance(exc, RateLimitException) or status == 429:
            message = (
                f"{self.name}: rate limit or quota exceeded (HTTP 429) while {action}; "
                f"pace creates ({self.name}.max_creates_per_s) or raise the team's quota\n"
                f"{details}"
            )
            return RateLimited(message, details) if kind is SandboxStartError else kind(message)
        if status == 404 and action == "creating a sandbox":
            return ConfigError(
                f"{self.name}.template={self.options.template!r}: template not found (HTTP 404) "
                f"at {where}; check the name with 'e2b template list'\n{details}"
            )
        if isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException):
            return SubstrateUnavailable(
                f"{self.name}: cannot reach {where} while {action} ({type(exc).__name__})\n"
                f"{details}"
            )
        if isinstance(exc, httpx.TimeoutException) or (
            type(exc) is TimeoutException and "request_timeout" in str(exc)
        ):
            return SubstrateUnavailable(
                f"{self.name}: {where} did not answer in time while {action}; raise "
                f"{self.name}.request_timeout (now {self.options.request_timeout or 60} s)\n"
                f"{details}"
            )
        if isinstance(exc, SandboxNotRunningException):
            return SandboxError(
                f"{self.name}: the sandbox is no longer running while {action} (killed, or its "
                f"lifetime {self.name}.timeout={self.options.timeout} s ran out)\n{details}"
            )
        if isinstance(exc, SandboxUnreachableException):
            return SandboxError(
                f"{self.name}: the sandbox cannot be reached while {action} "
                f"(domain {self.domain})\n{details}"
            )
        if isinstance(exc, ServiceBusyException):
            return kind(
                f"{self.name}: the service is busy (HTTP 503) while {action}; retry later\n"
                f"{details}"
            )
        label = f"HTTP {status}" if status else type(exc).__name__
        return kind(f"{self.name}: {action} failed ({label})\n{details}")


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else None


def _encode(text: str | None) -> bytes:
    return (text or "").encode()
