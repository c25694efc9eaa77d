"""``summarize DIR``: the report of the rollouts a live run recorded (docs/record.md)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any, TextIO

from .. import __version__, flags, recording
from ..core.files import write_json
from ..errors import UsageError
from ..gate import compare
from ..gate.storage import Storage
from ..page import html as html_report
from ..report.build import for_saving
from ..report.projection import Scale
from ..report.training import training_model, with_training
from ..summary.terminal import render_summary


def add_parser(commands: Any, parents: list[argparse.ArgumentParser], epilog: str) -> None:
    """The ``summarize`` command among ``commands`` (argparse's subparsers)."""
    rec = commands.add_parser(
        "summarize",
        parents=parents,
        help="the report of a record-mode directory (pytest_rollout_tax.record)",
        description="Build the report of the rollouts a live run recorded in DIR (every "
        "journal in it: one per process), print its summary, and write its JSON, page or "
        "saved run as asked; gate the saved run with compare --fail. Rollouts a killed "
        "process began and never ended count as interrupted. See docs/record.md.",
        epilog=epilog,
    )
    rec.add_argument("directory", metavar="DIR", help="the directory the recorders wrote")
    flags.PROJECT.add_argument(rec)
    flags.THINK_TIME.add_argument(rec, help="think time per step (default: measured live)")
    flags.RANK_BY.add_argument(rec)
    flags.TRAIN.add_argument(rec)
    flags.JSON.add_argument(rec)
    flags.HTML.add_argument(rec, help="write the report's HTML page to PATH")
    rec.add_argument("--save", metavar="NAME", help="save the report as STORAGE/NAME.json")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.json:
        flags.JSON.value(args.json, flags.JSON.cli)
    if args.output:
        flags.HTML.value(args.output, flags.HTML.cli)
    storage = Storage.at(args.storage)
    if args.save:
        storage.check_writable(args.save)
    scale = Scale.asked(args.project, args.think_time)
    if args.rank_by:
        scale = dataclasses.replace(scale, rank_by=args.rank_by)
    report, recorded = recording.report_of(args.directory, scale, plugin_version=__version__)
    report = with_training(report, training_model(args.train, report, args.rank_by))
    lines = [*render_summary(report), *recording.notes(recorded)]
    title = html_report.run_title(report, args.directory)
    # what was asked, how it is written (the path it wrote), what the line calls it
    outputs: list[tuple[str | None, Callable[[], object], str]] = [
        (args.json, lambda: write_json(args.json, report.to_dict()), "report"),
        (
            args.output,
            lambda: html_report.write(args.output, html_report.render(report, title=title)),
            "HTML report",
        ),
        (args.save, lambda: storage.save(args.save, for_saving(report)), "saved run"),
    ]
    for target, write, what in outputs:
        if target:
            try:
                lines.append(f"{what} written to {write()}")
            except OSError as exc:
                raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from None
    out.write("".join(line + "\n" for line in lines))
    return compare.EXIT_OK
