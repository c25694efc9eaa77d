"""``--rollout-train-log``: a training run's own logs beside the session's figures: its
trainer wait, environment share and stragglers, and what each substrate this session measured
would change (train_logs/, docs/training-logs.md); the JSON report's ``train_log`` key and the
page's section carry the same."""

from __future__ import annotations

import pytest

from .. import flags
from ..errors import TrainLogError
from ..report.document import Report
from ..summary.train_log import training_lines
from ..train_logs.load import TrainLog
from ..train_logs.section import Asked, Training
from . import add_option, is_controller, option
from .outcome import OUTPUT_ERROR, OutputResult, SessionOutcome

FLAG = flags.TRAIN_LOG.plugin
#: The options and the log read at configure time.
ASKED = pytest.StashKey[tuple[Asked, TrainLog]]()
#: The section, made once for every output that shows it: (section, error line).
SECTION = pytest.StashKey[tuple[Training | None, str | None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_option(parser, FLAG, flags.TRAIN_LOG.help, "args", [], action="append",
               metavar=flags.TRAIN_LOG.metavar)  # fmt: skip
    for flag in (flags.GPUS, flags.RAN_ON):
        add_option(parser, flag.plugin, flag.help, "string", None, metavar=flag.metavar)


def pytest_configure(config: pytest.Config) -> None:
    """The logs are read now: a file that is no training log is a usage error before any
    test runs."""
    paths = option(config, FLAG)
    if not paths or not is_controller(config):
        return
    try:
        gpus = option(config, flags.GPUS.plugin)
        asked = Asked(
            tuple(paths),
            gpus=flags.GPUS.value(gpus, flags.GPUS.plugin) if gpus else None,
            ran_on=option(config, flags.RAN_ON.plugin) or None,
        )
        config.stash[ASKED] = (asked, asked.read())
    except (TrainLogError, ValueError) as exc:
        raise pytest.UsageError(f"{FLAG}: {exc}") from None


def section_of(config: pytest.Config, report: Report) -> Training | None:
    """The training section against this run's ``report``, made once; None when not asked or
    when it failed (the terminal's line says why)."""
    if ASKED not in config.stash:
        return None
    if SECTION not in config.stash:
        asked, log = config.stash[ASKED]
        try:
            config.stash[SECTION] = (asked.section(log, report, "this session"), None)
        except TrainLogError as exc:
            config.stash[SECTION] = (None, f"{OUTPUT_ERROR} {flags.RAN_ON.plugin}: {exc}")
    return config.stash[SECTION][0]


def pytest_rollout_tax_report(config: pytest.Config, outcome: SessionOutcome) -> OutputResult:
    section = section_of(config, outcome.report)
    if section is None:
        error = config.stash[SECTION][1] if SECTION in config.stash else None
        return OutputResult((error,), failed=True) if error else OutputResult()
    return OutputResult(tuple(training_lines(section)))
