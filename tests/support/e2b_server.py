"""A local stand-in for the E2B service, for the e2b substrate's tests (test infrastructure).

It speaks the protocol of the pinned ``e2b`` SDK to the unmodified SDK, reached through the
SDK's own knobs (``E2B_API_URL`` and ``E2B_SANDBOX_URL`` both point at it):

- the REST control plane: ``POST /v2/sandboxes``, ``GET /v2/sandboxes`` (metadata filter,
  ``x-next-token`` pages), ``DELETE /sandboxes/{id}``, authenticated by ``X-API-Key``; request
  and response bodies go through the SDK's own generated models;
- ``envd``, the agent inside each sandbox: Connect-RPC with the JSON codec through the SDK's own
  generated server stub (``ProcessASGIApplication``): ``process.Process/Start`` streams
  start/data/end events, ``SendSignal`` kills, ``List``; plain HTTP ``/files`` and ``/health``.
  Every sandbox is routed by the ``E2b-Sandbox-Id`` header the SDK sends, and must present its
  ``X-Access-Token``.

So a new SDK version whose protocol drifted fails these tests loudly. Every sandbox is a real
docker container (``init``, no network, labelled for cleanup), so commands run isolated, as
envd's default user ``user`` in ``/home/user``: each template is the sandbox image plus that
user and ``python``, as E2B's ``base`` template has. Its timings are docker's on this
machine, never E2B's.

Faults on request: the key :data:`FORBIDDEN_KEY` gets 403 and any key but the server's 401;
metadata ``{FAULT_KEY: "429"}`` gets a 429 (``Retry-After: 0``, so the SDK retries at once); a
template other than those configured gets 404; :meth:`StandInE2B.expire` ends a sandbox's life.
:attr:`StandInE2B.creates_per_second` limits sandbox creations as E2B's API does: beyond it a
create gets 429 (``Retry-After: 1``).

Standalone (for ``pytest example_suite --substrate=e2b`` by hand)::

    PYTHONPATH=tests python -m support.e2b_server --port 3999  # prints the variables to export
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import io
import posixpath
import secrets
import signal
import sys
import tarfile
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

import docker
import docker.errors
import pytest
from aiohttp import web
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.api.client.models import Error, ListedSandbox, NewSandboxV2, SandboxState
from e2b.api.client.models import Sandbox as CreatedSandbox
from e2b.envd.client_shared import ENVD_JSON_CODEC
from e2b.envd.filesystem import filesystem_connect
from e2b.envd.process import process_connect, process_pb
from protobuf import Oneof

from pytest_rollout_tax.errors import SandboxError
from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from pytest_rollout_tax.substrates.docker.archive import link_target, put_archive
from support.docker_exec import STDERR, STDOUT, frames, run
from support.docker_exec import exit_code as exited

#: The envd version the stand-in claims; the SDK picks protocol features by it.
ENVD_VERSION = "0.6.4"
#: The sandbox user (envd's default user) and its home: the default cwd, where relative file
#: paths resolve. Each template image is derived from its docker image by :data:`TEMPLATE`.
USER, UID, HOME = "user", 1000, "/home/user"
#: What E2B's ``base`` template offers on top of a plain image: the user and ``python``.
TEMPLATE = f"""\
FROM {{image}}
RUN useradd --create-home --uid {UID} --shell /bin/bash {USER} \\
 && {{{{ command -v python >/dev/null || ln -s python3 /usr/bin/python; }}}}
