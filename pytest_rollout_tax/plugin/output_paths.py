"""One path, one output: two outputs that would write the same file (``--rollout-json`` and
``--rollout-html`` both ``same.out``, a saved run, the Prometheus textfile, pytest's own
``--junitxml``) are a usage error before any test runs, not a file silently overwritten.

An output that writes files says which with a ``written_files(config)`` function beside its
hook (``outputs/json_file.py``): a list of ``(how it was asked, path)``; the plugin finds them
among the registered outputs, as it finds the outputs themselves."""

from __future__ import annotations

import os

import pytest

#: The names the outputs are registered under (``hooks.pytest_addhooks``).
OUTPUT_PREFIX = "rollout-tax-output-"


def written_files(config: pytest.Config) -> list[tuple[str, str]]:
    """Each file the run's outputs will write, as ``(how it was asked, its resolved path)``."""
    given: list[tuple[str, str | None]] = []
    for name, plugin in config.pluginmanager.list_name_plugin():
        declared = getattr(plugin, "written_files", None)
        if name.startswith(OUTPUT_PREFIX) and declared is not None:
            given += declared(config)
    xml = getattr(config.option, "xmlpath", None)  # pytest's --junitxml
    given.append((f"--junitxml={xml}", xml))
    return [(shown, os.path.realpath(os.path.expanduser(path))) for shown, path in given if path]


def check_distinct(config: pytest.Config) -> None:
    """Raise a usage error naming the first two outputs that would write one file."""
    seen: dict[str, str] = {}
    for shown, path in written_files(config):
        if path in seen:
            raise pytest.UsageError(
                f"{seen[path]} and {shown} would write the same file ({path}); "
                "give each output its own path"
            )
        seen[path] = shown
