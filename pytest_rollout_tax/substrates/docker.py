"""``docker``: one container per sandbox on a Docker engine (the paper's "single container").

Built on the docker SDK's low-level ``APIClient`` so that an action costs exactly what the SDK's
own ``exec_run`` costs (exec create, exec start, exec inspect) and a cold start is one create
and one start. Containers run with an init process and ``no-new-privileges`` and carry the
ownership labels, so whatever a crashed or interrupted session leaves behind can be reaped.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import posixpath
import re
import signal
import socket
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import (
    ConfigError,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from ..record import PhaseClock, Rollout
from ..sandbox import (
    NOOP,
    ROLLOUT_LABEL,
    SESSION_LABEL,
    RawResult,
    Sandbox,
    Substrate,
    process_alive,
)
from . import SANDBOX_IMAGE as DEFAULT_IMAGE

try:
    import docker
    import docker.errors as docker_errors
    import docker.utils.socket as docker_socket
    import requests.exceptions
except ImportError as exc:  # pragma: no cover - exercised only without the extra installed
    raise SubstrateUnavailable(
        f"docker: the docker SDK is not installed ({exc}); pip install 'pytest-rollout-tax[docker]'"
    ) from None

DEFAULT_HOST = "unix:///var/run/docker.sock"
#: Which process created a container (``HOST:PID``): reaping spares a live session's sandboxes.
OWNER_LABEL = "rollout-tax.io/owner"
#: PID 1's child in every sandbox: keeps the container alive whatever the image's CMD is.
KEEPALIVE = ["sleep", "infinity"]
#: ``timeout -s KILL`` kills its process group; the exec then reports 128 + SIGKILL.
KILLED = 128 + signal.SIGKILL
#: How long past a step's timeout the client waits for the engine before giving up on it.
BACKSTOP_S = 5.0
_OCI_FAILED = b"OCI runtime exec failed"
_UNIX_URL = "http+docker://localhost"  # the SDK's base URL for a unix socket
_BUILTIN_NETWORKS = ("none", "bridge", "host", "default")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_MIN_MEMORY = 6 * 1024**2  # the engine refuses less
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")  # not allowed in a container name


@dataclass
class DockerOptions:
    #: The image every sandbox runs; it must exist locally unless ``pull=missing``.
    image: str = DEFAULT_IMAGE
    #: ``none`` (no network, only ``lo``), ``bridge``, ``host`` or the name of a docker network.
    network: str = "none"
    #: CPU limit, e.g. ``1.5``.
    cpus: float | None = None
    #: Memory limit, e.g. ``512m``, ``2g``.
    memory: str | None = None
    #: Maximum number of processes (``-1``: unlimited).
    pids_limit: int | None = None
    #: OCI runtime, e.g. ``runsc`` for gVisor (it must be installed in the engine).
    runtime: str | None = None
    #: The sandbox's working directory; relative paths in steps resolve against it.
    workdir: str = "/workspace"
    #: Run commands as this user (``name``, ``uid`` or ``uid:gid``); files written are theirs.
    user: str | None = None
    #: Extra environment variables for every command.
    env: dict[str, str] = field(default_factory=dict)
    #: ``never``: a missing image is an error; ``missing``: pull it once (not timed as cold start).
    pull: Literal["never", "missing"] = "never"

    def check(self) -> None:
        """Check every value; ``parse_options`` reports a ValueError as a usage error."""

        def bad(key: str, why: str) -> ValueError:
            return ValueError(f"{key}={getattr(self, key)!r}: {why}")

        if not self.image.strip():
            raise bad("image", "expected an image reference, e.g. rollout-tax/sandbox:bookworm")
        if not _NAME.match(self.network.removeprefix("container:")):
            raise bad("network", "expected none, bridge, host or a docker network name")
        if self.cpus is not None and not self.cpus > 0:
            raise bad("cpus", "expected a number of CPUs > 0, e.g. 1.5")
        if self.memory is not None:
            memory_bytes(self.memory)
        if self.pids_limit is not None and self.pids_limit < 1 and self.pids_limit != -1:
            raise bad("pids_limit", "expected a positive number of processes, or -1 for no limit")
        if self.runtime is not None and not _NAME.match(self.runtime):
            raise bad("runtime", "expected the name of an OCI runtime, e.g. runsc")
        if not posixpath.isabs(self.workdir):
            raise bad("workdir", "expected an absolute path, e.g. /workspace")
        if self.user is not None and not _USER.match(self.user):
            raise bad("user", "expected NAME, UID or UID:GID")
        for key in self.env:
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"env: invalid variable name {key!r}")


def memory_bytes(text: str) -> int:
    """``512m`` -> 536870912 (binary units, as docker reads them); ValueError naming ``memory``."""
    match = _MEMORY.match(text)
    if not match:
        raise ValueError(f"memory={text!r}: expected a size like 512m or 2g")
    number, unit = float(match[1]), match[2].lower()
    size = int(number * 1024 ** " kmgt".index(unit or " "))
    if size < _MIN_MEMORY:
        raise ValueError(f"memory={text!r}: the engine needs at least 6m")
    return size


class DockerSandbox(Sandbox):
    """One running container; commands through the exec API, files through the archive API."""

    def __init__(self, *, substrate: DockerSubstrate, container_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.substrate = substrate
        self.container_id = container_id
        self._api = substrate.api

    def _run(
        self, argv: list[str], *, timeout: float | None, env: Mapping[str, str] | None, cwd: str
    ) -> RawResult:
        # A timed step runs under `timeout`, which kills its whole process group inside the
        # container at the deadline. Not the no-op probe: the action tax is measured without
        # our wrapper; it cannot hang, and the client-side deadline still covers the engine.
        wrapped = timeout is not None and argv != list(NOOP)
        command = (
            ["timeout", "-s", "KILL", f"{max(timeout, 0.001):.3f}", *argv] if wrapped else argv
        )
        if timeout is None:
            backstop = None
        else:
            backstop = timeout + max(BACKSTOP_S, timeout / 2) if wrapped else timeout
        started = time.perf_counter()
        with self.substrate._engine_errors(f"exec in container {self.container_id[:12]}"):
            exec_id = self._api.exec_create(
                self.container_id, command, environment=dict(env) if env else None, workdir=cwd
            )["Id"]
            try:
                stdout, stderr = _exec_output(self._api, exec_id, backstop)
            except TimeoutError:
                # The message names no command (it may carry secrets) and is the same for
                # every step with this timeout, so the summary can count it as one reason.
                killed = self.substrate._kill_exec(exec_id, command[0], group=wrapped)
                late = f", and {backstop - timeout:.0f} s later still ran" if wrapped else ""
                fate = "killed" if killed else "it may still be running"
                name = self.substrate.name
                raise StepTimeout(
                    f"{name}: step ran past its {timeout:g} s timeout{late}; {fate}"
                ) from None
            exit_code = _exit_code(self._api, exec_id)
        if wrapped and exit_code == KILLED and time.perf_counter() - started >= timeout:
            raise StepTimeout(
                f"{self.substrate.name}: step ran past its {timeout:g} s timeout; killed"
            )
        if exit_code == 126 and stdout.startswith(_OCI_FAILED) and not stderr:
            # The runtime could not start the command (not found, no such cwd, not executable):
            # report it like a shell does, on stderr, 127 for what does not exist.
            message = stdout.decode("utf-8", "replace").strip()
            if wrapped and 'exec: "timeout"' in message:
                raise SandboxError(
                    f"{self.substrate.name}: steps with a timeout need the `timeout` command "
                    f"(coreutils or busybox) in image {self.substrate.options.image}"
                )
            missing = any(
                reason in message
                for reason in ("not found", "no such file or directory", "chdir to cwd")
            )
            return RawResult(127 if missing else 126, b"", stdout.strip() + b"\n")
        return RawResult(exit_code, stdout, stderr)

    def _write(self, path: str, data: bytes) -> None:
        with self.substrate._engine_errors(f"writing {path}"):
            self._put(path, data)

    def _put(self, path: str, data: bytes) -> None:
        parent, name = posixpath.split(path)
        uid, gid = self.substrate._file_owner(self)
        archive = _single_file_tar(name, data, uid, gid)
        try:
            _put_archive(self._api, self.container_id, parent, archive)
            return
        except docker_errors.NotFound as exc:
            self._check_container(exc)
        except docker_errors.APIError as exc:
            raise _os_error(exc, path) from None
        # The parent does not exist: make it as the sandbox's user, then put the file again.
        # (An archive carrying the parents' entries would also chmod/chown existing ones.)
        made = self._run(["mkdir", "-p", "--", parent], timeout=self.timeout, env=None, cwd="/")
        if made.exit_code != 0:
            message = made.stderr.decode("utf-8", "replace").strip()
            raise OSError(errno.EIO, f"cannot create {parent}: {message}", path)
        try:
            _put_archive(self._api, self.container_id, parent, archive)
        except docker_errors.APIError as exc:
            raise _os_error(exc, path) from None

    def _read(self, path: str) -> bytes:
        with self.substrate._engine_errors(f"reading {path}"):
            return self._get(path)

    def _get(self, path: str) -> bytes:
        for _ in range(40):  # follow symbolic links, like open() does
            try:
                chunks, _ = self._api.get_archive(self.container_id, path)
                archive = b"".join(chunks)
            except docker_errors.NotFound as exc:
                self._check_container(exc)
                raise FileNotFoundError(errno.ENOENT, "No such file in the sandbox", path) from None
            except docker_errors.APIError as exc:
                raise _os_error(exc, path) from None
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                member = tar.next()
                if member is None or member.isdir():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
                if member.issym():
                    path = posixpath.normpath(
                        posixpath.join(posixpath.dirname(path), member.linkname)
                    )
                    continue
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise OSError(errno.EINVAL, "Not a regular file", path)
                return extracted.read()
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", path)

    def _destroy(self) -> None:
        with self.substrate._engine_errors(f"removing container {self.container_id[:12]}"):
            self.substrate._remove(self.container_id)

    def _check_container(self, exc: docker_errors.NotFound) -> None:
        """Re-raise a 404 about the container itself (not about a path) as a clear error."""
        if "no such container" in str(exc.explanation or "").lower():
            raise SandboxError(
                f"{self.substrate.name}: container {self.container_id[:12]} is gone"
            ) from None


class DockerSubstrate(Substrate):
    """Containers on the engine at ``DOCKER_HOST`` (default: the local socket)."""

    kind = "docker"
    Options = DockerOptions

    def __init__(self, name: str | None = None, *, session_id: str | None = None, **options: Any):
        super().__init__(name, session_id=session_id, **options)  # checks the options
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._lock = threading.Lock()
        self._file_ids: tuple[int, int] | None = _numeric_ids(self.options.user)
        self._pull_needed = False
        self.client = _connect(self.name)
        self.api = self.client.api
        self._host_config = self.api.create_host_config(
            init=True,
            security_opt=["no-new-privileges"],
            network_mode=self.options.network,
            nano_cpus=int(self.options.cpus * 1e9) if self.options.cpus else None,
            mem_limit=memory_bytes(self.options.memory) if self.options.memory else None,
            pids_limit=self.options.pids_limit,
            runtime=self.options.runtime,
        )

    # -- the substrate interface -------------------------------------------------------------

    def _create(self, *, rollout: Rollout, labels: dict[str, str], clock: PhaseClock) -> Sandbox:
        if self._pull_needed:
            self._pull()
            clock.mark("pull", cold_start=False)
        # Unique to this rollout: a container whose create response was lost is removed by it.
        name = _UNSAFE.sub("-", f"rollout-tax-{labels[SESSION_LABEL]}-{labels[ROLLOUT_LABEL]}")
        container_id = None
        try:
            container_id = self.api.create_container(
                self.options.image,
                entrypoint=KEEPALIVE,
                working_dir=self.options.workdir,
                user=self.options.user,
                environment=self.options.env or None,
                labels=labels | {OWNER_LABEL: self._owner},
                name=name,
                host_config=self._host_config,
                detach=True,
            )["Id"]
            clock.mark("create")
            self.api.start(container_id)
            clock.mark("start")
        except BaseException as exc:
            # Without an id the create may still have happened (response lost to a timeout or
            # a reset, or interrupted): remove by name, unless the engine refused it (4xx).
            refused = isinstance(exc, docker_errors.APIError) and exc.is_client_error()
            if container_id is not None or not refused:
                with contextlib.suppress(Exception):
                    self._remove(container_id or name)
            if isinstance(exc, docker_errors.ImageNotFound):
                raise SandboxStartError(self._image_missing()) from None
            if isinstance(exc, docker_errors.APIError):
                raise SandboxStartError(
                    f"{self.name}: the engine refused the container: {_explain(exc)}"
                ) from None
            if isinstance(
                exc, (requests.exceptions.ConnectionError, docker_errors.DockerException)
            ):
                raise SandboxStartError(
                    f"{self.name}: lost the Docker engine while creating a container: "
                    f"{_root_cause(exc)}"
                ) from None
            raise
        return DockerSandbox(
            substrate=self, container_id=container_id, workdir=self.options.workdir, rollout=rollout
        )

    def reap(self, session_id: str | None = None) -> int:
        """Force-remove containers of ``session_id`` (any session if None) that no live process
        of another session on this host still owns; return how many were removed."""
        label = f"{SESSION_LABEL}={session_id}" if session_id else SESSION_LABEL
        try:
            found = self.api.containers(all=True, filters={"label": label})
        except (docker_errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SubstrateUnavailable(
                f"{self.name}: cannot list containers: {_root_cause(exc)}"
            ) from None
        removed = 0
        for container in found:
            if self._owned_by_live_process((container.get("Labels") or {}).get(OWNER_LABEL)):
                continue
            with contextlib.suppress(RolloutTaxError):
                removed += self._remove(container["Id"])
        return removed

    def close(self) -> None:
        self.client.close()

    # -- helpers -------------------------------------------------------------------------------

    def _remove(self, container_id: str) -> int:
        """Force-remove one container with its anonymous volumes; 0 if it was already gone."""
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except docker_errors.NotFound:
            return 0
        except docker_errors.APIError as exc:
            if exc.status_code == 409 and "already in progress" in str(exc.explanation):
                return 0  # another process (the reaper) is removing it right now
            raise SandboxError(
                f"{self.name}: could not remove container {container_id[:12]}: {_explain(exc)}"
            ) from None
        return 1

    @contextlib.contextmanager
    def _engine_errors(self, doing: str) -> Iterator[None]:
        """Turn the SDK's errors while ``doing`` something into one line naming the cause."""
        try:
            yield
        except docker_errors.APIError as exc:
            raise SandboxError(f"{self.name}: {doing} failed: {_explain(exc)}") from None
        except (requests.exceptions.ConnectionError, docker_errors.DockerException) as exc:
            raise SandboxError(
                f"{self.name}: lost the Docker engine while {doing}: {_root_cause(exc)}"
            ) from None

    def _prepare(self) -> None:
        """Before the first start: the image exists (or may be pulled), the network and the
        runtime too. Reaping needs none of them."""
        options = self.options
        try:
            try:
                self.api.inspect_image(options.image)
            except docker_errors.ImageNotFound:
                if options.pull == "never":
                    raise SubstrateUnavailable(self._image_missing()) from None
                self._pull_needed = True
            except docker_errors.APIError as exc:
                if not exc.is_client_error():
                    raise
                raise ConfigError(f"{self.name}.image={options.image!r}: {_explain(exc)}") from None
            if options.network not in _BUILTIN_NETWORKS and ":" not in options.network:
                try:
                    self.api.inspect_network(options.network)
                except docker_errors.NotFound:
                    raise ConfigError(
                        f"{self.name}.network={options.network!r}: no such network on this "
                        "engine (docker network ls)"
                    ) from None
            if options.runtime is not None or options.cpus is not None:
                info = self.api.info()
                runtimes = sorted(info.get("Runtimes") or {})
                if options.runtime is not None and options.runtime not in runtimes:
                    raise SubstrateUnavailable(
                        f"{self.name}.runtime={options.runtime!r}: not installed in this engine "
                        f"(installed: {', '.join(runtimes) or 'none'})"
                    )
                ncpu = info.get("NCPU") or 0
                if options.cpus is not None and ncpu and options.cpus > ncpu:
                    raise ConfigError(
                        f"{self.name}.cpus={options.cpus:g}: the engine has only {ncpu} CPUs"
                    )
        except (docker_errors.DockerException, requests.exceptions.RequestException) as exc:
            raise SubstrateUnavailable(
                f"{self.name}: the Docker engine failed: {_root_cause(exc)}"
            ) from None

    def _image_missing(self) -> str:
        image = self.options.image
        how = (
            "build it with scripts/ensure-docker"
            if image == DEFAULT_IMAGE
            else f"build it (docker build -t {image} .) or load it"
        )
        return (
            f"{self.name}: image {image} is missing and {self.name}.pull=never; "
            f"{how}, or set {self.name}.pull=missing"
        )

    def _pull(self) -> None:
        """Pull the image once per process (the first rollout records it as phase ``pull``)."""
        with self._lock:
            if not self._pull_needed:
                return
            image = self.options.image
            try:
                for event in self.api.pull(image, stream=True, decode=True):
                    if isinstance(event, dict) and event.get("error"):
                        raise SandboxStartError(
                            f"{self.name}: pulling image {image} failed: {event['error']}"
                        )
                self.api.inspect_image(image)
            except docker_errors.DockerException as exc:
                raise SandboxStartError(
                    f"{self.name}: pulling image {image} failed: {_explain(exc)}"
                ) from None
            self._pull_needed = False

    def _file_owner(self, sandbox: DockerSandbox) -> tuple[int, int]:
        """The uid and gid files are written with: the sandbox user's (resolved once)."""
        if self._file_ids is None:
            result = sandbox._run(["sh", "-c", "id -u; id -g"], timeout=None, env=None, cwd="/")
            try:
                uid, gid = (int(line) for line in result.stdout.split())
            except ValueError:
                raise SandboxError(
                    f"{self.name}.user={self.options.user!r}: cannot resolve its uid and gid in "
                    f"the image: {result.stderr.decode('utf-8', 'replace').strip()}"
                ) from None
            self._file_ids = (uid, gid)
        return self._file_ids

    def _kill_exec(self, exec_id: str, program: str, *, group: bool) -> bool:
        """Best effort, for a step the engine did not end: kill it (its process group if
        ``group``) from this host, when the engine runs here and the PID is indeed ``program``."""
        try:
            pid = self.api.exec_inspect(exec_id).get("Pid") or 0
            if pid <= 0 or self.api.base_url != _UNIX_URL:
                return False
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:  # the same PID namespace?
                if posixpath.basename(cmdline.read().split(b"\0")[0]) != program.encode():
                    return False
            (os.killpg if group else os.kill)(pid, signal.SIGKILL)
            return True
        except (OSError, docker_errors.DockerException, requests.exceptions.RequestException):
            return False

    def _owned_by_live_process(self, owner: str | None) -> bool:
        """Whether ``owner`` (HOST:PID) is another process of this host that is still running."""
        host, _, pid_text = (owner or "").rpartition(":")
        if host != socket.gethostname() or not pid_text.isdigit():
            return False
        pid = int(pid_text)
        return pid != os.getpid() and process_alive(pid)


