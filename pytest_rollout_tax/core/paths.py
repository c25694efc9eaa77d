"""Paths the package reads or writes, which must be regular files: a report, a saved run, a
trajectory (a FIFO or a device would block or never end)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import NotRegularFileError

#: What a path that is not a regular file is, by its mode.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link loop"),
)


def regular_file(path: str | os.PathLike[str]) -> Path:
    """The file ``path`` names, symbolic links followed to their target (what a report written
    to ``path`` replaces). Raises NotRegularFileError when that file exists and is not a
    regular file; a missing one is left for the read or write itself to report."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.lstat().st_mode
    except OSError:  # missing (a new file), or unreachable: the write itself reports it
        return target
    if stat.S_ISREG(mode):
        return target
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    if os.path.abspath(path) != str(target):
        kind = f"it resolves to {target}, {kind}"
    raise NotRegularFileError(errno.EINVAL, f"not a regular file ({kind})", os.fspath(path))
