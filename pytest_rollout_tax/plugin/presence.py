"""Installed is not active: whether the user asked the plugin for anything, and its options
yielding to another plugin's (or a conftest's) option of the same name, said in one line."""

from __future__ import annotations

from typing import Any

import pytest

#: The name of the plugin's option group.
GROUP = "rollout-tax"


def asked(config: pytest.Config, dests: list[str]) -> bool:
    """Whether any of the plugin's options (``dests``) is given, on the command line or in
    the ini file."""
    for dest in dests:
        if config.getoption(dest, None) not in (None, [], False):
            return True
    return any(dest in config.inicfg for dest in dests)


class OptionYield:
    """The plugin's options give way to an option of the same name added after them: theirs
    works as without the plugin, ours is dropped (its ini twin stays), and :meth:`lines` says
    so, one line per name, naming both sides."""

    def __init__(self, parser: pytest.Parser, ini_of: dict[str, str]) -> None:
        self.parser = parser
        #: Our flag -> its ini twin.
        self.ini_of = ini_of
        #: Flags dropped, waiting for the plugin that took them to be named.
        self.pending: list[str] = []
        #: (flag, owner) of every clash.
        self.clashes: list[tuple[str, str]] = []
        self._process = parser.processoption
        parser.processoption = self._processoption  # type: ignore[method-assign]

    def taken(self, flag: str) -> bool:
        """Whether ``flag`` is already another plugin's (registered before this one)."""
        if any(flag in o.names() for g in self.parser._groups for o in g.options):
            self.clashes.append((flag, "an earlier plugin"))
            return True
        return False

    def _processoption(self, option: Any) -> None:
        for name in option.names():
            if name in self.ini_of and name not in self.pending and self._ours(name):
                self._drop(name)
                self.pending.append(name)
        self._process(option)

    def _ours(self, name: str) -> bool:
        group = next((g for g in self.parser._groups if g.name == GROUP), None)
        return group is not None and any(name in option.names() for option in group.options)

    def _drop(self, name: str) -> None:
        """Remove our option ``name`` (as argparse's ``resolve`` would, for ours only)."""
        group = next(g for g in self.parser._groups if g.name == GROUP)
        group.options[:] = [option for option in group.options if name not in option.names()]
        optparser = getattr(self.parser, "optparser", None)  # pytest >= 9: argparse at once
        action = optparser._option_string_actions.pop(name, None) if optparser else None
        if action is not None:
            action.option_strings.remove(name)
            if not action.option_strings:
                action.container._remove_action(action)

    def owner(self, name: str) -> None:
        """The plugin registered just now took the pending flags."""
        self.clashes += [(flag, name) for flag in self.pending]
        self.pending.clear()

    def lines(self) -> list[str]:
        return [
            f"rollout-tax: option {flag} clashes with {owner}'s {flag}, which wins; "
            f"the rollout-tax {flag} is off: set the ini key {self.ini_of[flag]} instead"
            for flag, owner in self.clashes
        ]
