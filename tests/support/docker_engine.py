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


@pytest.fixture(scope="session")
def runsc_runtime(docker_client) -> str:
    """``runsc``, registered in the engine under test; skips in one line saying how if not
    (an engine ensure-docker did not start may lack it)."""
    info = docker_client.info()
    if "runsc" not in (info.get("Runtimes") or {}):
        from pytest_rollout_tax.substrates.docker.lifecycle import REGISTER_RUNSC

        pytest.skip(f"gVisor (runsc) is not registered in this engine: {REGISTER_RUNSC}")
    return "runsc"


@pytest.fixture(scope="session")
def experimental_runsc(docker_client, runsc_runtime) -> str:
    """``runsc`` on an engine in experimental mode (``docker checkpoint``), or a skip."""
    if not docker_client.info().get("ExperimentalBuild"):
        pytest.skip("the engine's experimental mode is off; scripts/ensure-docker turns it on")
    return runsc_runtime


def session_shell(docker_client, container_id: str) -> dict:
    """The engine's record of a container's ``session`` shell: its one exec with stdin open
    (``Pid`` is the shell's process id on this host, where the engine runs)."""
    api = docker_client.api
    execs = [api.exec_inspect(i) for i in api.inspect_container(container_id)["ExecIDs"] or ()]
    [shell] = [record for record in execs if record["OpenStdin"]]
    return shell


@pytest.fixture(scope="session")
def bwrap_ready(sandbox_image, tmp_path_factory) -> str:
    """The sandbox image, for the bwrap substrate; skips with the substrate's own line when
    this kernel or user cannot make its sandboxes (scripts/ensure-bwrap says the same)."""
    from pytest_rollout_tax.errors import SubstrateUnavailable
    from pytest_rollout_tax.substrates.bwrap.lifecycle import check_kernel

    try:
        check_kernel("bwrap", tmp_path_factory.mktemp("bwrap-check"))
    except SubstrateUnavailable as exc:
        pytest.skip(str(exc))
    return sandbox_image
