"""``python -m pytest_rollout_tax train-log``: a training run's own logs, its figures and what
each substrate of a rollout-tax report would change (train_logs/, docs/training-logs.md); the
command line (``cli/__init__.py``) adds it with :func:`add_parser`."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from .. import flags
from ..core.files import write_json
from ..errors import NoSavedRun, UsageError
from ..gate.compare import EXIT_OK
from ..gate.storage import Storage
from ..summary.train_log import training_lines
from ..train_logs import section as training


def add_parser(commands: Any, parents: list[argparse.ArgumentParser], epilog: str) -> None:
    """The ``train-log`` command among ``commands`` (argparse's subparsers)."""
    train = commands.add_parser(
        "train-log",
        parents=parents,
        help="a training run's trainer wait and environment share, and what another substrate "
        "would change",
        description="Read a training run's own logs (JSONL, W&B history CSV, TensorBoard "
        "events, log lines; verl, SkyRL, slime/Miles, NeMo-RL, AReaL, prime-rl, ROLL, told by "
        "the keys found): one record per step, the trainer's wait share, the environment's "
        "share of trajectory time, straggler steps, idle GPU-hours; with a rollout-tax report, "
        "the run's environment part re-projected onto each measured substrate. See "
        "docs/training-logs.md.",
        epilog=epilog,
    )
    train.add_argument("files", nargs="+", metavar="FILE", help="the log files of one run")
    train.add_argument(
        "--report", metavar="RUN",
        help="the rollout-tax report to compare with: a saved run's NAME or a PATH (a "
        "--rollout-json file); default: the newest saved run in --storage, if any",
    )  # fmt: skip
    flags.GPUS.add_argument(train)
    flags.RAN_ON.add_argument(train)
    flags.STEPS.add_argument(
        train, help="tool calls per trajectory (default: the report's steps per rollout)"
    )
    train.add_argument(
        "--json", nargs="?", const="-", metavar="PATH",
        help="write the section as JSON to PATH (no PATH: to standard output, alone)",
    )  # fmt: skip


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.json and args.json != "-":
        flags.JSON.value(args.json, flags.JSON.cli)
    asked = training.Asked(tuple(args.files), args.gpus, args.ran_on, args.steps)
    log = asked.read()
    try:
        saved = Storage.at(args.storage).load(args.report)
    except NoSavedRun as exc:
        if args.report:
            raise UsageError(f"--report: {exc}") from None
        section = training.training(log, None, gpus=args.gpus, no_report=f"{exc} (--report)")
    else:
        section = asked.section(log, saved.report, saved.label)
    if args.json == "-":
        out.write(json.dumps(section.to_dict(), indent=2) + "\n")
        return EXIT_OK
    for line in training_lines(section):
        out.write(line + "\n")
    if args.json:
        try:
            out.write(f"section written to {write_json(args.json, section.to_dict())}\n")
        except OSError as exc:
            raise UsageError(f"--json={args.json}: cannot write: {exc.strerror or exc}") from None
    return EXIT_OK
