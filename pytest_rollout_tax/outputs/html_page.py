"""``--rollout-html``: the self-contained HTML page of the run (page/), with the baseline and
the gate's verdict when the run was compared."""

from __future__ import annotations

import pytest

from .. import flags
from ..page import html
from ..summary.train_log import training_lines
from . import add_option, option
from .outcome import OutputResult, SessionOutcome
from .train_log import section_of

FLAG = flags.HTML.plugin


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, flags.HTML.help, "string", None, metavar=flags.HTML.metavar)


def written_files(config: pytest.Config) -> list[tuple[str, str | None]]:
    """The file this output writes (``plugin/output_paths.py``: one path, one output)."""
    path = option(config, FLAG)
    return [(f"{FLAG}={path}", path)]


def pytest_configure(config: pytest.Config) -> None:
    """A path that cannot be written, or no matplotlib, is a usage error before any test."""
    path = option(config, FLAG)
    if path:
        try:
            flags.HTML.value(path, FLAG)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(trylast=True)
def pytest_rollout_tax_report(config: pytest.Config, outcome: SessionOutcome) -> OutputResult:
    path = option(config, FLAG)
    if not path:
        return OutputResult()
    baseline, saved = outcome.baseline, outcome.saved  # saved before every output
    name = saved[0].name if saved else option(config, flags.JSON.plugin)
    try:
        page = html.render(
            outcome.report,
            baseline=baseline.report if baseline else None,
            baseline_label=baseline.label if baseline else "",
            verdict=outcome.verdict if outcome.compared else None,
            title=html.run_title(outcome.report, name),
            summary=outcome.summary,
            train_log=training_lines(section)
            if (section := section_of(config, outcome.report))
            else (),
            history=outcome.verdict.history,
        )
        written = html.write(path, page)
    except OSError as exc:
        return OutputResult.error(f"cannot write {path}: {exc.strerror or exc}")
    return OutputResult((f"HTML report written to {written}",))
