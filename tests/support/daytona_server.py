"""A local stand-in for the Daytona service, for the daytona substrate's tests.

It speaks the REST protocol of the pinned ``daytona`` SDK to the unmodified SDK, reached through
the SDK's own ``DAYTONA_API_URL`` (``<url>/api``):

- the control plane: ``POST /api/sandbox``, ``GET /api/sandbox`` (label filter, one page),
  ``GET|DELETE /api/sandbox/{id}``, authenticated by ``Authorization: Bearer <key>``; request
  and response bodies go through the SDK's own generated models (``daytona_api_client``);
- the toolbox of each sandbox, at the ``toolboxProxyUrl`` every sandbox names
  (``<url>/toolbox/{id}``): ``POST /process/execute`` (stdout and stderr merged into
  ``result``), ``POST /process/session``, ``POST /process/session/{sid}/exec``,
  ``DELETE /process/session/{sid}``, ``POST /files/bulk-upload`` (multipart) and
  ``POST /files/bulk-download`` (a multipart answer), through ``daytona_toolbox_api_client``'s
  models;
- the events gateway (``/api/socket.io/``) is refused on purpose (404), so the SDK polls a
  sandbox's state, every 0.1 s, as it does whenever that gateway is unreachable.

Any other call is answered 501 with a body naming it, and counted in
:attr:`StandInDaytona.unknown`: the fixture fails the test that made it, so a new SDK whose
protocol drifted fails loudly. Every sandbox is a real docker container (``init``, no network,
labelled for cleanup) that starts after the create is accepted (state ``starting``, then
``started``), so commands really run; a session holds no shell here (each of its commands is a
``docker exec``). Its timings are docker's on this machine, never Daytona's.

Faults on request: any key but the server's gets 401; a snapshot other than those configured
gets 404; :attr:`StandInDaytona.creates_per_second` limits creates as Daytona's API does: beyond
it a create gets 429 with the service's message.

Standalone (for ``pytest example_suite --substrate=daytona`` by hand)::

    PYTHONPATH=tests python -m support.daytona_server --port 3998  # prints the variables to export
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import posixpath
import secrets
import signal
import sys
import tarfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import docker
import docker.errors
import pytest
from aiohttp import MultipartWriter, web
from daytona_api_client import CreateSandbox, ListSandboxesResponse, SandboxListItem
from daytona_api_client import Sandbox as SandboxDto
from daytona_toolbox_api_client import (
    CreateSessionRequest,
    ExecuteRequest,
    ExecuteResponse,
    FilesDownloadRequest,
    SessionExecuteRequest,
    SessionExecuteResponse,
)

from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from support.docker_exec import Ran, run

#: Docker label on every container the stand-in runs (value: the server's instance id).
CONTAINER_LABEL = "rollout-tax.daytona-standin"
#: The snapshot name a create without one gets (the organisation's default).
DEFAULT_SNAPSHOT = "daytona-default"
ORGANIZATION = "rollout-tax-standin"


def _error(status: int, message: str) -> web.Response:
    """A Daytona API error body, as the SDK reads it."""
    return web.json_response(
        {"statusCode": status, "message": message, "error": web.HTTPException.__name__},
        status=status,
    )


@dataclass
class StandInSandbox:
    id: str
    labels: dict[str, str]
    env: dict[str, str]
    snapshot: str
    image: str
    target: str
    state: str = "starting"
    container: Any = None
    started_at: float = field(default_factory=time.monotonic)


class StandInDaytona:
    """The stand-in server: control plane and toolbox on one loopback port, in a thread."""

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        snapshots: Mapping[str, str] | None = None,
    ) -> None:
        self.api_key = api_key or f"dtn_standin_{secrets.token_hex(16)}"
        self.host, self.port = host, port
        #: Snapshot name -> the docker image its sandboxes run.
        self.snapshots = dict(snapshots or {DEFAULT_SNAPSHOT: image})
        self.instance_id = secrets.token_hex(6)
        #: Requests served, by ``METHOD route``, e.g. ``POST /api/sandbox``.
        self.requests: Counter[str] = Counter()
        #: Calls the stand-in does not know, as ``METHOD path``: a protocol drift.
        self.unknown: list[str] = []
        #: Sandbox creations accepted per second (a token bucket holding a second's worth);
        #: beyond it a create gets 429, as Daytona's rate limit answers. None: no limit.
        self.creates_per_second: float | None = None
        #: Creates the bucket holds (None: a second's worth).
        self.creates_burst: float | None = None
        self._bucket: tuple[float, float] | None = None
        self.rate_limited = 0
        #: Seconds a create's answer is held back once its sandbox exists (a late create).
        self.create_answer_delay_s = 0.0
        self._sandboxes: dict[str, StandInSandbox] = {}
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the daytona substrate) here."""
        return {"DAYTONA_API_URL": f"{self.url}/api", "DAYTONA_API_KEY": self.api_key}

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> StandInDaytona:
        """Serve in a background thread; return once the port is bound."""
        self._docker = docker.from_env(max_pool_size=32)
        for image in self.snapshots.values():
            self._docker.images.get(image)  # never pull: a missing image is an error
        ready: dict[str, Any] = {}
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.set_default_executor(ThreadPoolExecutor(16, thread_name_prefix="daytona-standin"))
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                ready["error"] = exc
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="daytona-standin", daemon=True)
        self._thread.start()
        started.wait()
        if "error" in ready:
            raise ready["error"]
        return self

    def stop(self) -> None:
        """Close the port, join the thread and remove every container."""
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

    def __enter__(self) -> StandInDaytona:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def limit_creates(self, per_second: float | None, burst: float | None = None) -> None:
        """Answer 429 to creates beyond ``per_second`` (None: no limit), from now on, with a
        bucket of ``burst`` creates (default: a second's worth)."""
        self.creates_per_second, self._bucket, self.rate_limited = per_second, None, 0
        self.creates_burst = burst

    def sandboxes(self) -> list[StandInSandbox]:
        """The live sandboxes, oldest first."""
        return sorted(self._sandboxes.values(), key=lambda s: s.started_at)

    async def _listen(self) -> None:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._count])
        add = app.router.add_route
        add("POST", "/api/sandbox", self._create)
        add("GET", "/api/sandbox", self._list)
        add("GET", "/api/sandbox/{sandbox_id}", self._get)
        add("DELETE", "/api/sandbox/{sandbox_id}", self._delete)
        add("*", "/api/socket.io/", self._no_events)
        toolbox = "/toolbox/{sandbox_id}"
        add("POST", f"{toolbox}/process/execute", self._execute)
        add("POST", f"{toolbox}/process/session", self._create_session)
        add("POST", f"{toolbox}/process/session/{{session_id}}/exec", self._session_exec)
        add("DELETE", f"{toolbox}/process/session/{{session_id}}", self._delete_session)
        add("POST", f"{toolbox}/files/bulk-upload", self._upload)
        add("POST", f"{toolbox}/files/bulk-download", self._download)
        add("*", "/{tail:.*}", self._unknown)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    @web.middleware
    async def _count(self, request: web.Request, handler: Any) -> web.StreamResponse:
        route = request.match_info.route.resource
        canonical = route.canonical if route is not None else request.path
        self.requests[f"{request.method} {canonical}"] += 1
        if handler not in (self._unknown, self._no_events):
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.api_key}":
                return _error(401, "Invalid API key")
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        call = f"{request.method} {request.path}"
        self.unknown.append(call)
        return _error(501, f"the Daytona stand-in does not know the call {call}")

    async def _no_events(self, request: web.Request) -> web.Response:
        """The events gateway, refused on purpose: the SDK then polls the sandbox's state."""
        return _error(404, "the stand-in has no events gateway; poll the sandbox state")

    # -- the control plane -------------------------------------------------------------------

    def _over_rate_limit(self) -> bool:
        """Whether a create now exceeds :attr:`creates_per_second`: a token bucket of that
        rate holding :attr:`creates_burst` (else a token is taken)."""
        rate = self.creates_per_second
        if rate is None:
            return False
        now = time.monotonic()
        size = float(rate if self.creates_burst is None else self.creates_burst)
        if self._bucket is None:
            self._bucket = (size, now)
        tokens, then = self._bucket
        tokens = min(size, tokens + (now - then) * rate)
        if tokens < 1.0:
            self._bucket = (tokens, now)
            self.rate_limited += 1
            return True
        self._bucket = (tokens - 1.0, now)
        return False

    async def _create(self, request: web.Request) -> web.Response:
        spec = CreateSandbox.from_dict(await request.json())
        if self._over_rate_limit():
            return _error(429, "ThrottlerException: Too Many Requests (sandbox creations)")
        if spec.build_info is not None:
            image = spec.build_info.dockerfile_content.removeprefix("FROM ").split()[0]
            snapshot = f"image:{image}"
            if not await self._has_image(image):
                return _error(400, f"image {image} cannot be built by the stand-in")
        else:
            snapshot = spec.snapshot or DEFAULT_SNAPSHOT
            if snapshot not in self.snapshots:
                return _error(404, f"Snapshot {snapshot} not found")
            image = self.snapshots[snapshot]
        sandbox = StandInSandbox(
            id=str(uuid.uuid4()),
            labels=dict(spec.labels or {}),
            env=dict(spec.env or {}),
            snapshot=snapshot,
            image=image,
            target=spec.target or "us",
        )
        self._sandboxes[sandbox.id] = sandbox
        asyncio.get_running_loop().create_task(self._boot(sandbox))
        if self.create_answer_delay_s:  # the sandbox is listed, its create not yet answered
            await asyncio.sleep(self.create_answer_delay_s)
        return web.json_response(self._dto(sandbox).to_dict(), status=200)

    async def _has_image(self, image: str) -> bool:
        assert self._docker is not None
        try:
            await asyncio.to_thread(self._docker.images.get, image)
        except docker.errors.ImageNotFound:
            return False
        return True

    async def _boot(self, sandbox: StandInSandbox) -> None:
        """Run the sandbox's container; then it is ``started`` (or ``error``)."""
        assert self._docker is not None
        try:
            sandbox.container = await asyncio.to_thread(
                self._docker.containers.run,
                sandbox.image,
                ["sleep", "infinity"],
                detach=True,
                init=True,
                network_disabled=True,
                environment=sandbox.env,
                labels={CONTAINER_LABEL: self.instance_id},
            )
        except docker.errors.APIError:
            sandbox.state = "error"
            return
        if sandbox.id in self._sandboxes:
            sandbox.state = "started"
        else:  # deleted while it booted
            await asyncio.to_thread(sandbox.container.remove, force=True)

    def _dto(self, sandbox: StandInSandbox) -> SandboxDto:
        return SandboxDto(
            id=sandbox.id,
            organization_id=ORGANIZATION,
            name=sandbox.id,
            snapshot=sandbox.snapshot,
            user="daytona",
            env=sandbox.env,
            labels=sandbox.labels,
            public=False,
            network_block_all=True,
            kvm=False,
            target=sandbox.target,
            cpu=1,
            gpu=0,
            memory=1,
            disk=3,
            state=sandbox.state,
            toolbox_proxy_url=f"{self.url}/toolbox",
        )

    async def _get(self, request: web.Request) -> web.Response:
        sandbox = self._sandboxes.get(request.match_info["sandbox_id"])
        if sandbox is None:
            return _error(
                404, f"Sandbox with ID or name {request.match_info['sandbox_id']} not found"
            )
        return web.json_response(self._dto(sandbox).to_dict())

    async def _list(self, request: web.Request) -> web.Response:
        wanted = json.loads(request.query.get("labels") or "{}")
        items = [
            SandboxListItem.from_dict(self._dto(s).to_dict())
            for s in self.sandboxes()
            if all(s.labels.get(k) == v for k, v in wanted.items())
        ]
        return web.json_response(ListSandboxesResponse(items=items, next_cursor=None).to_dict())

    async def _delete(self, request: web.Request) -> web.Response:
        sandbox = self._sandboxes.pop(request.match_info["sandbox_id"], None)
        if sandbox is None:
            return _error(
                404, f"Sandbox with ID or name {request.match_info['sandbox_id']} not found"
            )
        if sandbox.container is not None:
            with contextlib.suppress(docker.errors.NotFound):
                await asyncio.to_thread(sandbox.container.remove, force=True)
        sandbox.state = "destroyed"
        return web.json_response(self._dto(sandbox).to_dict())

    # -- the toolbox ---------------------------------------------------------------------------

    def _running(self, request: web.Request) -> StandInSandbox | web.Response:
        sandbox = self._sandboxes.get(request.match_info["sandbox_id"])
        if sandbox is None or sandbox.state != "started":
            return _error(404, "sandbox not found or not started")
        return sandbox

    async def _exec(
        self, sandbox: StandInSandbox, command: str, cwd: str | None, env: dict[str, str]
    ) -> Ran:
        argv = ["sh", "-c", command]
        return await asyncio.to_thread(
            run, sandbox.container, argv, workdir=cwd or None, environment=env or None
        )

    async def _execute(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        spec = ExecuteRequest.from_dict(await request.json())
        ran = await self._exec(sandbox, spec.command, spec.cwd, spec.envs or {})
        result = ran.output.decode("utf-8", "replace")
        return web.json_response(ExecuteResponse(exit_code=ran.exit_code, result=result).to_dict())

    async def _create_session(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        CreateSessionRequest.from_dict(await request.json())
        return web.Response(status=201)

    async def _session_exec(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        spec = SessionExecuteRequest.from_dict(await request.json())
        ran = await self._exec(sandbox, spec.command, None, {})
        stdout = ran.stdout.decode("utf-8", "replace")
        stderr = ran.stderr.decode("utf-8", "replace")
        answer = SessionExecuteResponse(
            cmd_id=uuid.uuid4().hex,
            exit_code=ran.exit_code,
            output=stdout + stderr,
            stdout=stdout,
            stderr=stderr,
        )
        return web.json_response(answer.to_dict())

    async def _delete_session(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        return sandbox if isinstance(sandbox, web.Response) else web.Response(status=204)

    async def _upload(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        fields: dict[str, Any] = {}
        async for part in await request.multipart():
            fields[part.name] = await part.read() if part.filename else await part.text()
        for key, path in fields.items():
            if not key.endswith(".path"):
                continue
            data = fields[key.removesuffix(".path") + ".file"]
            error = await asyncio.to_thread(_put, sandbox.container, path, bytes(data))
            if error:
                return _error(400, error)
        return web.Response(status=200)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        spec = FilesDownloadRequest.from_dict(await request.json())
        writer = MultipartWriter("form-data")
        for path in spec.paths:
            data, error = await asyncio.to_thread(_get, sandbox.container, path)
            name = "error" if error else "file"
            label = quote(path, safe="/")
            headers = {"Content-Disposition": f"form-data; name={name}; filename*=utf-8''{label}"}
            if error:
                status, code = error
                body = json.dumps(
                    {"message": f"{path}: {code}", "statusCode": status, "code": code}
                )
                writer.append(body, {**headers, "Content-Type": "application/json"})
            else:
                writer.append(data, {**headers, "Content-Type": "application/octet-stream"})
        return web.Response(body=writer, status=200)


#: Writes the upload staged at "$2" to "$1" through any symbolic link (parents made), as the
#: toolbox does; then removes the staging directory "$3".
_WRITE = 'mkdir -p -- "$(dirname -- "$1")" && cat -- "$2" > "$1"; c=$?; rm -rf -- "$3"; exit $c'
#: Prints regular file "$1" (through links); 3: missing, 4: not a regular file.
_READ = 'test -e "$1" || exit 3; test -f "$1" || exit 4; exec cat -- "$1"'


def _put(container: Any, path: str, data: bytes) -> str | None:
    """Write ``data`` to ``path`` in ``container``; an error message or None."""
    staging = f"/tmp/.daytona-standin-{uuid.uuid4().hex}"
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo(posixpath.basename(staging))
        info.type, info.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(info)
        info = tarfile.TarInfo(f"{posixpath.basename(staging)}/data")
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    container.put_archive("/tmp", archive.getvalue())
    ran = run(container, ["sh", "-c", _WRITE, "sh", path, f"{staging}/data", staging])
    return None if ran.exit_code == 0 else ran.output.decode("utf-8", "replace").strip() or "failed"


def _get(container: Any, path: str) -> tuple[bytes, tuple[int, str] | None]:
    """The bytes of regular file ``path`` in ``container``, or an error (status, code)."""
    ran = run(container, ["sh", "-c", _READ, "sh", path])
    if ran.exit_code == 3:
        return b"", (404, "FILE_NOT_FOUND")
    if ran.exit_code != 0:
        return b"", (400, "NOT_A_REGULAR_FILE" if ran.exit_code == 4 else "READ_FAILED")
    return ran.stdout, None


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def daytona_server(docker_client, sandbox_image) -> Iterator[StandInDaytona]:
    """The stand-in Daytona service for this test process (one per xdist worker)."""
    with StandInDaytona(image=sandbox_image) as server:
        yield server


@pytest.fixture
def daytona_env(
    daytona_server: StandInDaytona, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StandInDaytona]:
    """Point the Daytona SDK at the stand-in through its own variables; fail the test that
    made a call the stand-in does not know (a protocol drift)."""
    for name in ("DAYTONA_TARGET", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in daytona_server.env().items():
        monkeypatch.setenv(name, value)
    seen = len(daytona_server.unknown)
    yield daytona_server
    daytona_server.limit_creates(None)
    drift = daytona_server.unknown[seen:]
    assert not drift, f"the daytona SDK made calls the stand-in does not know: {drift}"


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3998)
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help="docker image of the default snapshot"
    )
    parser.add_argument("--api-key", help="the key to accept (default: a random one)")
    args = parser.parse_args(argv)
    server = StandInDaytona(image=args.image, api_key=args.api_key, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(f"# daytona stand-in on {server.url} (docker-backed, not Daytona's timings)")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
