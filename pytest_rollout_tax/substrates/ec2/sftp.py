"""Files over one SFTP session: pipelined writes, prefetching reads, ``mkdir -p`` remembered."""

from __future__ import annotations

import contextlib
import errno
import posixpath
import stat
from collections.abc import Iterator

import paramiko

from ...core.contract import file_error
from ...errors import NotRegularFileError


class SFTPFiles:
    """An SFTP session, and the directories known to exist since it opened."""

    def __init__(self, sftp: paramiko.SFTPClient) -> None:
        self._sftp = sftp
        self._dirs: set[str] = set()

    def settimeout(self, timeout: float) -> None:
        """Each later request may wait ``timeout`` seconds for an answer (then TimeoutError)."""
        self._sftp.get_channel().settimeout(timeout)

    def put(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path``, creating its parent directories."""
        parent = posixpath.dirname(path)
        with _status(path):
            if parent not in self._dirs:
                self._makedirs(parent)
            try:
                self._write(path, data)
            except FileNotFoundError:  # a directory we made was removed since
                self._dirs.clear()
                self._makedirs(parent)
                self._write(path, data)

    def get(self, path: str) -> bytes:
        """The bytes of ``path``."""
        with _status(path):
            mode = self._sftp.stat(path).st_mode or 0  # a FIFO would block the server's open
        if stat.S_ISDIR(mode):
            raise file_error(IsADirectoryError, path)
        if not stat.S_ISREG(mode):
            raise file_error(NotRegularFileError, path)
        with _status(path), self._sftp.open(path, "rb") as handle:
            handle.prefetch()
            data: bytes = handle.read()
            return data

    def close(self) -> None:
        self._sftp.close()

    def _write(self, path: str, data: bytes) -> None:
        with self._sftp.open(path, "wb") as handle:
            handle.set_pipelined(True)
            handle.write(data)

    def _makedirs(self, path: str) -> None:
        """``mkdir -p``, remembering which directories exist."""
        if path in self._dirs or path in ("", "/"):
            return
        try:
            found = self._sftp.stat(path)
        except FileNotFoundError:
            self._makedirs(posixpath.dirname(path))
            try:
                self._sftp.mkdir(path)
            except OSError:
                self._sftp.stat(path)  # made concurrently: fine; else raise the real error
        else:
            if not stat.S_ISDIR(found.st_mode or 0):
                raise OSError(errno.ENOTDIR, "Not a directory", path)
        self._dirs.add(path)


@contextlib.contextmanager
def _status(path: str) -> Iterator[None]:
    """An SFTP error status as a plain OSError about ``path``: SFTP's few codes (a missing
    parent and a file in the way are both "no such file") leave the sandbox to name the cause."""
    try:
        yield
    except TimeoutError:
        raise
    except OSError as exc:
        raise OSError(errno.EIO, f"SFTP: {exc.strerror or exc or 'failed'}", path) from None
