"""``--rollout-json``: the whole report, written atomically (docs/json.md)."""

from __future__ import annotations

import pytest

from .. import flags
from ..core.files import write_json
from . import add_option, option
from .outcome import OutputResult, SessionOutcome

FLAG = flags.JSON.plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, flags.JSON.help, "string", None, metavar=flags.JSON.metavar)


def pytest_configure(config: pytest.Config) -> None:
    """A path that cannot be written is a usage error before any test runs."""
    path = option(config, FLAG)
    if path:
        try:
            flags.JSON.value(path, FLAG)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)
def pytest_rollout_tax_report(config: pytest.Config, outcome: SessionOutcome) -> OutputResult:
    path = option(config, FLAG)
    if not path:
        return OutputResult()
    try:
        written = write_json(path, outcome.report.to_dict())
    except OSError as exc:
        return OutputResult.error(f"cannot write {path}: {exc.strerror or exc}")
    return OutputResult((f"report written to {written}",))
