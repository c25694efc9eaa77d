"""Installed is not active: whether the user asked the plugin for anything, and its options
yielding to another plugin's (or a conftest's) option of the same name, said in one line."""

from __future__ import annotations

from typing import Any

import pytest

#: The name of the plugin's option group.
GROUP = "rollout-tax"


def asked(config: pytest.Config, dests: list[str], ini_defaults: dict[str, Any]) -> bool:
    """Whether any of the plugin's options (``dests``) is given on the command line, or any
    of its ini keys (``ini_defaults``: name -> default) holds a value other than its default."""
    for dest in dests:
        if config.getoption(dest, None) not in (None, [], False):
            return True
    return any(
        config.getini(name) not in (None, "", [], default) for name, default in ini_defaults.items()
    )


class OptionYield:
    """The plugin's options give way to an option of the same name added after them: theirs
    works as without the plugin, ours is dropped (its ini twin stays), and :meth:`lines` says
    so, one line per name, naming both sides.

    The yield happens where argparse checks a new option's names against the ones it has,
    the one place every pytest version passes through (pytest 9.0 tells its option hook
    before adding an option, 9.2 after); a clash between two other plugins is left to
    argparse, as without the plugin."""

    def __init__(self, parser: pytest.Parser, ini_of: dict[str, str]) -> None:
        self.parser = parser
        #: Our flag -> its ini twin.
        self.ini_of = ini_of
        #: Flags dropped, waiting for the plugin that took them to be named.
        self.pending: list[str] = []
        #: (flag, owner) of every clash.
        self.clashes: list[tuple[str, str]] = []
        optparser = parser.optparser
        for container in [optparser, *optparser._action_groups]:
            self._watch(container)
        add_group = optparser.add_argument_group

        def add_argument_group(*args: Any, **kwargs: Any) -> Any:
            return self._watch(add_group(*args, **kwargs))

        optparser.add_argument_group = add_argument_group  # type: ignore[method-assign]

    def taken(self, flag: str) -> bool:
        """Whether ``flag`` is already another plugin's (registered before this one)."""
        if flag in self.parser.optparser._option_string_actions:
            self.clashes.append((flag, "an earlier plugin"))
            return True
        return False

    def _watch(self, container: Any) -> Any:
        """Make ``container`` (the parser or one of its groups) drop our option of a name a
        new option brings, before argparse checks it for conflicts."""
        check = container._check_conflict

        def check_conflict(action: Any) -> None:
            for name in action.option_strings:
                if name in self.ini_of and self._ours(name):
                    self._drop(name)
                    self.pending.append(name)
            check(action)

        container._check_conflict = check_conflict
        return container

    def _group(self) -> Any:
        return next((g for g in self.parser._groups if g.name == GROUP), None)

    def _ours(self, name: str) -> bool:
        group = self._group()
        return group is not None and any(name in option.names() for option in group.options)

    def _drop(self, name: str) -> None:
        """Remove our option ``name`` (as argparse's ``resolve`` would, for ours only)."""
        group = self._group()
        group.options[:] = [option for option in group.options if name not in option.names()]
        action = self.parser.optparser._option_string_actions.pop(name)
        if isinstance(action.option_strings, list):  # argparse keeps a list
            action.option_strings.remove(name)
        if not action.option_strings:
            # argparse sets ``container`` on every action it adds; its stubs do not declare it
            vars(action)["container"]._remove_action(action)

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
