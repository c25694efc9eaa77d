"""The ec2 substrate's stand-ins: moto's EC2 API in server mode, a fault-injecting HTTP proxy
in front of it, and a real sshd in a docker container as every instance's SSH target.

The substrate under test talks to them exactly as to AWS and a VM: boto3 over HTTP to an
``endpoint_url`` (the proxy), SSH to a fixed ``connect=HOST:PORT`` (the container). Faults
moto does not model (UnauthorizedOperation, InsufficientInstanceCapacity, an instance stuck
pending) are answered by the proxy with real EC2 XML error bodies for a chosen Action.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

import pytest

from support.late_answer import HeldAnswer

REPO = Path(__file__).resolve().parents[2]
SSHD_RECIPE = REPO / "images" / "sshd"
SSHD_IMAGE = "rollout-tax/sshd:bookworm"
BASE_IMAGE = "rollout-tax/sandbox:bookworm"
REGION = "us-east-1"
KEY_PAIR_NAME = "rollout-tax-test"
#: Dummy credentials, distinctive so tests can prove they never reach any output.
ACCESS_KEY = "AKIAROLLOUTTAXDUMMY7"
SECRET_KEY = "rollout-tax-dummy-secret-never-printed-0123456789"
SESSION_TOKEN = "rollout-tax-dummy-session-token-never-printed"
SECRETS = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s")
        time.sleep(interval)


# -- moto ---------------------------------------------------------------------------------------


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1 in a child process, with AMI, instance type and
    key pair validation on, so those errors come from moto itself."""

    ENV: ClassVar[dict[str, str]] = {
        "MOTO_ENABLE_AMI_VALIDATION": "true",
        "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
        "MOTO_ENABLE_KEYPAIR_VALIDATION": "true",
    }

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, attempts: int = 3) -> MotoServer:
        for _ in range(attempts):
            port = free_port()
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                    env=os.environ | self.ENV,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            self.url = f"http://127.0.0.1:{port}"
            try:
                wait_until(self._answers, 60, "moto server did not answer")
                return self
            except TimeoutError:
                self.stop()
        raise RuntimeError(f"moto server did not start; see {self.log_path}")

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise TimeoutError("moto server exited")
        try:
            with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def ec2_client(url: str):
    """A boto3 EC2 client for the tests' own checks (explicit dummy credentials)."""
    import boto3

    return boto3.client(
        "ec2",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


# -- the fault-injecting proxy -----------------------------------------------------------------


@dataclass
class Fault:
    """Answer ``action`` with an EC2 error instead of forwarding it."""

    action: str
    code: str
    message: str
    status: int
    #: None: any request; True/False: only DryRun (or only real) requests.
    dry_run: bool | None = None
    hits: int = 0


@dataclass
class Rewrite:
    """Forward ``action`` but replace ``old`` with ``new`` in moto's response body."""

    action: str
    old: bytes
    new: bytes
    hits: int = 0


def error_body(code: str, message: str) -> bytes:
    """The XML error document EC2's query API returns."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()


@dataclass
class FaultProxy:
    """An HTTP proxy in front of moto that can fail or rewrite chosen EC2 Actions."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    #: Actions whose answer is held on demand (made by moto, answered late): see ``hold``.
    holds: dict[str, HeldAnswer] = field(default_factory=dict)
    url: str = ""

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                proxy._handle(self)

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail(
        self, action: str, code: str, message: str, status: int = 400, dry_run: bool | None = None
    ) -> Fault:
        """From now on, answer ``action`` with error ``code`` (HTTP ``status``)."""
        fault = Fault(action, code, message, status, dry_run)
        self.faults.append(fault)
        return fault

    def rewrite(self, action: str, old: str, new: str) -> Rewrite:
        """From now on, replace ``old`` by ``new`` in the responses to ``action``."""
        rule = Rewrite(action, old.encode(), new.encode())
        self.rewrites.append(rule)
        return rule

    def hold(self, action: str) -> HeldAnswer:
        """Hold the answers of ``action`` (never a DryRun's) as the returned HeldAnswer, once
        armed, says: forwarded to moto, then answered only when released."""
        return self.holds.setdefault(action, HeldAnswer())

    def clear(self) -> None:
        for held in self.holds.values():
            held.disarm()
        self.holds.clear()
        self.faults.clear()
        self.rewrites.clear()
        self.actions.clear()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        form = parse_qs(body.decode("utf-8", "replace"))
        action = form.get("Action", [""])[0]
        dry_run = form.get("DryRun", ["false"])[0].lower() == "true"
        self.actions.append(action + (" (DryRun)" if dry_run else ""))
        for fault in list(self.faults):
            if fault.action == action and fault.dry_run in (None, dry_run):
                fault.hits += 1
                self._reply(handler, fault.status, error_body(fault.code, fault.message))
                return
        held = None if dry_run else self.holds.get(action)
        if held is not None:
            held.hold_before()
        status, payload = self._forward(handler, body)
        if held is not None:
            held.hold_after()
        for rule in list(self.rewrites):
            if rule.action == action and rule.old in payload:
                rule.hits += 1
                payload = payload.replace(rule.old, rule.new)
        self._reply(handler, status, payload)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        host, port = self.upstream.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/xml;charset=UTF-8")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


# -- SSH keys and the sshd container ------------------------------------------------------------


@dataclass(frozen=True)
class KeyFiles:
    private: Path
    public: str


def generate_key(directory: Path, name: str = "id_ed25519") -> KeyFiles:
    """A fresh ed25519 key pair in OpenSSH format (private file mode 0600)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = directory / name
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    private.chmod(0o600)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return KeyFiles(private, public.decode() + " rollout-tax-test")


def recipe_id() -> str:
    return hashlib.sha256((SSHD_RECIPE / "Dockerfile").read_bytes()).hexdigest()[:16]


def ensure_sshd_image(client) -> str:
    """Build ``rollout-tax/sshd:bookworm`` from images/sshd unless it exists for this recipe."""
    import docker

    wanted = recipe_id()
    lock_path = Path(tempfile.gettempdir()) / "rollout-tax-sshd-image.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers: one builds, the others wait
        try:
            image = client.images.get(SSHD_IMAGE)
            if image.labels.get("rollout-tax.recipe") == wanted:
                return SSHD_IMAGE
        except docker.errors.ImageNotFound:
            pass
        try:
            client.images.get(BASE_IMAGE)
        except docker.errors.ImageNotFound:  # never let the build try a registry for it
            raise RuntimeError(
                f"{BASE_IMAGE} is missing: run scripts/ensure-docker to build it"
            ) from None
        client.images.build(
            path=str(SSHD_RECIPE),
            tag=SSHD_IMAGE,
            labels={"rollout-tax.recipe": wanted},
            pull=False,
            rm=True,
            forcerm=True,
        )
    return SSHD_IMAGE


def ssh_banner(host: str, port: int) -> bool:
    """Whether an SSH server answers with its banner on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.settimeout(2)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@dataclass
class SSHTarget:
    """A running sshd container: where to connect and with which key."""

    container: Any
    host: str
    port: int
    user: str
    key: KeyFiles

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"


def start_sshd(client, image: str, key: KeyFiles, host_port: int | None = None) -> SSHTarget:
    """A detached sshd container accepting ``key`` for root, published on loopback."""
    container = client.containers.run(
        image,
        detach=True,
        init=True,
        environment={"AUTHORIZED_KEYS": key.public},
        ports={"22/tcp": ("127.0.0.1", host_port)},
        labels={"rollout-tax.io/test": "ec2-sshd"},
    )
    try:
        container.reload()
        port = int(container.ports["22/tcp"][0]["HostPort"])
        wait_until(lambda: ssh_banner("127.0.0.1", port), 60, "sshd did not answer")
    except BaseException:
        container.remove(force=True)
        raise
    return SSHTarget(container, "127.0.0.1", port, "root", key)


def set_pids_limit(container, limit: int) -> None:
    """Cap the processes in ``container`` (-1: no cap): sshd then cannot fork a command, and
    refuses an ``exec`` request on a connection that stays up. docker-py's ``update`` has no
    such parameter, so this posts to the engine's update endpoint itself."""
    api = container.client.api
    url = api._url("/containers/{0}/update", container.id)
    api._raise_for_status(api._post_json(url, data={"PidsLimit": limit}))


def auth_failures(container) -> int:
    """How many SSH connections to the sshd in ``container`` ended in failed authentication."""
    return container.logs().count(b"Connection closed by authenticating user")


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory) -> Iterator[MotoServer]:
    """moto's EC2 API in server mode on a free loopback port."""
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ec2_proxy(moto_server) -> Iterator[FaultProxy]:
    proxy = FaultProxy(moto_server.url).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def ec2_faults(ec2_proxy) -> Iterator[FaultProxy]:
    """The fault proxy, with every fault and rewrite removed after the test."""
    ec2_proxy.clear()
    yield ec2_proxy
    ec2_proxy.clear()


