"""Writing report files: atomically, through symbolic links, never over a special file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError, NotRegularFileError
from .paths import regular_file
from .writable import check_writable_file


def current_umask() -> int:
    """The process's umask, read from /proc where possible (changing it races other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # briefly the strictest mask, should another thread create a file
    os.umask(mask)
    return mask


def check_report_path(path: str | os.PathLike[str], where: str) -> Path:
    """Fail fast when a file cannot be written to ``path``; errors start with ``where``."""
    if Path(path).is_dir():
        raise ConfigError(f"{where}: is a directory; name a file")
    try:
        target = regular_file(path)
    except NotRegularFileError as exc:
        raise ConfigError(f"{where}: {exc.strerror}; name a regular file or a new one") from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot create its directory: {exc.strerror}") from None
    why = check_writable_file(target)
    if why is not None:
        raise ConfigError(f"{where}: cannot be written: {why}")
    return target


#: Bytes written to a report file at a time.
BUFFER = 1 << 20


_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def stream_json(handle: TextIO, data: Mapping[str, Any]) -> None:
    """Write ``data`` as compact JSON, each item of a top-level list encoded on its own."""
    handle.write("{")
    for index, (key, value) in enumerate(data.items()):
        handle.write(("," if index else "") + _ENCODE(key) + ":")
        if isinstance(value, Sequence) and not isinstance(value, str):
            handle.write("[")
            for position, item in enumerate(value):
                handle.write(("," if position else "") + _ENCODE(item))
            handle.write("]")
        else:
            handle.write(_ENCODE(value))
    handle.write("}")


def write_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``data`` as compact JSON atomically to ``path`` (through a symlink, to its target).

    A crash never leaves a half-written file; the file's mode is 0666 less the umask.
    """

    def write(handle: TextIO) -> None:
        stream_json(handle, data)
        handle.write("\n")

    return write_atomically(path, write)


def write_atomically(path: str | os.PathLike[str], write: Callable[[TextIO], object]) -> Path:
    """Have ``write`` fill a temporary file next to ``path``, then rename it over ``path``.

    Through a symlink, its target is replaced; the file's mode is 0666 less the umask.
    """
    target = regular_file(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", buffering=BUFFER) as handle:
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
    return Path(path)
