"""The real Docker engine the tests use; scripts/ensure-docker starts it and builds the image."""

from __future__ import annotations

import pytest

from pytest_rollout_tax.substrates import SANDBOX_IMAGE

FIX = "run scripts/ensure-docker (the README's test command does)"


@pytest.fixture(scope="session")
def docker_client():
    """A docker SDK client for the engine under test; fails (never skips) when unreachable."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"docker engine unreachable ({exc}); {FIX}", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:
    """The standard sandbox image, which must have been built locally."""
    import docker

    try:
        docker_client.images.get(SANDBOX_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {SANDBOX_IMAGE} is missing; {FIX}", pytrace=False)
    return SANDBOX_IMAGE


def session_shell(docker_client, container_id: str) -> dict:
    """The engine's record of a container's ``session`` shell: its one exec with stdin open
    (``Pid`` is the shell's process id on this host, where the engine runs)."""
    api = docker_client.api
    execs = [api.exec_inspect(i) for i in api.inspect_container(container_id)["ExecIDs"] or ()]
    [shell] = [record for record in execs if record["OpenStdin"]]
    return shell