USER {USER}
WORKDIR {HOME}
"""
#: A key the stand-in answers with 403 (a valid key without access).
FORBIDDEN_KEY = "e2b_standin_forbidden_key"
#: Sandbox metadata that makes the create request fail: value "429" (rate limit / quota).
FAULT_KEY = "e2b-standin/fault"
#: Docker label on every container the stand-in runs (value: the server's instance id).
CONTAINER_LABEL = "rollout-tax.e2b-standin"
KEEPALIVE_HEADER = "keepalive-ping-interval"

#: The process event each of the exec's streams becomes.
_EVENT = {STDOUT: "stdout", STDERR: "stderr"}
#: Runs in the container before the command: check the cwd, report the pid, exec the command.
#: The first stderr line is the pid (or ``nocwd``); the exec'd process leads its own session,
#: so ``kill -9 -PID`` ends the command and everything it spawned.
_LAUNCHER = 'cd "$1" 2>/dev/null || { echo nocwd >&2; exit 1; }; shift; echo "$$" >&2; exec "$@"'


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _error(status: int, message: str, **headers: str) -> web.Response:
    """An E2B API error body (the SDK's ``Error`` model)."""
    return web.json_response(
        Error(code=status, message=message).to_dict(), status=status, headers=headers
    )


# -- sandboxes and their processes ---------------------------------------------------------------


@dataclass
class Process:
    """One command started through ``process.Process/Start``."""

    pid: int
    config: process_pb.ProcessConfig
    events: asyncio.Queue[tuple[str, Any]]
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    signalled: bool = False


@dataclass
class StandInSandbox:
    """One sandbox: its container and what the API and envd know about it."""

    sandbox_id: str
    template_id: str
    container: Any
    metadata: dict[str, str]
    env_vars: dict[str, str]
    access_token: str
    timeout_s: int
    started_at: dt.datetime
    end_at: dt.datetime
    processes: dict[int, Process] = field(default_factory=dict)
    expiry: asyncio.TimerHandle | None = None

    def listed(self) -> ListedSandbox:
        return ListedSandbox(
            template_id=self.template_id,
            sandbox_id=self.sandbox_id,
            client_id="standin",
            started_at=self.started_at,
            end_at=self.end_at,
            cpu_count=2,
            memory_mb=512,
            disk_size_mb=1024,
            state=SandboxState.RUNNING,
            envd_version=ENVD_VERSION,
            alias=self.template_id,
            metadata=dict(self.metadata),
        )


class StandInE2B:
    """The stand-in server: REST control plane and envd on one loopback port, in a thread."""

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        templates: Mapping[str, str] | None = None,
    ) -> None:
        self.api_key = api_key or f"e2b_standin_{secrets.token_hex(16)}"
        self.host = host
        self.port = port
        #: Template name -> the docker image its template image derives from (:data:`TEMPLATE`).
        self.templates = dict(templates or {"base": image})
        self._images: dict[str, str] = {}
        self.instance_id = secrets.token_hex(6)
        #: Requests served, by ``METHOD route``, e.g. ``POST /v2/sandboxes``.
        self.requests: Counter[str] = Counter()
        #: Seconds a started process's start event is held back (a slow edge, for tests).
        self.start_event_delay_s = 0.0
        #: Seconds a create's answer is held back once its sandbox exists (a late create).
        self.create_answer_delay_s = 0.0
        #: Sandbox creations accepted per second (sliding one-second window); beyond it a
        #: create gets 429, as E2B's rate limit answers. None: no limit.
        self.creates_per_second: int | None = None
        self._creates: deque[float] = deque()
        #: Creates answered with 429 by that limit.
        self.rate_limited = 0
        self._sandboxes: dict[str, StandInSandbox] = {}
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        process_app = process_connect.ProcessASGIApplication(
            _ProcessService(self), codecs=[ENVD_JSON_CODEC]
        )
        filesystem_app = filesystem_connect.FilesystemASGIApplication(
            _FilesystemService(), codecs=[ENVD_JSON_CODEC]
        )
        self._rpc_apps = {process_app.path: process_app, filesystem_app.path: filesystem_app}

    # -- life cycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the e2b substrate) here."""
        return {"E2B_API_URL": self.url, "E2B_SANDBOX_URL": self.url, "E2B_API_KEY": self.api_key}

    def start(self) -> StandInE2B:
        """Serve in a background thread; return once the port is bound."""
        self._docker = docker.from_env(max_pool_size=32)
        self._images = {name: self._build(image) for name, image in self.templates.items()}
        ready: dict[str, Any] = {}
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.set_default_executor(ThreadPoolExecutor(16, thread_name_prefix="e2b-standin"))
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                ready["error"] = exc
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=serve, name="e2b-standin", daemon=True)
        self._thread.start()
        started.wait()
        if "error" in ready:
            raise ready["error"]
        return self

    def _build(self, image: str) -> str:
        """The template image derived from ``image`` (built once, then docker's cache)."""
        assert self._docker is not None
        base = self._docker.images.get(image)  # never pull: a missing image is an error
        recipe = TEMPLATE.format(image=image)
        digest = hashlib.sha256(f"{base.id}\n{recipe}".encode()).hexdigest()[:12]
        tag = f"rollout-tax/e2b-standin-template:{digest}"
        with contextlib.suppress(docker.errors.ImageNotFound):
            return self._docker.images.get(tag).id
        built, _ = self._docker.images.build(
            fileobj=io.BytesIO(recipe.encode()), tag=tag, rm=True, forcerm=True, pull=False
        )
        return built.id

    def stop(self) -> None:
        """Kill every sandbox, close the port and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(60)
        if self._docker is not None:
            for container in self._docker.containers.list(
                all=True, sparse=True, filters={"label": f"{CONTAINER_LABEL}={self.instance_id}"}
            ):
                with contextlib.suppress(docker.errors.APIError):
                    container.remove(force=True)
            self._docker.close()

    def __enter__(self) -> StandInE2B:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _listen(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v2/sandboxes", self._create)
        app.router.add_get("/v2/sandboxes", self._list)
        app.router.add_delete("/sandboxes/{sandbox_id}", self._kill)
        app.router.add_get("/health", self._health)
        app.router.add_get("/files", self._read_file)
        app.router.add_post("/files", self._write_files)
        app.router.add_post("/{service:process.Process|filesystem.Filesystem}/{method}", self._rpc)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        await asyncio.gather(
            *(self._remove(sid) for sid in list(self._sandboxes)), return_exceptions=True
        )
        if self._runner is not None:
            await self._runner.cleanup()

    # -- test helpers (thread-safe) -------------------------------------------------------------

    def sandboxes(self) -> list[StandInSandbox]:
        """The live sandboxes, oldest first."""
        return self._call(self._snapshot)

    def expire(self, sandbox_id: str) -> None:
        """End a sandbox's life now, as its lifetime (``timeout``) running out would."""
        self._call(lambda: self._remove(sandbox_id))

    async def _snapshot(self) -> list[StandInSandbox]:
        return sorted(self._sandboxes.values(), key=lambda s: s.started_at)

    def _call(self, make: Callable[[], Awaitable[Any]]) -> Any:
        assert self._loop is not None, "the stand-in is not running"

        async def run() -> Any:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(60)

    # -- the REST control plane ------------------------------------------------------------------

    def _authorize(self, request: web.Request) -> web.Response | None:
        self.requests[f"{request.method} {request.match_info.route.resource.canonical}"] += 1
        key = request.headers.get("X-API-Key")
        if key == FORBIDDEN_KEY:
            return _error(403, "this team has no access to sandboxes")
        if key != self.api_key:
            return _error(401, "Invalid API key")
        return None

    async def _create(self, request: web.Request) -> web.Response:
        if denied := self._authorize(request):
            return denied
        spec = NewSandboxV2.from_dict(await request.json())
        metadata = dict(spec.metadata) if isinstance(spec.metadata, dict) else {}
        env_vars = dict(spec.env_vars) if isinstance(spec.env_vars, dict) else {}
        if metadata.get(FAULT_KEY) == "429":
            return _error(
                429, "rate limit exceeded: too many concurrent sandboxes", **{"Retry-After": "0"}
            )
        if self._over_rate_limit():
            return _error(
                429,
                f"rate limit exceeded: {self.creates_per_second} sandbox creations per second",
                **{"Retry-After": "1"},
            )
        image = self._images.get(spec.template_id)
        if image is None:
            return _error(404, f"template '{spec.template_id}' not found")
        timeout_s = spec.timeout if isinstance(spec.timeout, int) else 300
        sandbox_id = f"i{secrets.token_hex(10)}"
        assert self._docker is not None
        container = await asyncio.to_thread(
            self._docker.containers.run,
            image,
            ["sleep", "infinity"],
            detach=True,
            init=True,
            network_mode="none",
            working_dir=HOME,
            hostname=sandbox_id[:12],
            name=f"e2b-standin-{sandbox_id}",
            labels={CONTAINER_LABEL: self.instance_id, "e2b.sandbox_id": sandbox_id},
        )
        started = _now()
        sandbox = StandInSandbox(
            sandbox_id=sandbox_id,
            template_id=spec.template_id,
            container=container,
            metadata=metadata,
            env_vars=env_vars,
            access_token=secrets.token_urlsafe(24),
            timeout_s=timeout_s,
            started_at=started,
            end_at=started + dt.timedelta(seconds=timeout_s),
        )
        loop = asyncio.get_running_loop()
        sandbox.expiry = loop.call_later(
            timeout_s, lambda: loop.create_task(self._remove(sandbox_id))
        )
        self._sandboxes[sandbox_id] = sandbox
        if self.create_answer_delay_s:  # the sandbox is listed, its create not yet answered
            await asyncio.sleep(self.create_answer_delay_s)
        body = CreatedSandbox(
            template_id=spec.template_id,
            sandbox_id=sandbox_id,
            client_id="standin",
            envd_version=ENVD_VERSION,
            alias=spec.template_id,
            envd_access_token=sandbox.access_token,
        )
        return web.json_response(body.to_dict(), status=201)

    def _over_rate_limit(self) -> bool:
        """Whether a create now exceeds :attr:`creates_per_second` (else it is counted)."""
        if self.creates_per_second is None:
            return False
        now = time.monotonic()
        while self._creates and self._creates[0] <= now - 1.0:
            self._creates.popleft()
        if len(self._creates) >= self.creates_per_second:
            self.rate_limited += 1
            return True
        self._creates.append(now)
        return False

    async def _list(self, request: web.Request) -> web.Response:
        if denied := self._authorize(request):
            return denied
        wanted = {unquote(k): unquote(v) for k, v in parse_qsl(request.query.get("metadata", ""))}
        states = set(filter(None, request.query.get("state", "").split(",")))
        matching = [
            s
            for s in await self._snapshot()
            if all(s.metadata.get(k) == v for k, v in wanted.items())
            and (not states or SandboxState.RUNNING.value in states)
        ]
        start = int(request.query.get("nextToken") or 0)
        limit = int(request.query.get("limit") or 100)
        page = matching[start : start + limit]
        headers = {}
        if start + limit < len(matching):
            headers["x-next-token"] = str(start + limit)
        return web.json_response([s.listed().to_dict() for s in page], headers=headers)

    async def _kill(self, request: web.Request) -> web.Response:
        if denied := self._authorize(request):
            return denied
        sandbox_id = request.match_info["sandbox_id"]
        if sandbox_id not in self._sandboxes:
            return _error(404, f"sandbox '{sandbox_id}' not found")
        await self._remove(sandbox_id)
        return web.Response(status=204)

    async def _remove(self, sandbox_id: str) -> None:
        sandbox = self._sandboxes.pop(sandbox_id, None)
        if sandbox is None:
            return
        if sandbox.expiry is not None:
            sandbox.expiry.cancel()
        with contextlib.suppress(docker.errors.NotFound):
            await asyncio.to_thread(sandbox.container.remove, force=True)

    # -- envd ------------------------------------------------------------------------------------

    def _envd_sandbox(self, headers: Mapping[str, str]) -> StandInSandbox | web.Response:
        """The sandbox an envd request is for, or the answer the E2B edge/envd would give."""
        sandbox_id = headers.get("E2b-Sandbox-Id", "")
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None:
            return _error(502, f"The sandbox {sandbox_id} was not found")
        if headers.get("X-Access-Token") != sandbox.access_token:
            return _error(401, "unauthorized access, please provide a valid access token")
        return sandbox

    async def _health(self, request: web.Request) -> web.Response:
        sandbox = self._envd_sandbox(request.headers)
        return sandbox if isinstance(sandbox, web.Response) else web.Response(status=204)

    async def _read_file(self, request: web.Request) -> web.Response:
        sandbox = self._envd_sandbox(request.headers)
        if isinstance(sandbox, web.Response):
            return sandbox
        path = posixpath.join(HOME, request.query.get("path", ""))
        if path.startswith(("/proc/", "/sys/")):  # the archive API cannot copy them
            cat = await asyncio.to_thread(run, sandbox.container, ["cat", path])
            if cat.exit_code != 0:
                return _error(404, f"path '{path}' does not exist")
            return web.Response(body=cat.stdout, content_type="application/octet-stream")
        for _ in range(8):  # follow symbolic links, as envd's open() does
            try:
                stream, stat = await asyncio.to_thread(sandbox.container.get_archive, path)
            except docker.errors.NotFound:
                return _error(404, f"path '{path}' does not exist")
            except docker.errors.APIError as exc:  # e.g. a file where a directory is needed
                return _error(400, f"cannot read '{path}': {exc.explanation}")
            if stat["mode"] & (1 << 31):  # Go's os.ModeDir
                return _error(400, f"path '{path}' is a directory")
            if not stat.get("linkTarget"):
                break
            path = posixpath.join(posixpath.dirname(path), stat["linkTarget"])
        if stat["mode"] & _NOT_REGULAR:
            return _error(400, f"path '{path}' is not a regular file")
        archive = await asyncio.to_thread(lambda: b"".join(stream))
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member is not None else None
            data = extracted.read() if extracted is not None else b""
        return web.Response(body=data, content_type="application/octet-stream")

    async def _write_files(self, request: web.Request) -> web.Response:
        sandbox = self._envd_sandbox(request.headers)
        if isinstance(sandbox, web.Response):
            return sandbox
        target = request.query.get("path")
        uid = 0 if request.query.get("username") == "root" else UID
        files: list[tuple[str, bytes]] = []
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if getattr(part, "name", None) == "file":
                    data = await part.read()  # type: ignore[union-attr]
                    files.append((target or part.filename or "", bytes(data)))  # type: ignore[union-attr]
        else:  # application/octet-stream; aiohttp undoes a gzip Content-Encoding
            files.append((target or "", await request.read()))
        if not files or not all(path for path, _ in files):
            return _error(400, "no file, or no path for it")
        buffer = io.BytesIO()
        written = []
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path, data in files:
                absolute = posixpath.normpath(posixpath.join(HOME, path))
                # as envd's open(2) writes: through a symbolic link
                api, container_id = sandbox.container.client.api, sandbox.container.id
                absolute = (
                    await asyncio.to_thread(link_target, api, container_id, absolute) or absolute
                )
                # envd creates missing parents as the user; docker would make them root's, so
                # the directories below the home go in the archive (mode 755, the user's).
                parent = posixpath.dirname(absolute)
                below_home = (
                    parent[len(HOME) + 1 :].split("/") if parent.startswith(HOME + "/") else []
                )
                for depth in range(1, len(below_home) + 1):
                    directory = posixpath.join(HOME, *below_home[:depth])
                    tar.addfile(_tar_entry(directory, uid, tarfile.DIRTYPE, 0o755))
                entry = _tar_entry(absolute, uid, tarfile.REGTYPE, 0o644)
                entry.size = len(data)
                tar.addfile(entry, io.BytesIO(data))
                written.append(
                    {"name": posixpath.basename(absolute), "type": "file", "path": absolute}
                )
        try:
            # as envd's open(2) writes: never a directory replaced by a file, nor the reverse
            container = sandbox.container
            tar = buffer.getvalue()
            await asyncio.to_thread(put_archive, container.client.api, container.id, "/", tar)
        except docker.errors.APIError as exc:
            return _error(400, f"cannot write {', '.join(p for p, _ in files)}: {exc.explanation}")
        return web.json_response(written)

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        """Connect-RPC through the SDK's own generated ASGI applications."""
        sandbox = self._envd_sandbox(request.headers)
        if isinstance(sandbox, web.Response):
            return sandbox
        app = self._rpc_apps[f"/{request.match_info['service']}"]
        return await _serve_asgi(app, request)

    def sandbox_for(self, headers: Mapping[str, str]) -> StandInSandbox:
        """The sandbox of an RPC that :meth:`_rpc` has already let through."""
        sandbox = self._envd_sandbox(headers)
        if isinstance(sandbox, web.Response):
            raise ConnectError(Code.UNAVAILABLE, "the sandbox was not found")
        return sandbox


