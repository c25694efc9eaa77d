"""The sandboxes' root: a Docker image's filesystem, exported once into a directory kept by
the image's id (``CACHE/roots/ID``); every sandbox mounts it read-only under a layer of its own.

The export is ``docker export`` of a container that never runs, unpacked by ``tar``: as root
with the image's owners, as another user with that user's (who is root in the sandbox's user
namespace). A root is unpacked beside its place and renamed into it, so a concurrent export
(an xdist worker, another session) never sees half of one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ...errors import SubstrateUnavailable

#: What an export skips: device nodes (bwrap mounts a /dev of its own, and only root may make
#: them), and what Docker adds to every container.
EXCLUDED = ("dev/*", ".dockerenv")


def cache_root(cache: str | None) -> Path:
    """``cache``, else ``$XDG_CACHE_HOME`` (else ``~/.cache``)/pytest-rollout-tax/bwrap."""
    if cache:
        return Path(cache)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-rollout-tax" / "bwrap"


def exported(name: str, image: str, cache: Path, workdir: str) -> Path:
    """The root of ``image``, exported through the Docker engine on first use; one line
    naming the image if it cannot be."""
    from ..docker.engine import ENGINE_ERRORS, connect, docker_errors, root_cause

    client = connect(name)
    try:
        try:
            image_id = client.api.inspect_image(image)["Id"]
        except docker_errors.ImageNotFound:
            raise SubstrateUnavailable(
                f"{name}: image {image} is missing; build it with scripts/ensure-docker"
            ) from None
        root: Path = cache / "roots" / str(image_id).removeprefix("sha256:")[:24]
        if not root.is_dir():
            try:
                _export(name, client.api, image, root, workdir)
            except ENGINE_ERRORS as exc:
                raise SubstrateUnavailable(
                    f"{name}: exporting image {image} failed: {root_cause(exc)}"
                ) from None
        return root
    finally:
        client.close()


def _export(name: str, api: Any, image: str, root: Path, workdir: str) -> None:
    """Unpack ``image`` into ``root`` (through a directory beside it, then one rename)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    container = api.create_container(image, command=["true"], labels={"rollout-tax.io/export": ""})
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=root.parent))
    try:
        excluded = [f"--exclude={pattern}" for pattern in EXCLUDED]
        untar = subprocess.Popen(
            ["tar", "-x", "-f", "-", "-C", str(work), *excluded],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert untar.stdin is not None and untar.stderr is not None  # both piped
        try:
            for chunk in api.export(container["Id"]):
                untar.stdin.write(chunk)
        finally:
            untar.stdin.close()
            errors = untar.stderr.read()
            untar.wait()
        if untar.returncode != 0:
            why = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or ["tar failed"]
            raise SubstrateUnavailable(f"{name}: unpacking image {image} failed: {why[0]}")
        (work / workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        try:
            os.rename(work, root)
        except OSError:  # another process exported it first
            if not root.is_dir():
                raise
    finally:
        api.remove_container(container["Id"], force=True)
        if work.exists():
            remove_tree(work)


def remove_tree(path: Path) -> None:
    """Remove ``path`` whole, its read-only directories too (an overlay's work directory);
    nothing if it is gone already (a reap came first)."""

    def writable(function: object, failed: str, error: tuple[type, BaseException, object]) -> None:
        if isinstance(error[1], FileNotFoundError):
            return
        os.chmod(os.path.dirname(failed), 0o700)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, 0o700)
            shutil.rmtree(failed, ignore_errors=True)
        else:
            os.unlink(failed)

    shutil.rmtree(path, onerror=writable)
