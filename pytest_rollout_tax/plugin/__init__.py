"""The pytest front end: hooks, fixtures, options, the marker, replay collection.

``pytest_rollout_tax.plugin`` is the entry point pytest loads: it registers the module-level
hooks of hooks.py, which install the session's plugin object."""

from .hooks import (
    pytest_addhooks,
    pytest_addoption,
    pytest_cmdline_main,
    pytest_configure,
    pytest_load_initial_conftests,
    pytest_plugin_registered,
)

__all__ = [
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_cmdline_main",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_plugin_registered",
]