# -- module helpers ------------------------------------------------------------------------------


def _connect(name: str) -> docker.DockerClient:
    """A client that has answered a ping, or SubstrateUnavailable in one line saying what to do."""
    host = os.environ.get("DOCKER_HOST")
    where = f"{host} (DOCKER_HOST)" if host else f"{DEFAULT_HOST} (DOCKER_HOST is not set)"
    try:
        client = docker.from_env()
        client.ping()
    except (docker_errors.DockerException, requests.exceptions.RequestException) as exc:
        raise SubstrateUnavailable(
            f"{name}: Docker engine unreachable at {where}: {_root_cause(exc)}; "
            "run scripts/ensure-docker or set DOCKER_HOST"
        ) from None
    return client


def _exec_output(api: Any, exec_id: str, timeout: float | None) -> tuple[bytes, bytes]:
    """Start ``exec_id`` and demultiplex its stdout and stderr until it ends.

    The same single request as the SDK's ``exec_start``, but read through the HTTP response's
    own buffer (nothing read ahead with the headers can be lost) and with a deadline: the SDK's
    reader polls without one. ``timeout`` None waits as long as the command runs. Other
    transports, and an SDK without the internals this reads, get the SDK's reader instead.
    """
    sock = api.exec_start(exec_id, socket=True)
    if not _plain_socket(api.base_url):  # ssh / named-pipe transports: the SDK's reader
        return _sdk_output(sock)
    try:
        response, reader = _http_reader(sock)
    except AttributeError:  # a docker SDK or urllib3 without these internals: the SDK's reader
        return _sdk_output(sock)
    raw_socket = getattr(sock, "_sock", sock)
    deadline = None if timeout is None else time.monotonic() + timeout
    data = bytearray()
    try:
        raw_socket.settimeout(timeout)
        while chunk := reader.read1(1 << 20):
            data += chunk
            if deadline is not None:
                raw_socket.settimeout(max(deadline - time.monotonic(), 0.001))
    finally:
        response.close()
    return _demux(data)


