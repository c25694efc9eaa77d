"""The output hook, each implementation called on its own: an output that raises or returns
what is not a result costs only itself.

pluggy stops a hook at the first implementation that raises, so one broken output (a
third party's ``conftest.py``) would lose every other output's lines and the summary. Here each
implementation (``get_hookimpls()``, in pluggy's order, wrappers around the rest) is called
alone, and what goes wrong becomes a failed :class:`~..outputs.outcome.OutputResult` whose
one ``rollout-tax: error:`` line names it: the run's exit status then says an output failed,
as for a file that could not be written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from ..core.transport import one_line
from ..outputs.outcome import OutputResult, Returned

#: Methods whose absence on the report's parts means an output tried to change them.
_MUTATORS = frozenset(
    ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
     "setdefault", "popitem", "add", "discard", "__setitem__", "__delitem__")
)  # fmt: skip


def call_outputs(config: pytest.Config, **arguments: Any) -> list[OutputResult]:
    """Call every ``pytest_rollout_tax_report`` implementation with ``config`` and
    ``arguments``; their results in pluggy's order (the wrappers' own first and last), a
    failed result in place of each implementation that failed."""
    kwargs = {"config": config, **arguments}
    impls = config.hook.pytest_rollout_tax_report.get_hookimpls()
    wrappers: list[tuple[pluggy.HookImpl, Generator[Any, Any, Any]]] = []
    results: list[Returned] = []
    failed: list[OutputResult] = []
    for impl in reversed(impls):  # pluggy calls the last registered first
        args = [kwargs[name] for name in impl.argnames]
        try:
            if impl.wrapper or impl.hookwrapper:
                wrapper = impl.function(*args)
                if not isinstance(wrapper, Generator):
                    raise TypeError(f"{impl.plugin_name}: a hook wrapper that does not yield")
                next(wrapper)
                wrappers.append((impl, wrapper))
                continue
            returned = _checked(impl.function(*args))
        except Exception as exc:  # the output's own fault: it costs only itself
            results.append(failure(config, impl, exc))
            continue
        if returned is not None:
            results.append(returned)
    for impl, wrapper in reversed(wrappers):
        try:
            results = _unwind(impl, wrapper, results)
        except Exception as exc:
            failed.append(failure(config, impl, exc))
    return [*map(OutputResult.of, results), *failed]


def _checked(value: Any) -> Returned:
    """An implementation's return value, which must be a result, None or lines (a list of
    str)."""
    if value is None or isinstance(value, OutputResult):
        return value
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"returned {type(value).__name__}, not a result or a list of lines")
    wrong = next((item for item in value if not isinstance(item, str)), None)
    if wrong is not None:
        raise TypeError(f"returned a list holding {type(wrong).__name__}, not only lines (str)")
    return list(value)


def _unwind(
    impl: pluggy.HookImpl, wrapper: Generator[Any, Any, Any], results: list[Returned]
) -> list[Returned]:
    """Send a wrapper what the implementations inside it returned; what it returns."""
    if impl.hookwrapper:  # old style: it reads (and may replace) a Result
        outcome = pluggy.Result(results, None)
        try:
            wrapper.send(outcome)
        except StopIteration:
            returned = outcome.get_result()
        else:
            raise RuntimeError("the wrapper yielded twice")
    else:
        try:
            wrapper.send(results)
        except StopIteration as stop:
            returned = stop.value
        else:
            raise RuntimeError("the wrapper yielded twice")
    if not isinstance(returned, list):
        raise TypeError(f"returned {type(returned).__name__}, not every output's results")
    return [result for item in returned if (result := _checked(item)) is not None]


def failure(config: pytest.Config, impl: pluggy.HookImpl, exc: Exception) -> OutputResult:
    """The result of an implementation that failed: one line, which output and what went
    wrong."""
    name = plugin_name(config, impl)
    error = one_line(f"{type(exc).__name__}: {exc}".rstrip(": "))
    if changes_the_report(exc):
        return OutputResult.error(
            f"output {name} tried to change the report, which is read-only ({error})"
        )
    return OutputResult.error(f"output {name} failed: {error}")


def changes_the_report(exc: Exception) -> bool:
    """Whether ``exc`` is what an attempt to change a read-only value raises."""
    if isinstance(exc, dataclasses.FrozenInstanceError):
        return True
    if isinstance(exc, AttributeError):
        return exc.name in _MUTATORS
    return isinstance(exc, TypeError) and "does not support item" in str(exc)


def plugin_name(config: pytest.Config, impl: pluggy.HookImpl) -> str:
    """An implementation's plugin as a user knows it: a ``conftest.py``'s path from the
    rootdir, a module's name, else the name it was registered under."""
    module_file = getattr(impl.plugin, "__file__", None)
    if module_file:
        path = Path(module_file)
        if path.is_relative_to(config.rootpath):
            return str(path.relative_to(config.rootpath))
        return getattr(impl.plugin, "__name__", impl.plugin_name)
    return impl.plugin_name
