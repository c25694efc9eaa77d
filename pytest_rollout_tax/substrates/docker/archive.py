"""Files through docker's archive API: one tar upload per write, one download per read."""

from __future__ import annotations

import base64
import errno
import io
import json
import posixpath
import tarfile
import time
from collections.abc import Callable
from typing import Any

from ...core.contract import file_error
from ...core.transport import RawResult, one_line
from ...errors import NotRegularFileError, SandboxError
from .engine import docker_errors, explain, requests
from .handle import DockerHandle

#: Symbolic links a read follows before it gives up, as ``open()`` does.
_MAX_LINKS = 40


def put_file(
    handle: DockerHandle,
    path: str,
    data: bytes,
    *,
    ids: tuple[int, int],
    run: Callable[[list[str]], RawResult],
) -> None:
    """Write ``data`` to ``path`` owned by ``ids``; a missing parent is made through ``run``
    (an argv to a result), as the sandbox's user. An archive carrying the parents' entries
    would also chmod and chown the ones that exist. A symbolic link is written through, as
    ``open()`` does: the archive API would replace the link itself."""
    path = link_target(handle.api, handle.id, path) or path
    parent, name = posixpath.split(path)
    tar = _single_file_tar(name, data, *ids)
    try:
        put_archive(handle.api, handle.id, parent, tar)
        return
    except docker_errors.NotFound as exc:
        _check_container(handle, exc)
    except docker_errors.APIError as exc:
        raise _os_error(exc, path) from None
    made = run(["mkdir", "-p", "--", parent])
    if made.exit_code != 0:
        message = one_line(made.stderr.decode("utf-8", "replace"))
        raise OSError(errno.EIO, f"cannot create {parent}: {message}", path)
    try:
        put_archive(handle.api, handle.id, parent, tar)
    except docker_errors.APIError as exc:
        raise _os_error(exc, path) from None


def get_file(handle: DockerHandle, path: str) -> bytes:
    """The bytes of ``path``, following symbolic links."""
    for _ in range(_MAX_LINKS):
        try:
            chunks, _ = handle.api.get_archive(handle.id, path)
            tar = b"".join(chunks)
        except docker_errors.NotFound as exc:
            _check_container(handle, exc)
            raise FileNotFoundError(errno.ENOENT, "No such file in the sandbox", path) from None
        except docker_errors.APIError as exc:
            raise _os_error(exc, path) from None
        with tarfile.open(fileobj=io.BytesIO(tar)) as members:
            member = members.next()
            if member is None or member.isdir():
                raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
            if member.issym():
                path = posixpath.normpath(posixpath.join(posixpath.dirname(path), member.linkname))
                continue
            extracted = members.extractfile(member) if member.isreg() else None
            if extracted is None:
                raise file_error(NotRegularFileError, path)
            return extracted.read()
    raise OSError(errno.ELOOP, "Too many levels of symbolic links", path)


def link_target(api: Any, container_id: str, path: str) -> str | None:
    """The absolute path the symbolic link ``path`` resolves to (every link in the chain
    followed, by the engine), or None if ``path`` is not a link or does not exist."""
    url = f"{api.base_url}/v{api.api_version}/containers/{container_id}/archive"
    try:
        response = api.head(url, params={"path": path}, timeout=api.timeout)
    except requests.exceptions.RequestException:
        return None  # the write that follows reports what is wrong
    stat = response.headers.get("X-Docker-Container-Path-Stat")
    if response.status_code != 200 or not stat:
        return None
    try:
        target = json.loads(base64.b64decode(stat)).get("linkTarget")
    except ValueError:
        return None
    return target if isinstance(target, str) and posixpath.isabs(target) else None


def put_archive(api: Any, container_id: str, parent: str, tar: bytes) -> None:
    """The SDK's ``put_archive``, but refusing to replace a directory with a file (or the
    reverse) as the engine's ``noOverwriteDirNonDir`` does: a 400 instead of a lost tree."""
    url = f"{api.base_url}/v{api.api_version}/containers/{container_id}/archive"
    params = {"path": parent, "noOverwriteDirNonDir": "true"}
    response = api.put(url, params=params, data=tar, timeout=api.timeout)
    try:
        response.raise_for_status()
    except requests.exceptions.HTTPError as exc:
        docker_errors.create_api_error_from_http_exception(exc)  # raises the SDK's APIError


def _single_file_tar(name: str, data: bytes, uid: int, gid: int) -> bytes:
    """An uncompressed tar holding one regular file (PAX, so any UTF-8 name fits)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    info.uid, info.gid = uid, gid
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _check_container(handle: DockerHandle, exc: docker_errors.NotFound) -> None:
    """Re-raise a 404 about the container itself (not about a path) as a clear error."""
    if "no such container" in str(exc.explanation or "").lower():
        raise SandboxError(f"{handle.substrate}: container {handle.id[:12]} is gone") from None


def _os_error(exc: docker_errors.APIError, path: str) -> OSError:
    code = {403: errno.EACCES, 404: errno.ENOENT, 400: errno.EINVAL}.get(exc.status_code or 0)
    return OSError(code or errno.EIO, explain(exc), path)
