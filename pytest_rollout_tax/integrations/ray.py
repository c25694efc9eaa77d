"""The Ray driver (``python -m pytest_rollout_tax ray``): N shards as Ray tasks, one merge.

Each task runs ``pytest PYTEST_ARGS --rollout-shard K/N`` in a subprocess, in the driver's
directory as Ray ships it (the tasks' ``runtime_env`` ``working_dir``), and returns its
report; the driver merges the reports (``report/merge.py``) and prints the merged summary. A
shard that fails (no report) or is lost (its worker or node died) is named with its error and
the merge of the others is still written, marked incomplete. Ray schedules; nothing here does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError
from ..report import merge
from ..report.document import Report
from ..summary.terminal import render_summary

#: What the working directory upload leaves out (Ray's ``excludes``, gitignore syntax).
EXCLUDES = [".git", ".rollout-tax", "__pycache__", "*.pyc", ".venv", ".tox", "*.egg-info"]
#: Options the driver sets for each shard itself.
DRIVER_OPTIONS = ("--rollout-shard", "--rollout-json")
#: The last lines of a failed shard's output that its error keeps.
TAIL_LINES = 3
EXIT_OK, EXIT_INCOMPLETE = 0, 1


@dataclass(frozen=True)
class ShardResult:
    """What one shard's task returned: its pytest exit status and report, or an error."""

    index: int
    exit_status: int | None
    report: dict[str, Any] | None
    error: str | None = None


def run_shard(index: int, count: int, pytest_args: list[str]) -> ShardResult:
    """Run shard ``index`` of ``count`` here, in a pytest subprocess; its report."""
    with tempfile.TemporaryDirectory(prefix="rollout-tax-shard-") as directory:
        path = Path(directory) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pytest",
            *pytest_args,
            f"--rollout-shard={index}/{count}",
            f"--rollout-json={path}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if path.exists():
            return ShardResult(index, done.returncode, json.loads(path.read_text("utf-8")))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    tail = " | ".join(lines[-TAIL_LINES:]) or "no output"
    return ShardResult(index, done.returncode, None, f"pytest exited {done.returncode}: {tail}")


def check_arguments(pytest_args: list[str]) -> None:
    """Refuse the options the driver sets per shard."""
    for argument in pytest_args:
        if argument.split("=", 1)[0] in DRIVER_OPTIONS:
            raise ConfigError(f"PYTEST_ARGS: {argument}: the ray driver sets it for each shard")


def drive(
    address: str | None,
    shards: int,
    pytest_args: list[str],
    output: str,
    out: TextIO,
    *,
    working_dir: str | os.PathLike[str] = ".",
) -> int:
    """Run the shards on the Ray cluster at ``address`` (None: a new local one), shipping
    ``working_dir``, and merge them into ``output``; exit 0, or 1 when incomplete. A process
    already connected (``ray.init``) keeps its connection, whose job's ``runtime_env`` carries
    the workload."""
    check_arguments(pytest_args)
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray driver needs Ray: pip install 'pytest-rollout-tax[ray]'"
        ) from None
    connected_here = not ray.is_initialized()
    if connected_here:  # Ray uploads a working_dir only for a whole job
        runtime_env = {"working_dir": str(working_dir), "excludes": EXCLUDES}
        ray.init(
            address=address, runtime_env=runtime_env, include_dashboard=False, log_to_driver=False
        )
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_shard)
        refs = [task.remote(index, shards, pytest_args) for index in range(shards)]
        results = [_result(ray, index, ref) for index, ref in enumerate(refs)]
    finally:
        if connected_here:
            ray.shutdown()
    return finish(results, output, out)


def _result(ray: Any, index: int, ref: Any) -> ShardResult:
    """The task's result; a task that raised or was lost is an error naming why."""
    try:
        result: ShardResult = ray.get(ref)
    except ray.exceptions.RayError as exc:
        cause = str(exc).strip().splitlines()
        return ShardResult(index, None, None, f"{type(exc).__name__}: {cause[-1] if cause else ''}")
    return result


def finish(results: list[ShardResult], output: str, out: TextIO) -> int:
    """Merge the shards that reported into ``output``, print the summary and the failures."""
    parts: list[merge.Part] = []
    failed: dict[int, str] = {}
    for result in results:
        try:
            report = Report.from_dict(result.report) if result.report is not None else None
        except ValueError as exc:
            report, result = None, dataclasses.replace(result, error=f"its report: {exc}")
        if report is None:
            failed[result.index] = result.error or "no report"  # run_shard says why
        else:
            parts.append(merge.Part(f"shard {result.index}", report))
    for index, error in failed.items():
        out.write(f"rollout-tax: shard {index}/{len(results)} failed: {error}\n")
    if not parts:
        out.write("rollout-tax: no shard produced a report: nothing merged\n")
        return EXIT_INCOMPLETE
    report, written = merge.write(parts, output, failed=failed)
    for line in [*render_summary(report), f"merged report written to {written}"]:
        out.write(line + "\n")
    return EXIT_INCOMPLETE if failed else EXIT_OK