#: Go's os.FileMode bits of what is not a regular file: named pipe, socket, device, char device.
_NOT_REGULAR = (1 << 25) | (1 << 24) | (1 << 26) | (1 << 21)


def _tar_entry(path: str, uid: int, kind: bytes, mode: int) -> tarfile.TarInfo:
    entry = tarfile.TarInfo(path.lstrip("/"))
    entry.type, entry.mode, entry.mtime, entry.uid, entry.gid = kind, mode, time.time(), uid, uid
    return entry


async def _serve_asgi(app: Any, request: web.Request) -> web.StreamResponse:
    """Run one request through an ASGI application on aiohttp (HTTP/1.1, streamed body)."""
    body = await request.read()
    disconnected: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    consumed = False
    response: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal consumed
        if not consumed:
            consumed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await asyncio.shield(disconnected)

    async def send(message: dict[str, Any]) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for key, value in message.get("headers", ()):
                response.headers.add(key.decode("latin-1"), value.decode("latin-1"))
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            if message.get("body"):
                await response.write(message["body"])
            if not message.get("more_body", False):
                await response.write_eof()

    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": request.path,
        "raw_path": request.raw_path.encode(),
        "query_string": request.query_string.encode(),
        "root_path": "",
        "headers": [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()
        ],
        "client": tuple(peer[:2]) if peer else None,
        "server": None,
        "extensions": {},
    }
    try:
        await app(scope, receive, send)
    except (ConnectionError, asyncio.CancelledError):
        pass  # the client went away (e.g. its deadline passed): nothing left to answer
    finally:
        if not disconnected.done():
            disconnected.set_result({"type": "http.disconnect"})
    return response if response is not None else web.Response(status=500)


