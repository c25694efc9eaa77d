"""``python -m pytest_rollout_tax``: compare, list, re-project and show saved runs outside pytest
(here); merge shards and run them on Ray (scale_out.py), summarize a record-mode directory
(summarize.py), read a training run's logs (train_log.py).

Exit status, as under pytest: 0 ok, 1 a ``--fail`` check found a regression, 4 bad input
(usage, unreadable or invalid file, unknown metric or stat, malformed threshold).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from datetime import date
from importlib import resources
from typing import NoReturn, TextIO

from tabulate import tabulate

from .. import flags
from ..core import prices
from ..core.files import write_json
from ..core.noise import ALPHA, MIN_SAMPLES
from ..errors import NoSavedRun, RolloutTaxError, UsageError
from ..gate import calibrate, compare, history
from ..gate.sides import reproject
from ..gate.storage import DEFAULT_STORAGE, SavedRun, Storage, load
from ..page import html as html_report
from ..report.training import training_model, with_training
from ..summary.terminal import render_summary
from . import scale_out, summarize, train_log
from .common import COUNT, load_required

PROG = "python -m pytest_rollout_tax"
EPILOG = f"""\
exit status: {compare.EXIT_OK} ok; {compare.EXIT_REGRESSION} a --fail check found a credible \
regression; {compare.EXIT_USAGE} bad input (usage, unreadable or invalid file, unknown metric \
or stat, malformed threshold). A missing baseline is only a warning (status {compare.EXIT_OK}).
"""


class Parser(argparse.ArgumentParser):
    """argparse with the plugin's exit status for usage errors (4, not argparse's 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> Parser:
    storage = Parser(add_help=False)
    flags.STORAGE.add_argument(storage, default=DEFAULT_STORAGE)
    parser = Parser(
        prog=PROG,
        description="Compare, list and re-project runs saved by pytest --rollout-save / "
        "--rollout-autosave (schema rollout-tax/2 or /1) without re-running them.",
        epilog=EPILOG,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    cmp = commands.add_parser(
        "compare",
        parents=[storage],
        help="compare two saved runs; gate on regressions with --fail",
        description="Print, per substrate, BASELINE vs CURRENT for cold_start, action, step "
        "and teardown at p50/p95 and for projected worker-hours (at CURRENT's projection). "
        "With --fail, exit 1 when a check finds a credible regression: the threshold is "
        "crossed and a one-sided permutation test of each test's rollouts against the same "
        f"test's baseline (stratified by test) gives p < {ALPHA} (threshold alone below "
        f"{MIN_SAMPLES} rollouts a side). A missing BASELINE under --fail exits 4 unless "
        "--missing=pass.",
        epilog=EPILOG,
    )
    cmp.add_argument("baseline", metavar="BASELINE", help="the earlier run: a NAME or a PATH")
    cmp.add_argument("current", metavar="CURRENT", help="the run to judge: a NAME or a PATH")
    flags.FAIL.add_argument(cmp, action="append", default=[])
    flags.MISSING.add_argument(cmp, default="fail")
    cmp.add_argument(flags.STRICT.cli, action="store_true", help=flags.STRICT.help)
    flags.CONTROL.add_argument(cmp)

    commands.add_parser(
        "list",
        parents=[storage],
        help="list saved runs, oldest first",
        description="List the runs saved in --storage, oldest first; the last one is what "
        "--rollout-compare without a value compares with.",
        epilog=EPILOG,
    )

    page = commands.add_parser(
        "html",
        parents=[storage],
        help="write the HTML report of a saved run, optionally against a baseline",
        description="Write the page pytest --rollout-html writes, from a saved run: one "
        "self-contained HTML file with plots (needs the [html] extra: matplotlib). With "
        "BASELINE, its ECDFs and worker-hours are overlaid and the comparison (with the --fail "
        "checks' verdicts) is shown; the exit status stays 0: gate with compare.",
        epilog=EPILOG,
    )
    page.add_argument("run", metavar="RUN", help="the run to show: a NAME or a PATH")
    page.add_argument(
        "baseline", metavar="BASELINE", nargs="?", help="a run to compare with: a NAME or a PATH"
    )
    flags.HTML.add_argument(
        page, "-o", default="rollout-tax.html", help="the HTML file to write (default: %(default)s)"
    )
    flags.FAIL.add_argument(page, action="append", default=[])

    proj = commands.add_parser(
        "project",
        parents=[storage],
        help="re-project a saved run's worker-hours at another scale",
        description="Recompute worker-hours and tax-hours of a saved run for another number "
        "of rollouts, steps or think time, from its measured means, without re-running it. "
        "Options left out keep the run's own projection.",
        epilog=EPILOG,
    )
    proj.add_argument("run", metavar="RUN", help="the saved run: a NAME or a PATH")
    flags.ROLLOUTS.add_argument(proj)
    flags.STEPS.add_argument(proj)
    flags.THINK_TIME.add_argument(proj)
    flags.FLEET.add_argument(proj)
    flags.RANK_BY.add_argument(proj)
    flags.TRAIN.add_argument(proj, help=f"{flags.TRAIN.help}; unset: the run's own model, if any")
    flags.JSON.add_argument(proj, help="also write the re-projected report (in RUN's schema) here")

    cal = commands.add_parser(
        "calibrate",
        parents=[storage],
        help="measure the gate's false-alarm rate and power on a saved run",
        description="Resample a saved run's rollouts (whole rollouts, per workload, with "
        "replacement) and run the --fail checks on pairs of resamples: A against A gives the "
        "false-alarm rate (the share of comparisons where any check fails), A against A slowed "
        "uniformly by --slowdown gives the power, and a search gives the rounds per workload "
        f"needed for {calibrate.POWER_TARGET:.0%} power. Seeded: the same run, checks and "
        "--seed give the same figures.",
        epilog=EPILOG,
    )
    cal.add_argument("run", metavar="RUN", help="the saved run: a NAME or a PATH")
    flags.FAIL.add_argument(cal, action="append", default=[], required=True)
    cal.add_argument(
        "--slowdown",
        type=_slowdown,
        metavar="S",
        help="the uniform slowdown the power is measured for, e.g. 20%% (default: twice the "
        "largest threshold, relative to the run's own figure)",
    )
    cal.add_argument(
        "--comparisons",
        type=COUNT,
        default=calibrate.DEFAULT_COMPARISONS,
        metavar="N",
        help=f"comparisons per figure, at least {calibrate.MIN_COMPARISONS} (default: %(default)s)",
    )
    cal.add_argument(
        "--seed", type=int, default=0, metavar="N", help="the resampling seed (default: 0)"
    )
    flags.JSON.add_argument(cal, help="also write the figures as JSON here")

    commands.add_parser(
        "prices",
        help="the list prices cost defaults to, with their source and date",
        description="Print the shipped rate sheet: per substrate, the dollars per vCPU-, "
        "GiB- and instance-hour, a fixed fee per hour, the minimum billed per launch, the day "
        "each was read (stale after a year) and how the provider bills. Set your own with "
        "--substrate-opt NAME.price.KEY=VALUE (docs/measurement.md#dollars).",
    )

    commands.add_parser(
        "ensure-docker",
        help="a Docker engine and the sandbox image; prints export DOCKER_HOST=... for eval",
        description="Use the engine that answers (else, on Debian or Ubuntu as root, start "
        "one), then build rollout-tax/sandbox:bookworm without a registry unless it exists. "
        "Exit status: 0 ready, 1 failure, 2 manual action needed (the message says which).",
    )

    hist = commands.add_parser(
        "history",
        parents=[storage],
        help="find change points over the saved runs, per substrate and metric",
        description="Read the runs saved in --storage, oldest first, and find where each "
        "series (<substrate>.<metric>.<stat>: p50 and p95 of cold_start, action, step and "
        "teardown, and worker_hours) changed level: PELT (ruptures) proposes change points, "
        "a t-test between the runs around each keeps the credible ones. Needs "
        "pip install 'pytest-rollout-tax[history]'.",
        epilog=EPILOG,
    )
    hist.add_argument(
        "--max-p",
        type=_probability,
        default=history.MAX_P,
        metavar="P",
        help="keep change points whose t-test gives p below P (default: %(default)s)",
    )
    flags.JSON.add_argument(hist, help="also write the change points as JSON here")

    scale_out.add_parsers(commands, [storage], EPILOG)
    train_log.add_parser(commands, [storage], EPILOG)
    summarize.add_parser(commands, [storage], EPILOG)
    return parser


def _probability(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return number


def _slowdown(text: str) -> float:
    try:
        return calibrate.parse_slowdown(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- commands -----------------------------------------------------------------------------------


def _checks(args: argparse.Namespace) -> list[compare.Check]:
    """The ``--fail`` checks, each parsed as the plugin's ``--rollout-compare-fail``."""
    return [flags.FAIL.value(text, flags.FAIL.cli) for text in args.fail]


def run_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    checks = _checks(args)
    storage = Storage.at(args.storage)
    current = load_required(storage, args.current, "CURRENT")
    try:
        baseline = storage.load(args.baseline)
    except NoSavedRun as exc:
        if checks and args.missing != "pass":
            err.write(f"rollout-tax: BASELINE under --fail: {exc}; --missing=pass to allow\n")
            return compare.EXIT_USAGE
        err.write(f"rollout-tax: {exc}: nothing to compare (not failed)\n")
        return compare.EXIT_OK
    verdict = compare.compare_reports(
        baseline.report,
        current.report,
        checks,
        baseline_label=baseline.label,
        current_label=current.label,
        control=args.control,
        strict=args.strict,
    )
    for line in verdict.lines:
        out.write(line + "\n")
    return verdict.exit_status


def run_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    storage = Storage.at(args.storage)
    paths = storage.paths()
    if not paths:
        out.write(f"no saved runs in {storage}\n")
        return compare.EXIT_OK
    rows = []
    for path in paths:
        try:
            run = load(path)
        except RolloutTaxError as exc:
            rows.append([path.name, "-", "-", f"unusable: {str(exc).removeprefix(f'{path}: ')}"])
            continue
        rows.append([path.name, run.report.created or "-", _commit(run), _substrates(run)])
    headers = ("name", "created", "commit", "substrates (rollouts)")
    out.write(f"saved runs in {storage}, oldest first (the last is the default baseline):\n")
    out.write(tabulate(rows, headers=headers, tablefmt="simple", maxcolwidths=[30, 25, 20, 40]))
    out.write("\n")
    return compare.EXIT_OK


def _commit(run: SavedRun) -> str:
    commit = run.report.commit
    if not isinstance(commit, dict) or not commit.get("sha"):
        return "-"
    text = str(commit["sha"])[:12] + ("-dirty" if commit.get("dirty") else "")
    return f"{text} {commit['branch']}" if commit.get("branch") else text


def _substrates(run: SavedRun) -> str:
    entries = run.report.substrates.items()
    return ", ".join(f"{name} ({entry.rollouts})" for name, entry in entries) or "-"


def run_html(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    checks = _checks(args)
    flags.HTML.value(args.output, flags.HTML.cli)
    storage = Storage.at(args.storage)
    run = load_required(storage, args.run, "RUN")
    report = reproject(run.report, None, None, None)  # a run saved before the decomposition
    baseline, verdict = None, None
    if args.baseline:
        try:
            baseline = storage.load(args.baseline)
        except NoSavedRun as exc:
            err.write(f"rollout-tax: {exc}: the page has no baseline\n")
        else:
            verdict = compare.compare_reports(
                baseline.report,
                report,
                checks,
                baseline_label=baseline.label,
                current_label=run.label,
            )
    page = html_report.render(
        report,
        baseline=baseline.report if baseline else None,
        baseline_label=baseline.label if baseline else "",
        verdict=verdict,
        title=html_report.run_title(report, run.path.name),
    )
    try:
        path = html_report.write(args.output, page)
    except OSError as exc:
        raise UsageError(f"--output={args.output}: cannot write: {exc.strerror or exc}") from None
    out.write(f"HTML report written to {path}\n")
    return compare.EXIT_OK


def run_project(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.json:
        flags.JSON.value(args.json, flags.JSON.cli)
    run = load_required(Storage.at(args.storage), args.run, "RUN")
    report = reproject(
        run.report, args.rollouts, args.steps, args.think_time, args.fleet, args.rank_by
    )
    report = with_training(report, training_model(args.train, run.report, args.rank_by))
    written = None
    if args.json:
        try:
            written = write_json(args.json, report.to_dict())
        except OSError as exc:
            raise UsageError(f"--json={args.json}: cannot write: {exc.strerror or exc}") from None
    saved = run.report.projection
    out.write(
        f"{run.label}: re-projected from {saved.rollouts:,} rollouts x {saved.steps} steps"
        f" (think time {saved.think_time_s:g} s)\n"
    )
    for line in render_summary(report):
        out.write(line + "\n")
    if written:
        out.write(f"report written to {written}\n")
    return compare.EXIT_OK


def run_calibrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    checks = _checks(args)
    if args.comparisons < calibrate.MIN_COMPARISONS:
        raise UsageError(
            f"--comparisons={args.comparisons}: at least {calibrate.MIN_COMPARISONS}, so a 1% "
            "rate is measured from about 5 events"
        )
    if args.comparisons > calibrate.MAX_COMPARISONS:
        raise UsageError(
            f"--comparisons={args.comparisons}: at most {calibrate.MAX_COMPARISONS:,} "
            "(their time adds up)"
        )
    if args.json:
        flags.JSON.value(args.json, flags.JSON.cli)
    run = load_required(Storage.at(args.storage), args.run, "RUN")
    calibrator = calibrate.Calibrator(run.report, checks, seed=args.seed)
    result = calibrator.run(args.comparisons, args.slowdown)
    for line in calibrate.render(result, run.label, calibrator.populations):
        out.write(line + "\n")
    if args.json:
        try:
            out.write(f"figures written to {write_json(args.json, result.to_dict())}\n")
        except OSError as exc:
            raise UsageError(f"--json={args.json}: cannot write: {exc.strerror or exc}") from None
    return compare.EXIT_OK


def run_history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.json:
        flags.JSON.value(args.json, flags.JSON.cli)
    history.require()
    storage = Storage.at(args.storage)
    found = history.of_storage(storage, args.max_p)
    for line in history.render(found, storage, args.max_p):
        out.write(line + "\n")
    if args.json:
        try:
            path = write_json(args.json, found.to_dict())
        except OSError as exc:
            raise UsageError(f"--json={args.json}: cannot write: {exc.strerror or exc}") from None
        out.write(f"change points written to {path}\n")
    return compare.EXIT_OK


def run_prices(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    rows = prices.table(date.today())
    out.write(tabulate(rows, headers="keys", disable_numparse=True) + "\n")
    for kind, entry in sorted(prices.sheet().items()):
        out.write(f"{kind}: {entry['billing']}; {entry['source']}\n")
    out.write(
        "local, docker: no list price; set the machine's: --substrate-opt "
        "NAME.price.instance_hour=D (and NAME.price.share=K sandboxes per machine)\n"
    )
    return compare.EXIT_OK


def run_ensure_docker(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the engine-and-image script the package ships; its exit status is the command's."""
    script = resources.files("pytest_rollout_tax.substrates.docker") / "image" / "ensure-docker"
    done = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True, check=False)
    out.write(done.stdout)  # the exports, for eval; progress went to stderr as it came
    return done.returncode


COMMANDS = {
    "compare": run_compare,
    "ensure-docker": run_ensure_docker,
    "prices": run_prices,
    "html": run_html,
    "list": run_list,
    "project": run_project,
    "calibrate": run_calibrate,
    "history": run_history,
    "merge": scale_out.run_merge,
    "summarize": summarize.run,
    "ray": scale_out.run_ray,
    "train-log": train_log.run,
}


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; returns the exit status (never raises for bad input)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args, out, err)
    except (UsageError, RolloutTaxError, ValueError) as exc:
        err.write(f"rollout-tax: error: {exc}\n")
        return compare.EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else compare.EXIT_OK


def run() -> None:
    """The ``pytest-rollout-tax`` console script, the same as ``python -m pytest_rollout_tax``."""
    raise SystemExit(main())