def _http_reader(sock: Any) -> tuple[Any, Any]:
    """The HTTP response behind the SDK's exec socket and its buffered reader (private
    attributes of the docker SDK and urllib3: AttributeError if a version lacks them)."""
    response = sock._response
    return response, response.raw._fp.fp


def _sdk_output(sock: Any) -> tuple[bytes, bytes]:
    """Read an exec socket to its end with the SDK's own reader, as ``exec_start(demux=True)``
    does (no client-side deadline: only the in-container timeout ends a step)."""
    try:
        frames = (
            docker_socket.demux_adaptor(*frame) for frame in docker_socket.frames_iter(sock, False)
        )
        stdout, stderr = docker_socket.consume_socket_output(frames, demux=True)
    finally:
        response = getattr(sock, "_response", None)
        (response if response is not None else sock).close()
    return stdout or b"", stderr or b""


def _demux(data: bytes | bytearray) -> tuple[bytes, bytes]:
    """Split docker's multiplexed stream (8-byte frame headers) into stdout and stderr."""
    streams = {1: bytearray(), 2: bytearray()}
    view = memoryview(data)
    offset, end = 0, len(data)
    while offset + 8 <= end:
        kind = data[offset]
        size = int.from_bytes(data[offset + 4 : offset + 8], "big")
        streams[2 if kind == 2 else 1] += view[offset + 8 : offset + 8 + size]
        offset += 8 + size
    return bytes(streams[1]), bytes(streams[2])


