"""Prepared sandboxes as gVisor checkpoints (``docker.snapshot=true``, ``runtime=runsc``).

A test's prepared template container is checkpointed (memory: gVisor's ``checkpoint.img``;
the container stops) and committed to an image (disk: the writable layer). A rollout gets a
new container of that image, the checkpoint copied into the container's own checkpoint folder
in the engine's data root (this engine version refuses ``--checkpoint-dir``), and started from
it. The template and the image carry the session's labels: both go at session end, or with a
reap. Checkpoints of runc containers need CRIU, which does not work on every kernel, so
snapshots are gVisor's here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from typing import Any

from ...core.sandbox import Sandbox
from ...errors import ConfigError, SandboxStartError
from .engine import docker_errors, explain

#: The checkpoint's name in every container that holds it.
CHECKPOINT = "prepared"
#: The repository of the images prepared disks are committed to.
REPOSITORY = "rollout-tax/snapshot"
#: Starts of one restore: concurrent restores of one checkpoint race in containerd.
RESTORE_ATTEMPTS = 3


@dataclass(frozen=True)
class Snapshot:
    """One test's prepared sandbox, checkpointed: what a restore needs."""

    #: The stopped template container; its folder holds the checkpoint.
    template_id: str
    #: The image its disk was committed to.
    image_id: str
    #: The checkpoint's folder on this machine, in the engine's data root.
    path: str


def check_engine(name: str, info: dict[str, Any]) -> None:
    """What snapshots need of the engine (gVisor is the options' check): experimental mode,
    and its data root on this machine."""
    if not info.get("ExperimentalBuild"):
        raise ConfigError(
            f"{name}.snapshot=True: the engine's experimental mode is off (docker checkpoint "
            'needs it); start dockerd with "experimental": true, as scripts/ensure-docker does'
        )
    containers = os.path.join(info.get("DockerRootDir") or "", "containers")
    if not os.access(containers, os.W_OK):
        raise ConfigError(
            f"{name}.snapshot=True: the engine's data root {info.get('DockerRootDir')!r} is "
            "not writable on this machine (a restore copies the checkpoint there); run the "
            "tests as root on the engine's host"
        )


def checkpoint(api: Any, sandbox: Sandbox, data_root: str) -> Snapshot:
    """Checkpoint the prepared ``sandbox`` (it stops) and commit its disk; the template stays
    until :func:`remove`. Removed at once if either fails."""
    container_id = sandbox.handle.id
    name = sandbox.substrate.name
    with contextlib.suppress(Exception):  # a session's shell: the checkpoint would cut it
        sandbox.transport.close()
    try:
        response = api._post_json(
            api._url("/containers/{0}/checkpoints", container_id),
            data={"CheckpointID": CHECKPOINT, "Exit": True},
        )
        api._raise_for_status(response)
        image = api.commit(container_id, repository=REPOSITORY, tag=container_id[:12])
    except BaseException as exc:
        with contextlib.suppress(Exception):
            api.remove_container(container_id, force=True, v=True)
        if isinstance(exc, docker_errors.DockerException):
            raise SandboxStartError(
                f"{name}: checkpointing the prepared sandbox failed: {explain(exc)}"
            ) from None
        raise
    path = os.path.join(data_root, "containers", container_id, "checkpoints", CHECKPOINT)
    return Snapshot(template_id=container_id, image_id=image["Id"], path=path)


def restore(api: Any, snapshot: Snapshot, container_id: str, data_root: str) -> None:
    """Start the new container ``container_id`` (of the snapshot's image) from its checkpoint."""
    folder = os.path.join(data_root, "containers", container_id, "checkpoints", CHECKPOINT)
    shutil.copytree(snapshot.path, folder)
    for attempt in range(1, RESTORE_ATTEMPTS + 1):
        response = api._post(
            api._url("/containers/{0}/start", container_id), params={"checkpoint": CHECKPOINT}
        )
        if attempt == RESTORE_ATTEMPTS or not _content_race(response):
            break
    api._raise_for_status(response)


def _content_race(response: Any) -> bool:
    """Whether a start failed only because another restore of the same checkpoint content
    was committing it to containerd's content store at the same moment (it then exists)."""
    return response.status_code >= 400 and "already exists" in response.text


def remove(api: Any, snapshot: Snapshot) -> None:
    """Remove the template (its checkpoint with it) and the committed image."""
    with contextlib.suppress(docker_errors.NotFound):
        api.remove_container(snapshot.template_id, force=True, v=True)
    with contextlib.suppress(docker_errors.NotFound):
        api.remove_image(snapshot.image_id, force=True)


def reap_images(api: Any, label: str, spare: Any) -> int:
    """Remove committed snapshot images labelled ``label`` whose owner ``spare`` does not
    keep (a live session's); return how many."""
    removed = 0
    for image in api.images(filters={"label": label}):
        if spare(image.get("Labels") or {}):
            continue
        with contextlib.suppress(docker_errors.APIError):
            api.remove_image(image["Id"], force=True)
            removed += 1
    return removed
