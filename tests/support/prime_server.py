"""A local stand-in for Prime Intellect's sandbox service, for the prime substrate's tests.

It speaks the protocol of the pinned ``prime-sandboxes`` SDK to the unmodified SDK, reached
through the SDK's own ``PRIME_API_BASE_URL``:

- the control plane under ``/api/v1``: ``POST /sandbox`` (idempotency key honoured),
  ``GET /sandbox`` (label filter, ``is_active``, pages), ``GET|DELETE /sandbox/{id}``,
  ``DELETE /sandbox`` (bulk, by ids or labels), ``POST /sandbox/status:batchGet``,
  ``POST /sandbox/{id}/auth`` (a gateway token) and ``GET /sandbox/{id}/error-context``,
  authenticated by ``Authorization: Bearer <key>``; bodies go through the SDK's own pydantic
  models (``Sandbox``, ``CreateSandboxRequest``, ``SandboxListResponse``...);
- the gateway each sandbox's auth names (``<url>/gateway/<user_ns>/<job_id>``), with the
  sandbox's own token: ``command_session.CommandSession/Start``, Connect's server-streaming
  protocol with the SDK's own protobuf messages (start, stdout/stderr data, end events; the
  command is killed, its whole process group, at the ``connect-timeout-ms`` deadline or when
  the client goes away), ``POST /upload`` (multipart), ``GET /download`` and
  ``GET /read-file``.

Any other call is answered 501 naming it, and counted in :attr:`StandInPrime.unknown`: the
fixture fails the test that made it, so an SDK whose protocol drifted fails loudly. Every
sandbox is a real docker container (``init``, no network, labelled for cleanup). A create is
answered at once with status ``PENDING``; the sandbox is ``PROVISIONING`` while its container
starts, then ``RUNNING``. Its timings are docker's on this machine, never Prime's.

Faults on request: any key but the server's gets 401; an image the stand-in does not have
ends its sandbox in ``ERROR`` (``IMAGE_PULL_FAILED``), as Prime reports a failed pull;
:meth:`StandInPrime.limit_creates` answers creates beyond a rate with 429; ``answer_delay_s``
holds the answer to a create that was already made (a late create); ``pending_s`` holds a new
sandbox in ``PENDING``; ``orphan_early_deletes`` makes a delete that lands while a sandbox is
still being provisioned answer as done while the provisioning goes on to ``RUNNING`` (the race
that left Prime accounts with thousands of orphans).

Standalone (for ``pytest example_suite --substrate=prime`` by hand)::

    PYTHONPATH=tests python -m support.prime_server --port 3997  # prints the variables to export
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import secrets
import signal
import struct
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import pytest
from aiohttp import web
from prime_sandboxes import (
    BatchSandboxStatusResponse,
    BulkDeleteSandboxRequest,
    BulkDeleteSandboxResponse,
    CreateSandboxRequest,
    FileUploadResponse,
    ReadFileResponse,
    Sandbox,
    SandboxListResponse,
    SandboxStatusSnapshot,
)
from prime_sandboxes._proto.command_session import command_session_pb2 as pb

from pytest_rollout_tax.core.shell import STDERR
from pytest_rollout_tax.errors import SandboxError
from pytest_rollout_tax.substrates import SANDBOX_IMAGE as DEFAULT_IMAGE
from pytest_rollout_tax.substrates.docker.exec import exit_code
from support.daytona_server import _get, _put
from support.docker_exec import frames

#: Docker label on every container the stand-in runs (value: the server's instance id).
CONTAINER_LABEL = "rollout-tax.prime-standin"
#: The image name a create asks for by default (Prime's docs use it); the stand-in runs its
#: local sandbox image for it.
DEFAULT_IMAGE_NAME = "python:3.11-slim"
USER_NS = "standin"
START_PATH = "/command_session.CommandSession/Start"
#: Runs in the container before the command: report the pid on stderr's first line, then exec
#: the command (a docker exec leads its own session), so ``kill -9 -PID`` ends all it spawned.
_LAUNCHER = 'echo "$$" >&2; exec "$@"'
#: Connect's envelope flag of the stream's last message (its end, as JSON).
_END_STREAM = 0x02


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _error(status: int, detail: str) -> web.Response:
    """An API error as FastAPI answers it (``detail``), which the SDK puts in its message."""
    return web.json_response({"detail": detail}, status=status)


@dataclass
class StandInSandbox:
    id: str
    request: CreateSandboxRequest
    image: str | None
    status: str = "PENDING"
    created_at: str = field(default_factory=_now)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    container: Any = None
    error_type: str | None = None
    error_message: str | None = None
    deleted: bool = False
    booted: asyncio.Event = field(default_factory=asyncio.Event)

    def model(self) -> Sandbox:
        spec = self.request
        return Sandbox(
            id=self.id,
            name=spec.name,
            docker_image=spec.docker_image or "",
            cpu_cores=spec.cpu_cores,
            memory_gb=spec.memory_gb,
            disk_size_gb=spec.disk_size_gb or 5.0,
            disk_mount_path="/",
            gpu_count=spec.gpu_count,
            vm=True,
            status=self.status,
            timeout_minutes=spec.timeout_minutes,
            labels=list(spec.labels),
            created_at=dt.datetime.fromisoformat(self.created_at),
            updated_at=dt.datetime.now(dt.UTC),
            error_type=self.error_type,
            error_message=self.error_message,
            team_id=spec.team_id,
        )


class StandInPrime:
    """The stand-in server: control plane and gateway on one loopback port, in a thread."""

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_key = api_key or f"pit_standin_{secrets.token_hex(16)}"
        self.host, self.port = host, port
        #: Image name a create may ask for -> the local docker image its sandbox runs.
        self.images = {DEFAULT_IMAGE_NAME: image}
        self.instance_id = secrets.token_hex(6)
        #: Requests served, by ``METHOD route``.
        self.requests: Counter[str] = Counter()
        #: Calls the stand-in does not know, as ``METHOD path``: a protocol drift.
        self.unknown: list[str] = []
        #: Seconds a new sandbox stays PENDING before it is provisioned.
        self.pending_s = 0.0
        #: Seconds the answer to a create is held after the sandbox was made.
        self.answer_delay_s = 0.0
        #: Whether a delete during provisioning is answered while the provisioning goes on.
        self.orphan_early_deletes = False
        self.rate_limited = 0
        self._rate: float | None = None
        self._burst = 1.0
        self._bucket: tuple[float, float] | None = None
        self._sandboxes: dict[str, StandInSandbox] = {}
        self._by_key: dict[str, str] = {}
        self._docker: docker.DockerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables that point the unmodified SDK (and the prime substrate) here."""
        return {"PRIME_API_BASE_URL": self.url, "PRIME_API_KEY": self.api_key}

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> StandInPrime:
        """Serve in a background thread; return once the port is bound."""
        self._docker = docker.from_env(max_pool_size=32)
        for image in self.images.values():
            self._docker.images.get(image)  # never pull: a missing image is an error
        ready: dict[str, BaseException] = {}
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.set_default_executor(ThreadPoolExecutor(16, thread_name_prefix="prime-standin"))
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

        self._thread = threading.Thread(target=serve, name="prime-standin", daemon=True)
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

    def __enter__(self) -> StandInPrime:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def limit_creates(self, per_second: float | None, burst: float = 1.0) -> None:
        """Answer 429 to creates beyond ``per_second`` (None: no limit), from now on, with a
        bucket of ``burst`` creates."""
        self._rate, self._burst, self._bucket, self.rate_limited = per_second, burst, None, 0

    def reset_faults(self) -> None:
        self.limit_creates(None)
        self.pending_s = self.answer_delay_s = 0.0
        self.orphan_early_deletes = False

    def live(self) -> list[StandInSandbox]:
        """The sandboxes not terminated (an orphan included), oldest first."""
        found = [s for s in self._sandboxes.values() if s.status != "TERMINATED"]
        return sorted(found, key=lambda s: s.created_at)

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until every sandbox's provisioning has ended (an orphan is then RUNNING)."""

        async def booted() -> None:
            await asyncio.gather(*(s.booted.wait() for s in list(self._sandboxes.values())))

        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(booted(), self._loop).result(timeout)

    async def _listen(self) -> None:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._count])
        add = app.router.add_route
        api = "/api/v1/sandbox"
        add("POST", api, self._create)
        add("GET", api, self._list)
        add("DELETE", api, self._bulk_delete)
        add("POST", f"{api}/status:batchGet", self._statuses)
        add("GET", f"{api}/{{sandbox_id}}", self._get)
        add("DELETE", f"{api}/{{sandbox_id}}", self._delete)
        add("POST", f"{api}/{{sandbox_id}}/auth", self._auth)
        add("GET", f"{api}/{{sandbox_id}}/error-context", self._error_context)
        gateway = f"/gateway/{USER_NS}/{{sandbox_id}}"
        add("POST", f"{gateway}{START_PATH}", self._start_command)
        add("POST", f"{gateway}/upload", self._upload)
        add("GET", f"{gateway}/download", self._download)
        add("GET", f"{gateway}/read-file", self._read_file)
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
        keyed = request.headers.get("Authorization", "") == f"Bearer {self.api_key}"
        if request.path.startswith("/api/") and handler != self._unknown and not keyed:
            return _error(401, "Invalid API key")
        return await handler(request)

    async def _unknown(self, request: web.Request) -> web.Response:
        call = f"{request.method} {request.path}"
        self.unknown.append(call)
        return _error(501, f"the Prime stand-in does not know the call {call}")

    # -- the control plane -------------------------------------------------------------------

    def _over_rate_limit(self) -> bool:
        """A token bucket of :attr:`_rate` a second holding :attr:`_burst` creates."""
        if self._rate is None:
            return False
        now = time.monotonic()
        tokens, then = self._bucket or (self._burst, now)
        tokens = min(self._burst, tokens + (now - then) * self._rate)
        if tokens < 1.0:
            self._bucket = (tokens, now)
            self.rate_limited += 1
            return True
        self._bucket = (tokens - 1.0, now)
        return False

    def _found(self, request: web.Request) -> StandInSandbox | web.Response:
        sandbox = self._sandboxes.get(request.match_info["sandbox_id"])
        if sandbox is None:
            return _error(404, f"Sandbox {request.match_info['sandbox_id']} not found")
        return sandbox

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self._over_rate_limit():
            return _error(429, "Rate limit exceeded: 500 per 1 minute")
        spec = CreateSandboxRequest.model_validate(body)
        key = body.get("idempotency_key")
        if key in self._by_key:  # a retried create answers with the sandbox it made
            return web.json_response(self._answer(self._sandboxes[self._by_key[key]]))
        image = self.images.get(spec.docker_image or "")
        sandbox = StandInSandbox(id=uuid.uuid4().hex[:24], request=spec, image=image)
        self._sandboxes[sandbox.id] = sandbox
        if key:
            self._by_key[key] = sandbox.id
        asyncio.get_running_loop().create_task(self._boot(sandbox))
        if self.answer_delay_s:
            await asyncio.sleep(self.answer_delay_s)
        return web.json_response(self._answer(sandbox))

    def _answer(self, sandbox: StandInSandbox) -> dict[str, Any]:
        return sandbox.model().model_dump(mode="json", by_alias=True)

    async def _boot(self, sandbox: StandInSandbox) -> None:
        """PENDING for :attr:`pending_s`, PROVISIONING while the container starts, RUNNING."""
        assert self._docker is not None
        try:
            await asyncio.sleep(self.pending_s)
            if sandbox.deleted and not self.orphan_early_deletes:
                return
            sandbox.status = "PROVISIONING"
            if sandbox.image is None:
                sandbox.status, sandbox.error_type = "ERROR", "IMAGE_PULL_FAILED"
                sandbox.error_message = f"cannot pull {sandbox.request.docker_image}"
                return
            sandbox.container = await asyncio.to_thread(
                self._docker.containers.run,
                sandbox.image,
                ["sleep", "infinity"],
                detach=True,
                init=True,
                network_disabled=True,
                environment=dict(sandbox.request.environment_vars or {}),
                labels={CONTAINER_LABEL: self.instance_id},
            )
            if sandbox.deleted and not self.orphan_early_deletes:
                await asyncio.to_thread(sandbox.container.remove, force=True)
                return
            sandbox.status = "RUNNING"  # an early delete's orphan, too
        except docker.errors.APIError as exc:
            sandbox.status, sandbox.error_type, sandbox.error_message = "ERROR", "START", str(exc)
        finally:
            sandbox.booted.set()

    async def _get(self, request: web.Request) -> web.Response:
        sandbox = self._found(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        return web.json_response(self._answer(sandbox))

    async def _list(self, request: web.Request) -> web.Response:
        wanted = request.query.getall("labels", [])
        active = request.query.get("is_active") == "true"
        page = int(request.query.get("page", "1"))
        per_page = int(request.query.get("per_page", "50"))
        found = [
            s
            for s in sorted(self._sandboxes.values(), key=lambda s: s.created_at)
            if all(label in s.request.labels for label in wanted)
            and not (active and s.status in ("TERMINATED", "ERROR", "TIMEOUT"))
        ]
        shown = found[(page - 1) * per_page : page * per_page]
        answer = SandboxListResponse(
            sandboxes=[s.model() for s in shown],
            total=len(found),
            page=page,
            per_page=per_page,
            has_next=page * per_page < len(found),
        )
        return web.json_response(answer.model_dump(mode="json", by_alias=True))

    async def _statuses(self, request: web.Request) -> web.Response:
        ids = (await request.json())["sandbox_ids"]
        known = [self._sandboxes[i] for i in ids if i in self._sandboxes]
        missing = [i for i in ids if i not in self._sandboxes]
        answer = BatchSandboxStatusResponse.model_validate(
            {
                "statuses": [
                    SandboxStatusSnapshot.model_validate(
                        {"sandbox_id": s.id, "status": s.status, "error_type": s.error_type}
                    )
                    for s in known
                ],
                "errors": [
                    {"sandbox_id": i, "code": "NOT_FOUND", "message": "not found"} for i in missing
                ],
            }
        )
        return web.json_response(answer.model_dump(mode="json"))

    async def _terminate(self, sandbox: StandInSandbox) -> None:
        sandbox.deleted = True
        if sandbox.status in ("PENDING", "PROVISIONING") and self.orphan_early_deletes:
            sandbox.status = "TERMINATED"  # answered as done; _boot goes on to RUNNING
            return
        sandbox.status = "TERMINATED"
        if sandbox.container is not None:
            with contextlib.suppress(docker.errors.NotFound):
                await asyncio.to_thread(sandbox.container.remove, force=True)

    async def _delete(self, request: web.Request) -> web.Response:
        sandbox = self._found(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        await self._terminate(sandbox)
        return web.json_response({"success": True, "message": f"Sandbox {sandbox.id} deleted"})

    async def _bulk_delete(self, request: web.Request) -> web.Response:
        spec = BulkDeleteSandboxRequest.model_validate(await request.json())
        chosen = [
            s
            for s in self._sandboxes.values()
            if s.status != "TERMINATED"
            and (spec.sandbox_ids is None or s.id in spec.sandbox_ids)
            and all(label in s.request.labels for label in spec.labels or [])
        ]
        for sandbox in chosen:
            await self._terminate(sandbox)
        done = [s.id for s in chosen]
        answer = BulkDeleteSandboxResponse(
            succeeded=done, failed=[], message=f"{len(done)} deleted"
        )
        return web.json_response(answer.model_dump(mode="json"))

    async def _auth(self, request: web.Request) -> web.Response:
        sandbox = self._found(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        return web.json_response(
            {
                "gateway_url": f"{self.url}/gateway",
                "user_ns": USER_NS,
                "job_id": sandbox.id,
                "token": sandbox.token,
                "expires_at": expires.isoformat(),
            }
        )

    async def _error_context(self, request: web.Request) -> web.Response:
        sandbox = self._found(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        return web.json_response(
            {
                "status": sandbox.status,
                "errorType": sandbox.error_type,
                "errorMessage": sandbox.error_message,
            }
        )

    # -- the gateway -------------------------------------------------------------------------

    def _running(self, request: web.Request) -> StandInSandbox | web.Response:
        sandbox = self._sandboxes.get(request.match_info["sandbox_id"])
        if sandbox is None or sandbox.status == "TERMINATED":
            return web.json_response({"error": "sandbox_terminated"}, status=410)
        if request.headers.get("Authorization") != f"Bearer {sandbox.token}":
            return web.json_response({"error": "unauthorized"}, status=401)
        if sandbox.status != "RUNNING":
            return web.json_response({"error": "sandbox_not_running"}, status=409)
        return sandbox

    async def _start_command(self, request: web.Request) -> web.StreamResponse:
        """``CommandSession/Start``: one envelope in, start/data/end events out."""
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        body = await request.read()
        message = pb.StartRequest()
        message.ParseFromString(body[5 : 5 + struct.unpack(">I", body[1:5])[0]])
        deadline = int(request.headers.get("connect-timeout-ms") or 0) / 1000 or None
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/connect+proto"}
        )
        await response.prepare(request)
        outcome: dict[str, Any] = {}
        try:
            await asyncio.wait_for(self._relay(sandbox, message, response, outcome), deadline)
            end: dict[str, Any] = {}
        except TimeoutError:
            end = {"error": {"code": "deadline_exceeded", "message": "deadline exceeded"}}
        finally:
            if "pid" in outcome and "exit" not in outcome:  # past its deadline, or abandoned
                await asyncio.to_thread(
                    sandbox.container.exec_run, ["kill", "-9", f"-{outcome['pid']}"]
                )
        await response.write(_envelope(_END_STREAM, json.dumps(end).encode()))
        await response.write_eof()
        return response

    async def _relay(
        self,
        sandbox: StandInSandbox,
        message: pb.StartRequest,
        response: web.StreamResponse,
        outcome: dict[str, Any],
    ) -> None:
        spec = message.command
        argv = ["sh", "-c", _LAUNCHER, "sandboxd", spec.cmd, *spec.args]
        cwd = spec.cwd if spec.HasField("cwd") else "/"
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        api = sandbox.container.client.api
        exec_id = (
            await asyncio.to_thread(
                api.exec_create,
                sandbox.container.id,
                argv,
                stdout=True,
                stderr=True,
                environment=[f"{k}={v}" for k, v in spec.envs.items()],
                workdir=cwd,
            )
        )["Id"]

        def pump() -> None:
            head = b""
            try:
                for kind, data in frames(api.exec_start(exec_id, socket=True)):
                    if kind == STDERR and "pid" not in outcome:
                        head += data
                        if b"\n" not in head:
                            continue
                        line, _, data = head.partition(b"\n")
                        loop.call_soon_threadsafe(queue.put_nowait, ("pid", int(line)))
                    if data:
                        loop.call_soon_threadsafe(queue.put_nowait, ("data", (kind, data)))
                code = exit_code(api, exec_id)
            except (docker.errors.APIError, OSError, ValueError, SandboxError):
                code = -1
            loop.call_soon_threadsafe(queue.put_nowait, ("end", code))

        threading.Thread(target=pump, name=f"sandboxd-{sandbox.id}", daemon=True).start()
        while True:
            kind, value = await queue.get()
            event = pb.CommandSessionEvent()
            if kind == "pid":
                outcome["pid"] = value
                event.start.pid = value
            elif kind == "data":
                stream, data = value
                setattr(event.data, "stderr" if stream == STDERR else "stdout", data)
            else:
                outcome["exit"] = value
                event.end.exit_code = value
            answer = pb.StartResponse(event=event).SerializeToString()
            await response.write(_envelope(0, answer))
            if kind == "end":
                return

    async def _upload(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        path = request.query["path"]
        data = b""
        async for part in await request.multipart():
            if getattr(part, "name", None) == "file":
                data = bytes(await part.read())  # type: ignore[union-attr]
        error = await asyncio.to_thread(_put, sandbox.container, path, data)
        if error:
            return _error(400, error)
        answer = FileUploadResponse(
            success=True, path=path, size=len(data), timestamp=dt.datetime.now(dt.UTC)
        )
        return web.json_response(answer.model_dump(mode="json"))

    async def _download(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        data, error = await asyncio.to_thread(_get, sandbox.container, request.query["path"])
        if error:
            return _error(error[0], f"{request.query['path']}: {error[1]}")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _read_file(self, request: web.Request) -> web.Response:
        sandbox = self._running(request)
        if isinstance(sandbox, web.Response):
            return sandbox
        data, error = await asyncio.to_thread(_get, sandbox.container, request.query["path"])
        if error:
            return _error(error[0], f"{request.query['path']}: {error[1]}")
        text = data.decode("utf-8", "replace")
        return web.json_response(ReadFileResponse(content=text, size=len(data)).model_dump())


def _envelope(flags: int, payload: bytes) -> bytes:
    return struct.pack(">BI", flags, len(payload)) + payload


# -- pytest fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def prime_server(docker_client: Any, sandbox_image: str) -> Iterator[StandInPrime]:
    """The stand-in Prime service for this test process (one per xdist worker)."""
    with StandInPrime(image=sandbox_image) as server:
        yield server


@pytest.fixture
def prime_env(
    prime_server: StandInPrime, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: Any
) -> Iterator[StandInPrime]:
    """Point the SDK at the stand-in through its own variables (its auth cache in a home of
    its own); fail the test that made a call the stand-in does not know."""
    for name in ("PRIME_CONTEXT", "PRIME_TEAM_ID", "PRIME_USER_ID", "PRIME_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("prime-home")))
    for name, value in prime_server.env().items():
        monkeypatch.setenv(name, value)
    seen = len(prime_server.unknown)
    yield prime_server
    prime_server.reset_faults()
    drift = prime_server.unknown[seen:]
    assert not drift, f"the prime SDK made calls the stand-in does not know: {drift}"


# -- standalone ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted, after printing the variables that point the SDK here."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3997)
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help=f"docker image {DEFAULT_IMAGE_NAME} runs"
    )
    parser.add_argument("--api-key", help="the key to accept (default: a random one)")
    args = parser.parse_args(argv)
    server = StandInPrime(image=args.image, api_key=args.api_key, host=args.host, port=args.port)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with server:
        for name, value in server.env().items():
            print(f"export {name}={value}")
        print(f"# prime stand-in on {server.url} (docker-backed, not Prime's timings)")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
