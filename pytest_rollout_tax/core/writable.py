"""A requested output checked before the run: a file (``--rollout-json``, ``--rollout-html``)
or a directory (``--rollout-storage`` when saving) that cannot be written is refused at start,
by trying, not by permission bits (root passes every ``os.access`` check, and a read-only
filesystem fails none)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def check_writable_file(path: str | os.PathLike[str]) -> str | None:
    """Why a file cannot be written at ``path`` (None: it can). Nothing is changed: an existing
    file is opened for appending and closed; a new one is not created (its directory is
    tried with a temporary file, removed at once)."""
    target = Path(path)
    if target.exists():
        try:
            with open(target, "ab"):
                pass
        except OSError as exc:
            return exc.strerror or str(exc)
        return None
    return check_writable_directory(target.parent)


def check_writable_directory(path: str | os.PathLike[str]) -> str | None:
    """Why a file cannot be made in the directory ``path`` (None: it can)."""
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rollout-tax-probe-"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
