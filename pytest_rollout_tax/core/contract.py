"""The sandbox contract every substrate meets: argument checks and file-error semantics.

The checks run before anything is sent to a substrate, so a bad argument is the same
``ValueError`` or ``TypeError`` everywhere. The shell scripts give every backend that moves
files through a shell the same errors as Python's own file API.
"""

from __future__ import annotations

import errno
import math
import posixpath
from collections.abc import Mapping, Sequence

from ..errors import NotRegularFileError

#: Exit codes of the file scripts, one per error of the contract.
FILE_ERRORS: dict[int, type[OSError]] = {
    80: FileNotFoundError,
    81: IsADirectoryError,
    82: NotADirectoryError,
    83: PermissionError,
    84: NotRegularFileError,
}
_CODES = {kind: code for code, kind in FILE_ERRORS.items()}
_ERRNO = {
    FileNotFoundError: (errno.ENOENT, "No such file or directory"),
    IsADirectoryError: (errno.EISDIR, "Is a directory"),
    NotADirectoryError: (errno.ENOTDIR, "Not a directory"),
    PermissionError: (errno.EACCES, "Permission denied"),
    NotRegularFileError: (errno.EINVAL, "Not a regular file"),
}

# $1 is the path. Sets $a to the nearest existing ancestor and fails with ENOTDIR if it is
# not a directory (a file where a directory is needed).
_ANCESTOR = (
    'a=$(dirname -- "$1"); while [ ! -e "$a" ]; do a=$(dirname -- "$a"); done; '
    f'[ -d "$a" ] || exit {_CODES[NotADirectoryError]}; '
)
#: Why a read of ``$1`` failed: exits with one of :data:`FILE_ERRORS`, or 0 if it did not.
WHY_NOT_READ = (
    f'if [ -d "$1" ]; then exit {_CODES[IsADirectoryError]}; fi; '
    f'if [ ! -e "$1" ]; then {_ANCESTOR}exit {_CODES[FileNotFoundError]}; fi; '
    f'[ -f "$1" ] || exit {_CODES[NotRegularFileError]}; '
    f'[ -r "$1" ] || exit {_CODES[PermissionError]}'
)
#: Why a write of ``$1`` failed (or would fail), for the user it runs as: as
#: :data:`WHY_NOT_READ`; a new file needs its nearest existing ancestor writable.
WHY_NOT_WRITE = (
    f'if [ -d "$1" ]; then exit {_CODES[IsADirectoryError]}; fi; '
    f"{_ANCESTOR}"
    f'if [ -e "$1" ]; then [ -w "$1" ] || exit {_CODES[PermissionError]}; '
    f'elif [ ! -w "$a" ] || [ ! -x "$a" ]; then exit {_CODES[PermissionError]}; fi'
)
#: Read ``$1`` to stdout, or exit with its error.
READ_SCRIPT = f'if [ -f "$1" ] && [ -r "$1" ]; then exec cat -- "$1"; fi; {WHY_NOT_READ}; exit 1'
#: Write stdin (``$2`` bytes) to ``$1``, creating parents, or exit with its error.
WRITE_SCRIPT = (
    f"{WHY_NOT_WRITE}; "
    'mkdir -p -- "$(dirname -- "$1")" && head -c "$2" > "$1" && n=$(($(wc -c < "$1"))) && '
    '{ [ "$n" -eq "$2" ] || { echo "short write: $n of $2 bytes" >&2; exit 1; }; }'
)


def file_error(kind: type[OSError], path: str) -> OSError:
    """``kind`` with its errno and message, as Python's ``open`` raises it for ``path``."""
    number, message = _ERRNO[kind]
    return kind(number, message, path)


def file_error_for(code: int, path: str) -> OSError | None:
    """The contract's error for a file script's exit ``code``, or None for another code."""
    kind = FILE_ERRORS.get(code)
    return file_error(kind, path) if kind else None


def check_command(cmd: str | Sequence[str]) -> list[str]:
    """``cmd`` as an argv: a string runs through ``sh -c``; a list as it is."""
    if isinstance(cmd, str):
        argv = ["sh", "-c", cmd]
    elif isinstance(cmd, Sequence) and not isinstance(cmd, bytes | bytearray):
        argv = list(cmd)
        if not argv:
            raise ValueError("exec: empty command")
        if not all(isinstance(arg, str) for arg in argv):
            raise TypeError(f"exec: every argument must be a str, got {argv!r}")
    else:
        raise TypeError(f"exec: expected a str or a list of str, got {type(cmd).__name__}")
    if any("\0" in arg for arg in argv):
        raise ValueError("exec: the command contains a NUL byte")
    return argv


def check_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """``env`` checked: names non-empty without ``=`` or NUL, values without NUL."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise TypeError(f"env: expected a mapping of str to str, got {type(env).__name__}")
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"env: names and values must be str, got {name!r}: {value!r}")
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"env: invalid variable name {name!r}")
        if "\0" in value:
            raise ValueError(f"env: the value of {name} contains a NUL byte")
    return dict(env)


def check_timeout(timeout: object, where: str = "timeout") -> float | None:
    """``timeout`` as seconds: None, or a positive finite number (not a bool)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"{where}={timeout!r}: expected a positive finite number of seconds")
    try:
        valid = math.isfinite(timeout) and timeout > 0
    except OverflowError:  # an int too large for a float
        valid = False
    if not valid:
        raise ValueError(f"{where}={timeout!r}: expected a positive finite number of seconds")
    return float(timeout)


def resolve_path(workdir: str, path: str, what: str = "path") -> str:
    """``path`` resolved against ``workdir``; absolute paths and ``..`` are allowed."""
    if not isinstance(path, str):
        raise TypeError(f"{what}: expected a str, got {type(path).__name__}")
    if not path:
        raise ValueError(f"{what}: empty path")
    if "\0" in path:
        raise ValueError(f"{what}: the path contains a NUL byte")
    return posixpath.normpath(posixpath.join(workdir, path))


def check_file_path(workdir: str, path: str) -> str:
    """The absolute file ``path``; a path that names a directory is an IsADirectoryError."""
    resolved = resolve_path(workdir, path)
    last = path.rpartition("/")[2]
    if last in ("", ".", "..") or resolved in (workdir, "/"):
        raise file_error(IsADirectoryError, resolved)
    return resolved


def payload(data: str | bytes) -> bytes:
    """What ``write_file`` writes: text as UTF-8, bytes-like as it is."""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"write_file: expected str or bytes, got {type(data).__name__}")