@pytest.fixture(scope="session")
def ec2_keys(tmp_path_factory) -> dict[str, KeyFiles]:
    """Two SSH key pairs: ``good`` (authorized in the sshd target) and ``wrong``."""
    directory = tmp_path_factory.mktemp("ssh-keys")
    return {"good": generate_key(directory, "good"), "wrong": generate_key(directory, "wrong")}


@pytest.fixture(scope="session")
def ec2_world(moto_server, ec2_keys) -> dict[str, str]:
    """What the moto account holds for the tests: an AMI id and the imported key pair."""
    client = ec2_client(moto_server.url)
    image = client.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client.import_key_pair(
        KeyName=KEY_PAIR_NAME, PublicKeyMaterial=ec2_keys["good"].public.encode()
    )
    return {"ami": image, "key_name": KEY_PAIR_NAME}


@pytest.fixture(scope="session")
def sshd_image(docker_client, sandbox_image) -> str:
    return ensure_sshd_image(docker_client)


@pytest.fixture(scope="session")
def sshd_target(docker_client, sshd_image, ec2_keys) -> Iterator[SSHTarget]:
    """One sshd container per test process, the SSH target of every ec2 instance."""
    target = start_sshd(docker_client, sshd_image, ec2_keys["good"])
    yield target
    target.container.remove(force=True)


