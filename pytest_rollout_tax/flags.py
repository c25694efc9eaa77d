"""The options the pytest plugin and the command line share, each declared once with the one
function that parses its value: ``--rollout-fleet 1e3`` and ``project --fleet 1e3`` agree.

The plugin spells a flag ``--rollout-<stem>`` (and its ini twin ``rollout_<stem>``), the
command line ``--<stem>``, as pytest-benchmark's ``add_display_options(addoption, prefix)``
does; ``--rollout-compare-fail`` is the command line's ``--fail``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .core.files import check_report_path
from .core.limits import LIMITS
from .core.stats import STAT_NAMES
from .errors import PlotsUnavailable
from .gate.compare import Check
from .page import plots
from .report.schema import SAMPLE_METRICS
from .report.train_model import TrainModel

#: The largest count an option takes (rollouts to project, comparisons, ...).
MAX_COUNT = 10**12
#: The most concurrent workers a fleet projection takes (``--rollout-fleet``, ``--fleet``).
MAX_WORKERS = 10_000_000


def count(text: str, ceiling: int = MAX_COUNT) -> int:
    """A whole number from 1 to ``ceiling``: ``1000``, ``1_000`` or ``1e3``."""
    try:
        number = float(str(text).replace("_", ""))
    except ValueError:
        raise ValueError(f"expected a positive integer, got {text!r}") from None
    if not math.isfinite(number) or number < 1 or number != int(number):
        raise ValueError(f"expected a positive integer, got {text!r}")
    if number > ceiling:
        raise ValueError(f"expected a positive integer, at most {ceiling:,}, got {text!r}")
    return int(number)


def seconds(text: str) -> float:
    """A finite number of seconds, 0 or more: ``0``, ``2.5``, ``1e-3``."""
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"expected seconds >= 0, got {text!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected seconds >= 0, got {text!r}")
    bound = LIMITS["--rollout-think-time"]
    if number > bound.high:
        raise ValueError(f"expected {bound.text()}, got {text!r}")
    return number


def rollouts(text: str) -> int:
    """Rollouts to project: a count up to the ``--rollout-project rollouts`` bound."""
    return count(text, int(LIMITS["--rollout-project rollouts"].high))


def steps(text: str) -> int:
    """Steps per projected rollout: a count up to the ``--rollout-project steps`` bound."""
    return count(text, int(LIMITS["--rollout-project steps"].high))


def projection(text: str) -> tuple[int, int | None]:
    """``NxS`` or ``N`` alone (``1000000x150``, ``1e6x150``, ``1_000_000``): N by
    :func:`rollouts`, S by :func:`steps` (None: not given)."""
    head, sep, tail = str(text).strip().lower().partition("x")
    return _part(rollouts, head, "ROLLOUTS"), _part(steps, tail, "STEPS") if sep else None


def _part(parse: Callable[[str], int], text: str, name: str) -> int:
    try:
        return parse(text.strip())
    except ValueError as exc:
        raise ValueError(
            f"expected ROLLOUTSxSTEPS (or ROLLOUTS alone), e.g. 1000000x150; {name}: {exc}"
        ) from None


def report_path(text: str, spelled: str) -> str:
    """A file a report can be written to: not a directory, a special file or a place that
    cannot be written; a ValueError names the flag as ``spelled`` and the path."""
    check_report_path(text, f"{spelled}={text}")
    return text


def page_path(text: str, spelled: str) -> str:
    """:func:`report_path`, for the HTML page, which needs matplotlib (the [html] extra)."""
    report_path(text, spelled)
    try:
        plots.require()
    except PlotsUnavailable as exc:
        raise ValueError(f"{spelled}={text}: {exc}") from None
    return text


def rank_by(text: str) -> str:
    """``worker-hours``, ``cost`` or ``train``, as the report records it (``worker_hours``,
    ``cost``, ``train``)."""
    spelled = str(text).strip().replace("_", "-")
    if spelled not in ("worker-hours", "cost", "train"):
        raise ValueError(f"expected worker-hours, cost or train, got {text!r}")
    return spelled.replace("-", "_")


@dataclass(frozen=True)
class Flag:
    """An option both front ends have."""

    stem: str
    metavar: str
    help: str
    #: Parses the option's text (a ValueError's message says what was expected), or None.
    parse: Callable[..., Any] | None = None
    #: The command line's stem, where it differs from the plugin's.
    cli_stem: str | None = None
    #: ``parse`` takes the flag as spelled too and names it in its errors (a path, a check):
    #: the command line calls :meth:`value` rather than letting argparse parse it.
    named: bool = False

    @property
    def plugin(self) -> str:
        return f"--rollout-{self.stem}"

    @property
    def cli(self) -> str:
        return f"--{self.cli_stem or self.stem}"

    def value(self, text: str, spelled: str) -> Any:
        """``text`` parsed; a ValueError names the flag as ``spelled`` (``--rollout-fleet``)."""
        if self.parse is None:
            return text
        if self.named:
            return self.parse(text, spelled)
        try:
            return self.parse(text)
        except ValueError as exc:
            raise ValueError(f"{spelled}={text!r}: {exc}") from None

    def add_argument(
        self, parser: argparse.ArgumentParser, *short: str, help: str | None = None, **kwargs: Any
    ) -> None:
        """Add this flag (and its ``short`` spellings) to a command-line parser, parsed by the
        flag's own function; ``help`` says what a command does with it, where that differs."""
        if self.parse and not self.named:
            kwargs["type"] = argparse_type(self.parse)
        parser.add_argument(
            *short, self.cli, metavar=self.metavar, help=help or self.help, **kwargs
        )


def argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse ``type``: its ValueError becomes argparse's usage error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


STORAGE = Flag("storage", "DIR", "where saved runs live (default .rollout-tax/)")
FLEET = Flag(
    "fleet",
    "W",
    "also project wall-clock hours and worker-hours on W concurrent workers, using the burst "
    "level nearest to W when one was measured",
    parse=lambda text: count(text, MAX_WORKERS),
)
RANK_BY = Flag(
    "rank-by",
    "worker-hours|cost|train",
    "rank substrates by projected worker-hours (the default), by dollars, for substrates "
    "with a price (the decision names the other beside it), or by the training step's "
    "wall-clock (--rollout-train's model, its defaults when not given)",
    parse=lambda text: rank_by(text),
)
TRAIN = Flag(
    "train",
    "batch=N,slots=N,mode=sync|async,train=S[,lag=N,gpus=N,gpu_price=USD,failed=retry|drop]",
    "also project the training step the measured rollouts make, tails included: batch "
    "rollouts per step (default 512) on slots sandboxes at once (default: batch), sync or "
    "async (default sync; async: generation up to lag steps ahead, default 1), the "
    "trainer's own train seconds per step (default 60), gpus waiting (default 8) at "
    "gpu_price dollars per GPU-hour (default: none), failed rollouts retried or dropped "
    "(default retry); 'default' takes every default",
    parse=TrainModel.parse,
)
THINK_TIME = Flag(
    "think-time",
    "SECONDS",
    "agent think time per step, added to projected worker-hours, not to tax-hours",
    parse=seconds,
)
PROJECT = Flag(
    "project",
    "NxS",
    "project worker-hours for N rollouts of S steps (default 1000000x150, S the replays' "
    "mean recorded length when every rollout is a replay; N alone: S from each marker's "
    "steps)",
    parse=projection,
)
#: ``--rollout-project``'s N and S, as the command line's ``project`` takes them.
ROLLOUTS = Flag("rollouts", "N", "rollouts to project, e.g. 1000000 or 1e6", parse=rollouts)
STEPS = Flag("steps", "S", "steps (tool calls) per rollout", parse=steps)
JSON = Flag(
    "json",
    "PATH",
    "write the full report (schema rollout-tax/2) to PATH",
    parse=report_path,
    named=True,
)
HTML = Flag(
    "html",
    "PATH",
    "write the report as one self-contained HTML page with plots to PATH "
    "(needs the [html] extra: matplotlib)",
    parse=page_path,
    cli_stem="output",
    named=True,
)
FAIL = Flag(
    "compare-fail",
    "METRIC.STAT:THRESHOLD",
    "fail when METRIC.STAT regressed past THRESHOLD (repeatable). METRIC: "
    f"{', '.join(SAMPLE_METRICS)}, worker_hours, cost, infra_failed; STAT: "
    f"{', '.join(STAT_NAMES)} (worker_hours and cost: mean only; cost: a percentage; "
    "infra_failed: rate only, in percentage points); THRESHOLD: a percentage of the "
    "baseline (15%%) or an absolute us, ms, s, min or h (5ms, 0.2s), e.g. cold_start.p95:15%%",
    parse=Check.parse,
    cli_stem="fail",
    named=True,
)
#: A training run's logs and how to read them (docs/training-logs.md).
TRAIN_LOG = Flag(
    "train-log",
    "FILE",
    "a training run's log (JSONL, W&B history CSV, TensorBoard events or log lines of verl, "
    "SkyRL, slime, NeMo-RL, AReaL, prime-rl or ROLL; repeatable, the files of one run): its "
    "trainer wait, environment share, stragglers and what each measured substrate would change",
)
GPUS = Flag(
    "train-gpus",
    "N",
    "the training run's GPU count: its trainer's wait in idle GPU-hours",
    parse=lambda text: count(text, MAX_WORKERS),
    cli_stem="gpus",
)
RAN_ON = Flag(
    "train-ran-on",
    "SUBSTRATE",
    "the measured substrate the training run's environment ran on (default: its tool time is "
    "taken as free of sandbox tax)",
    cli_stem="ran-on",
)


def missing(text: str) -> str:
    """What a gate does when its baseline does not exist: ``fail`` or ``pass``."""
    spelled = str(text).strip().lower()
    if spelled not in ("fail", "pass"):
        raise ValueError(f"expected fail or pass, got {text!r}")
    return spelled


MISSING = Flag(
    "compare-missing",
    "fail|pass",
    "what a gated run (with --rollout-compare-fail) does when its baseline does not exist: "
    "fail (the default: a usage error naming the saved runs there are) or pass (the explicit "
    "opt-out for a first run: the checks are not applied)",
    parse=missing,
    cli_stem="missing",
)
STRICT = Flag(
    "compare-strict",
    "",
    "refuse (a usage error) to compare a substrate measured on another testbed (client host "
    "class, CPUs, endpoint, provider, transport) than the baseline's; without it, a warning "
    "names what differs",
    cli_stem="strict",
)
CONTROL = Flag(
    "control",
    "NAME",
    "a substrate or variant run interleaved with the others as the gate's control: each "
    "check's change on it is divided out of the others' (a ratio of ratios), so that a "
    "provider-wide drift is not read as a regression",
)
