"""The report's outputs: each module one output (a file, another plugin's report) that
declares its own options and implements the ``pytest_rollout_tax_report`` hook, which hands
it the session's outcome and takes back its result (outcome.py); the plugin registers every
module here, so a new output is one module."""

from __future__ import annotations

from typing import Any, Literal

import pytest

#: The types an ini option may have (``pytest.Parser.addini``).
IniType = Literal["string", "paths", "pathlist", "args", "linelist", "bool", "int", "float"]
#: The plugin's option group, which every output's options join.
GROUP = ("rollout-tax", "rollout tax (latency of execution substrates)")


def add_option(
    parser: pytest.Parser,
    flag: str,
    help_text: str,
    ini_type: IniType,
    ini_default: Any,
    **kwargs: Any,
) -> None:
    """``flag`` in the plugin's group, with its ini twin (``--rollout-json``: rollout_json)."""
    name = ini_name(flag)
    parser.getgroup(*GROUP).addoption(flag, dest=name, help=f"{help_text} [ini: {name}]", **kwargs)
    parser.addini(name, help_text, type=ini_type, default=ini_default)


def ini_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def option(config: pytest.Config, flag: str) -> Any:
    """The command-line value of an option, else its ini twin."""
    name = ini_name(flag)
    value = config.getoption(name)
    return config.getini(name) if value is None or value == [] else value


def spelled(config: pytest.Config, flag: str) -> str:
    """How an option's value was given, for a message: the flag, else its ini twin's name."""
    name = ini_name(flag)
    value = config.getoption(name)
    return flag if value is not None and value != [] else f"{name} (ini)"


def is_controller(config: pytest.Config) -> bool:
    """Whether this process writes the outputs (not an xdist worker)."""
    return not hasattr(config, "workerinput")