# -- envd's RPC services -----------------------------------------------------------------------


def _event(event: Oneof[str, Any]) -> process_pb.StartResponse:
    return process_pb.StartResponse(event=process_pb.ProcessEvent(event=event))


class _ProcessService(process_connect.Process):
    """``process.Process``: each command is a ``docker exec`` in the sandbox's container."""

    def __init__(self, server: StandInE2B) -> None:
        self.server = server

    async def start(
        self, request: process_pb.StartRequest, ctx: Any
    ) -> AsyncIterator[process_pb.StartResponse]:
        sandbox = self.server.sandbox_for(ctx.request_headers)
        config = request.process or process_pb.ProcessConfig()
        process = await _spawn(self.server, sandbox, config, _user(ctx.request_headers))
        PE = process_pb.ProcessEvent
        if self.server.start_event_delay_s:
            await asyncio.sleep(self.server.start_event_delay_s)
        yield _event(Oneof("start", PE.StartEvent(pid=process.pid)))
        keepalive = float(ctx.request_headers.get(KEEPALIVE_HEADER) or 0) or None
        while True:
            try:
                kind, value = await asyncio.wait_for(process.events.get(), keepalive)
            except TimeoutError:
                yield _event(Oneof("keepalive", PE.KeepAlive()))
                continue
            if kind in ("stdout", "stderr"):
                yield _event(Oneof("data", PE.DataEvent(output=Oneof(kind, value))))
            elif kind == "gone":
                raise ConnectError(Code.UNAVAILABLE, f"The sandbox {value} was not found")
            else:
                if process.signalled:
                    end = PE.EndEvent(exit_code=-1, exited=False, status="signal: killed")
                else:
                    end = PE.EndEvent(exit_code=value, exited=True, status=f"exit status {value}")
                yield _event(Oneof("end", end))
                return

    async def send_signal(
        self, request: process_pb.SendSignalRequest, ctx: Any
    ) -> process_pb.SendSignalResponse:
        sandbox = self.server.sandbox_for(ctx.request_headers)
        selector = request.process.selector if request.process else None
        pid = selector.value if selector is not None and selector.field == "pid" else None
        process = sandbox.processes.get(pid) if isinstance(pid, int) else None
        if process is None:
            raise ConnectError(Code.NOT_FOUND, f"process with pid {pid} not found")
        number = 9 if request.signal == process_pb.Signal.SIGKILL else 15
        process.signalled = True
        await asyncio.to_thread(
            sandbox.container.exec_run,
            ["sh", "-c", f"kill -{number} -{process.pid}"],
            user="root",
        )
        # envd answers once the signal is sent; the stand-in also waits for the exit, so a test
        # that looks right after a kill sees the process gone, not a race.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.finished.wait(), 10)
        return process_pb.SendSignalResponse()

    async def list(self, request: process_pb.ListRequest, ctx: Any) -> process_pb.ListResponse:
        sandbox = self.server.sandbox_for(ctx.request_headers)
        return process_pb.ListResponse(
            processes=[
                process_pb.ProcessInfo(config=p.config, pid=p.pid)
                for p in sandbox.processes.values()
            ]
        )


