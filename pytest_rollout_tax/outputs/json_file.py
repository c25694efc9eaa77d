"""``--rollout-json``: the whole report, written atomically (docs/json.md)."""

from __future__ import annotations

from typing import Any

import pytest

from .. import flags
from ..core.files import write_json
from ..report.document import Report
from . import add_option, option
from .outcome import OutputResult, SessionOutcome
from .train_log import section_of

FLAG = flags.JSON.plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, flags.JSON.help, "string", None, metavar=flags.JSON.metavar)


def written_files(config: pytest.Config) -> list[tuple[str, str | None]]:
    """The file this output writes (``plugin/output_paths.py``: one path, one output)."""
    path = option(config, FLAG)
    return [(f"{FLAG}={path}", path)]


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
        written = write_json(path, with_training(config, outcome.report))
    except OSError as exc:
        return OutputResult.error(f"cannot write {path}: {exc.strerror or exc}")
    return OutputResult((f"report written to {written}",))


def with_training(config: pytest.Config, report: Report) -> dict[str, Any]:
    """The report's JSON, with the ``train_log`` section when ``--rollout-train-log`` asked."""
    document = report.to_dict()
    if (section := section_of(config, report)) is not None:
        document["train_log"] = section.to_dict()
    return document
