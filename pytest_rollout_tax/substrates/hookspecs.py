"""pluggy hookspecs: the extension points of pytest-rollout-tax.

A package adds substrates by implementing :func:`rollout_tax_substrates` in a module named by
an entry point in the ``rollout_tax`` group::

    [project.entry-points.rollout_tax]
    modal = "my_package.rollout_tax_plugin"
"""

from __future__ import annotations

from collections.abc import Mapping

import pluggy

PROJECT = "rollout_tax"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rollout_tax_substrates() -> Mapping[str, object]:  # type: ignore[empty-body]  # a spec
    """Return the substrates a plugin provides, by name.

    Each value is a :class:`~pytest_rollout_tax.Substrate` subclass, or a ``"module:Class"``
    string imported only when that substrate is selected (so an SDK that is not installed
    costs nothing until it is asked for).
    """
