"""``--rollout-reap`` with ``docker.reap=mine`` on a shared engine: each kind of leftover a
killed session leaves (a container, a snapshot's template holding its checkpoint, a committed
snapshot image) goes when this user's, stays when another user's.

The reap runs as a user name of its own (``USER``), and the other user is another made-up
name, so the reap can touch nothing on the engine but what this test made; the test removes
what is left.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.substrates.docker import KEEPALIVE
from pytest_rollout_tax.substrates.docker.lifecycle import USER_LABEL
from pytest_rollout_tax.substrates.docker.snapshot import CHECKPOINT, REPOSITORY

pytestmark = pytest.mark.usefixtures("sandbox_image")


@pytest.fixture
def made(docker_client) -> Iterator[list[tuple[str, str]]]:
    """What the test made, as (kind, id); removed at the end if a reap left it."""
    import docker

    objects: list[tuple[str, str]] = []
    yield objects
    for kind, object_id in objects:
        with contextlib.suppress(docker.errors.NotFound):
            if kind == "image":
                docker_client.api.remove_image(object_id, force=True)
            else:
                docker_client.api.remove_container(object_id, force=True, v=True)


def leftover_container(docker_client, made, labels: dict[str, str], runtime: str | None) -> str:
    container = docker_client.api.create_container(
        "rollout-tax/sandbox:bookworm",
        entrypoint=KEEPALIVE,
        labels=labels,
        host_config=docker_client.api.create_host_config(
            init=True, network_mode="none", runtime=runtime
        ),
    )["Id"]
    made.append(("container", container))
    return container


def container_left(docker_client, labels: dict[str, str], made) -> Callable[[], bool]:
    container = leftover_container(docker_client, made, labels, None)
    docker_client.api.start(container)
    return lambda: exists(docker_client.api.inspect_container, container)


def checkpoint_left(docker_client, labels: dict[str, str], made) -> Callable[[], bool]:
    """A stopped template holding its checkpoint, as a killed snapshot session leaves it."""
    container = leftover_container(docker_client, made, labels, "runsc")
    api = docker_client.api
    api.start(container)
    response = api._post_json(
        api._url("/containers/{0}/checkpoints", container),
        data={"CheckpointID": CHECKPOINT, "Exit": True},
    )
    api._raise_for_status(response)

    def left() -> bool:
        response = api._get(api._url("/containers/{0}/checkpoints", container))
        if response.status_code == 404:
            return False
        api._raise_for_status(response)
        return [c["Name"] for c in response.json()] == [CHECKPOINT]

    assert left()
    return left


def image_left(docker_client, labels: dict[str, str], made) -> Callable[[], bool]:
    """A prepared disk committed to an image, its template gone."""
    container = leftover_container(docker_client, made, labels, None)
    image = docker_client.api.commit(container, repository=REPOSITORY, tag=new_id())["Id"]
    made.append(("image", image))
    docker_client.api.remove_container(container, force=True)
    assert docker_client.api.inspect_image(image)["Config"]["Labels"][USER_LABEL]
    return lambda: exists(docker_client.api.inspect_image, image)


def exists(inspect: Callable[[str], object], object_id: str) -> bool:
    import docker

    try:
        inspect(object_id)
    except docker.errors.NotFound:
        return False
    return True


LEFTOVERS = {"container": container_left, "checkpoint": checkpoint_left, "image": image_left}


@pytest.mark.parametrize("kind", list(LEFTOVERS))
def test_reap_mine_removes_this_users_leftovers_and_spares_another_users(
    kind, tmp_path: Path, docker_client, made, request
):
    if kind == "checkpoint":
        request.getfixturevalue("experimental_runsc")
    me, other = f"rtx-me-{new_id()}", f"rtx-other-{new_id()}"
    session = {SESSION_LABEL: f"killed-{new_id()}"}  # no owner: its process is gone
    mine = LEFTOVERS[kind](docker_client, session | {USER_LABEL: me}, made)
    theirs = LEFTOVERS[kind](docker_client, session | {USER_LABEL: other}, made)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    reap = ["--rollout-reap", "--substrate=docker"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *reap],
        cwd=tmp_path,
        env=env | {"USER": me, "LOGNAME": me},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rollout-tax: docker: removed 1 leftover sandbox(es)" in done.stdout
    assert not mine()
    assert theirs()
