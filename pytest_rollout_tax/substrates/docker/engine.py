"""The Docker engine as the substrate sees it: the SDK, one connection, errors in one line.

Every module of the backend imports the SDK from here, so that a missing SDK is one message.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from ...errors import ExtraMissing, SandboxError, SubstrateUnavailable

try:
    import docker
    import docker.errors as docker_errors
    import docker.utils.socket as docker_socket
    import requests.exceptions
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("docker", "docker") from None

__all__ = [
    "DEFAULT_HOST",
    "ENGINE_ERRORS",
    "UNIX_URL",
    "connect",
    "docker",
    "docker_errors",
    "docker_socket",
    "engine_errors",
    "explain",
    "plain_socket",
    "requests",
    "root_cause",
]

DEFAULT_HOST = "unix:///var/run/docker.sock"
#: The SDK's base URL for a unix socket.
UNIX_URL = "http+docker://localhost"
#: What the SDK raises when the engine fails or cannot be reached.
ENGINE_ERRORS = (docker_errors.DockerException, requests.exceptions.RequestException)


def connect(name: str) -> docker.DockerClient:
    """A client that has answered a ping, or SubstrateUnavailable in one line saying what to do."""
    host = os.environ.get("DOCKER_HOST")
    where = f"{host} (DOCKER_HOST)" if host else f"{DEFAULT_HOST} (DOCKER_HOST is not set)"
    try:
        client = docker.from_env()
        client.ping()
    except ENGINE_ERRORS as exc:
        raise SubstrateUnavailable(
            f"{name}: Docker engine unreachable at {where}: {root_cause(exc)}; "
            "run scripts/ensure-docker or set DOCKER_HOST"
        ) from None
    return client


@contextlib.contextmanager
def engine_errors(name: str, doing: str) -> Iterator[None]:
    """Turn the SDK's errors while ``doing`` something into one line naming the cause."""
    try:
        yield
    except docker_errors.APIError as exc:
        raise SandboxError(f"{name}: {doing} failed: {explain(exc)}") from None
    except (requests.exceptions.ConnectionError, docker_errors.DockerException) as exc:
        raise SandboxError(
            f"{name}: lost the Docker engine while {doing}: {root_cause(exc)}"
        ) from None


def plain_socket(base_url: str) -> bool:
    """Whether the client talks HTTP over a plain unix or TCP (TLS) socket."""
    return base_url == UNIX_URL or base_url.startswith(("http://", "https://"))


def explain(exc: BaseException) -> str:
    """The engine's own message (without the request URL), on one line."""
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def root_cause(exc: BaseException) -> str:
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
    return explain(exc)
