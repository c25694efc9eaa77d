"""A test's identity across runs: its node id relative to the rootdir pytest picks from the
test paths alone.

pytest's rootdir is the common ancestor of the command line's paths, and before the plugins
are loaded it counts an option's value too when it names an existing path
(``--rollout-storage DIR``, the space form): a folder that exists only on the second run moves
the rootdir, and with it every node id (``m/test_p.py::t`` where the first run said
``test_p.py::t``). The identity here is the rootdir computed the same way without any option
value, so shards, merges, saved runs and per-test comparisons name a test the same on every
run; wherever the option values did not move the rootdir it is the node id itself, so saved
runs from before still compare.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path

import pytest

_root_key = pytest.StashKey[Path]()


def identity_root(config: pytest.Config) -> Path:
    """The rootdir pytest would pick from the test paths, ``--rootdir`` and ``-c`` alone."""
    root = config.stash.get(_root_key, None)
    if root is None:
        root = _positional_rootdir(config)
        config.stash[_root_key] = root
    return root


def _positional_rootdir(config: pytest.Config) -> Path:
    # pytest's own rule (a private function whose arguments changed across versions): given
    # only what the call takes, else pytest's rootdir.
    try:
        from _pytest.config.findpaths import determine_setup

        option = config.option
        known = {
            "inifile": getattr(option, "inifilename", None),
            "override_ini": getattr(option, "override_ini", None),
            "args": [str(arg) for arg in getattr(option, "file_or_dir", None) or ()],
            "rootdir_cmd_arg": getattr(option, "rootdir", None) or None,
            "invocation_dir": config.invocation_params.dir,
            "config": config,
        }
        taken = inspect.signature(determine_setup).parameters
        # its parameters vary across pytest releases: called with those this one takes
        setup: Callable[..., tuple[Path, object, object, object]] = determine_setup
        rootdir = setup(**{k: v for k, v in known.items() if k in taken})[0]
        return Path(rootdir).resolve()
    except Exception:  # a pytest that computes it otherwise: its own rootdir
        return config.rootpath


def identity_of(item: pytest.Item) -> str:
    """``item``'s node id, its path made relative to :func:`identity_root`."""
    nodeid = item.nodeid
    root = identity_root(item.config)
    rootpath = item.config.rootpath
    if root == rootpath:
        return nodeid
    path, separator, rest = nodeid.partition("::")
    absolute = os.path.normpath(rootpath / path) if path else str(rootpath)
    relative = Path(os.path.relpath(absolute, root)).as_posix()
    return f"{'' if relative == '.' else relative}{separator}{rest}"