def _exit_code(api: Any, exec_id: str) -> int:
    """The exit code of a finished exec; waits briefly if the engine has not recorded it yet."""
    for delay in (0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, None):
        info = api.exec_inspect(exec_id)
        if not info.get("Running") and info.get("ExitCode") is not None:
            return int(info["ExitCode"])
        if delay is not None:
            time.sleep(delay)
    raise SandboxError(f"docker: exec {exec_id[:12]} ended but has no exit code")


def _put_archive(api: Any, container_id: str, parent: str, archive: bytes) -> None:
    """The SDK's ``put_archive``, but refusing to replace a directory with a file (or the
    reverse) as the engine's ``noOverwriteDirNonDir`` does: a 400 instead of a lost tree."""
    url = f"{api.base_url}/v{api.api_version}/containers/{container_id}/archive"
    params = {"path": parent, "noOverwriteDirNonDir": "true"}
    response = api.put(url, params=params, data=archive, timeout=api.timeout)
    try:
        response.raise_for_status()
    except requests.exceptions.HTTPError as exc:
        docker_errors.create_api_error_from_http_exception(exc)  # raises the SDK's APIError


def _single_file_tar(name: str, data: bytes, uid: int, gid: int) -> bytes:
    """An uncompressed tar holding one regular file (PAX, so any UTF-8 name fits)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    info.uid, info.gid = uid, gid
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _numeric_ids(user: str | None) -> tuple[int, int] | None:
    """``None`` (root) -> (0, 0); ``"1000:1000"`` -> (1000, 1000); a name -> None (ask)."""
    if user is None:
        return (0, 0)
    uid, _, gid = user.partition(":")
    return (int(uid), int(gid)) if uid.isdigit() and gid.isdigit() else None


def _os_error(exc: docker_errors.APIError, path: str) -> OSError:
    code = {403: errno.EACCES, 404: errno.ENOENT, 400: errno.EINVAL}.get(exc.status_code or 0)
    return OSError(code or errno.EIO, _explain(exc), path)


def _explain(exc: BaseException) -> str:
    """The engine's own message (without the request URL), on one line."""
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _root_cause(exc: BaseException) -> str:
    """The OS-level reason somewhere in an exception (e.g. 'No such file or directory')."""
    stack, seen = [exc], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
        # requests wraps urllib3's error, which wraps the OSError, in args or reason
        nested = [*current.args, getattr(current, "reason", None)]
        nested += [current.__cause__, current.__context__]
        stack.extend(item for item in nested if isinstance(item, BaseException))
    return _explain(exc)


def _plain_socket(base_url: str) -> bool:
    """Whether the client talks HTTP over a plain unix or TCP (TLS) socket."""
    return base_url == _UNIX_URL or base_url.startswith(("http://", "https://"))