def use_dummy_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy AWS credentials and region in the environment, nothing from the host's config."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def stand_in_options(proxy: FaultProxy, world: dict[str, str], target: SSHTarget) -> dict[str, str]:
    """Options of an ec2 substrate on moto (through ``proxy``) with the sshd ``target``."""
    return {
        "endpoint_url": proxy.url,
        "ami": world["ami"],
        "instance_type": "t3.micro",
        "key_name": world["key_name"],
        "ssh_user": target.user,
        "ssh_key": str(target.key.private),
        "connect": target.connect,
        "poll_interval": "0.05",
        "ready_timeout": "60",
    }


@pytest.fixture
def ec2_aws_env(monkeypatch, tmp_path) -> None:
    """Dummy AWS credentials and region in the environment, nothing from the host's config."""
    use_dummy_aws(monkeypatch, tmp_path)


@pytest.fixture
def ec2_opts(ec2_aws_env, ec2_proxy, ec2_world, sshd_target) -> dict[str, str]:
    """Options of an ec2 substrate on moto (through the proxy) with the sshd target."""
    return stand_in_options(ec2_proxy, ec2_world, sshd_target)


@pytest.fixture
def make_ec2(ec2_opts, ec2_faults):
    """A factory of ec2 substrates (``make_ec2(**overrides)``); closed and reaped afterwards."""
    from pytest_rollout_tax.substrates.ec2 import EC2Substrate

    made = []

    def make(**overrides: Any) -> EC2Substrate:
        substrate = EC2Substrate(**(ec2_opts | overrides))
        made.append(substrate)
        return substrate

    yield make
    ec2_faults.clear()
    for substrate in made:
        with contextlib.suppress(Exception):
            substrate.reap(substrate.session_id)
        substrate.close()


def substrate_opt_args(opts: dict[str, str], name: str = "ec2") -> list[str]:
    """``--substrate-opt`` arguments for ``opts``."""
    return [f"--substrate-opt={name}.{key}={value}" for key, value in opts.items()]


__all__ = [
    "ec2_aws_env",
    "ec2_faults",
    "ec2_keys",
    "ec2_opts",
    "ec2_proxy",
    "ec2_world",
    "make_ec2",
    "moto_server",
    "sshd_image",
    "sshd_target",
]