class _FilesystemService(filesystem_connect.Filesystem):
    """``filesystem.Filesystem``: mounted so its methods answer UNIMPLEMENTED, as stubs do."""


def _user(headers: Mapping[str, str]) -> str:
    """The user a request runs as: ``Authorization: Basic base64(user:)``, else envd's default."""
    scheme, _, encoded = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic" and encoded:
        return base64.b64decode(encoded).decode().partition(":")[0] or USER
    return USER


async def _spawn(
    server: StandInE2B, sandbox: StandInSandbox, config: process_pb.ProcessConfig, user: str
) -> Process:
    """Start ``config`` in the sandbox; return once it runs (its pid known and registered)."""
    assert server._docker is not None
    api = server._docker.api
    cwd = posixpath.join(HOME, config.cwd) if config.has_field("cwd") else HOME
    envs = {**sandbox.env_vars, **dict(config.envs)}
    argv = ["sh", "-c", _LAUNCHER, "envd", cwd, config.cmd, *config.args]
    try:
        exec_id = (
            await asyncio.to_thread(
                api.exec_create,
                sandbox.container.id,
                argv,
                stdout=True,
                stderr=True,
                environment=[f"{k}={v}" for k, v in envs.items()],
                workdir="/",
                user=user,
            )
        )["Id"]
    except docker.errors.NotFound:
        raise ConnectError(
            Code.UNAVAILABLE, f"The sandbox {sandbox.sandbox_id} was not found"
        ) from None
    loop = asyncio.get_running_loop()
    started: asyncio.Future[int] = loop.create_future()
    process = Process(pid=0, config=config, events=asyncio.Queue())

    def on_loop(callback: Callable[..., None], *args: Any) -> None:
        loop.call_soon_threadsafe(callback, *args)

    def running(pid: int) -> None:  # on the loop
        if not started.done():
            process.pid = pid
            sandbox.processes[pid] = process
            started.set_result(pid)

    def failed(error: ConnectError) -> None:  # on the loop
        if not started.done():
            started.set_exception(error)

    def finished() -> None:  # on the loop, after the last event was queued
        sandbox.processes.pop(process.pid, None)
        process.finished.set()

    def pump() -> None:
        """Relay the exec's output; the first stderr line is the launcher's pid report."""
        pid = None
        held: list[bytes] = []
        head = b""
        exit_code: int | None = None
        try:
            for kind, data in frames(api.exec_start(exec_id, socket=True)):
                if pid is None:
                    if kind == STDOUT:
                        held.append(data)
                        continue
                    head += data
                    if b"\n" not in head:
                        continue
                    line, _, data = head.partition(b"\n")
                    if line == b"nocwd":
                        error = ConnectError(Code.INVALID_ARGUMENT, f"cwd '{cwd}' does not exist")
                        on_loop(failed, error)
                        return
                    pid = int(line)
                    on_loop(running, pid)
                    for chunk in held:
                        on_loop(process.events.put_nowait, ("stdout", chunk))
                if data:
                    on_loop(process.events.put_nowait, (_EVENT[kind], data))
            exit_code = exited(api, exec_id)
        except (docker.errors.APIError, OSError, ValueError, SandboxError):
            pass  # the container went away under the command
        finally:
            gone = ConnectError(Code.UNAVAILABLE, f"The sandbox {sandbox.sandbox_id} was not found")
            on_loop(failed, gone)
            last = ("gone", sandbox.sandbox_id) if exit_code is None else ("end", exit_code)
            on_loop(process.events.put_nowait, last)
            on_loop(finished)

    threading.Thread(target=pump, name=f"envd-{sandbox.sandbox_id}", daemon=True).start()
    await started
    return process


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def e2b_server(docker_client, sandbox_image) -> Iterator[StandInE2B]:
    """The stand-in E2B service for this test process (one per xdist worker)."""
    with StandInE2B(image=sandbox_image) as server:
        yield server


@pytest.fixture
def e2b_env(e2b_server: StandInE2B, monkeypatch: pytest.MonkeyPatch) -> StandInE2B:
    """Point the E2B SDK at the stand-in through its own environment variables."""
    for name in ("E2B_DEBUG", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in e2b_server.env().items():
        monkeypatch.setenv(name, value)
    return e2b_server


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3999)
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="docker image of template 'base'")
    parser.add_argument("--api-key", help="the key to accept (default: a random one)")
    parser.add_argument(
        "--template", action="append", default=[], metavar="NAME=IMAGE", help="more templates"
    )
    args = parser.parse_args(argv)
    templates = {"base": args.image} | dict(t.split("=", 1) for t in args.template)
    server = StandInE2B(
        image=args.image, api_key=args.api_key, host=args.host, port=args.port, templates=templates
    )
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(f"# e2b stand-in on {server.url} (docker-backed; not E2B's timings). Ctrl-C stops.")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
