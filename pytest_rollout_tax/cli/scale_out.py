"""``merge`` and ``ray``: one report from a run's shards, and shards run as Ray tasks
(docs/scale-out.md)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..core.files import check_report_path
from ..gate import compare
from ..gate.storage import Storage
from ..report import merge
from ..summary.terminal import render_summary
from .common import COUNT, load_required


def add_parsers(commands: Any, parents: list[argparse.ArgumentParser], epilog: str) -> None:
    """The ``merge`` and ``ray`` commands among ``commands`` (argparse's subparsers)."""
    mrg = commands.add_parser(
        "merge",
        parents=parents,
        help="merge the reports of a run's shards (--rollout-shard) into one",
        description="One report from many shards' saved runs or JSON reports: every rollout "
        "once, with its shard and client; percentiles and hours recomputed from the raw "
        "samples; bursts aligned by epoch time. Refused (exit 4): a rollout in two reports, "
        "different workloads, different projection settings (unless --force). See "
        "docs/scale-out.md.",
        epilog=f"exit status: {compare.EXIT_OK} merged; {compare.EXIT_USAGE} bad input or a "
        "refused merge (unreadable or invalid file, a rollout twice, different workloads or "
        "projection settings).",
    )
    mrg.add_argument("runs", nargs="+", metavar="RUN", help="a shard's run: a NAME or a PATH")
    mrg.add_argument("-o", "--output", required=True, metavar="PATH", help="the merged report")
    mrg.add_argument(
        "--force", action="store_true", help="merge different projection settings (the first's)"
    )
    ray = commands.add_parser(
        "ray",
        help="run N shards as Ray tasks, then merge them (needs the [ray] extra)",
        description="Run pytest PYTEST_ARGS --rollout-shard K/N for K in 0..N-1 as Ray tasks, "
        "each in this directory (shipped as the tasks' runtime_env working_dir), then merge "
        "their reports into OUTPUT and print the merged summary. A failed or lost shard is "
        "named with its error; the merge of the others is still written, marked incomplete "
        "(exit 1).",
        epilog=epilog,
    )
    ray.add_argument("--address", metavar="ADDR", help="a Ray cluster (default: a local one)")
    ray.add_argument("--shards", type=COUNT, required=True, metavar="N", help="shards to run")
    ray.add_argument(
        "-o", "--output", default="rollout-tax-merged.json", metavar="PATH",
        help="the merged report (default: %(default)s)",
    )  # fmt: skip
    ray.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS")


def run_merge(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    check_report_path(args.output, f"--output={args.output}")
    storage = Storage.at(args.storage)
    runs = [load_required(storage, ref, "RUN") for ref in args.runs]
    parts = [merge.Part(str(run.path), run.report) for run in runs]
    report, written = merge.write(parts, args.output, force=args.force)
    for line in [*render_summary(report), f"merged report written to {written}"]:
        out.write(line + "\n")
    return compare.EXIT_OK


def run_ray(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..integrations import ray

    check_report_path(args.output, f"--output={args.output}")
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    return ray.drive(args.address, args.shards, pytest_args, args.output, out)
