"""Training logs as each stack writes them, made from its conventions (the key names its code
logs, docs/training-logs.md), with known figures: step ``i`` (from 1) has a wall clock of
``100 + i`` s, a generation of ``40 + i`` s, a trainer compute of 30 s and a wait of
:func:`wait_of`. Written as JSONL (W&B's ``wandb-history.jsonl``, verl's file logger), a W&B
panel's CSV export, TensorBoard event files (TensorBoard's own writer) and log lines."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from pathlib import Path

#: Every stack the reader knows, and the file kinds each reaches disk as.
KINDS = {
    "verl": ("wandb-jsonl", "csv", "tensorboard", "file-logger", "console"),
    "SkyRL": ("wandb-jsonl", "csv", "tensorboard"),
    "slime": ("wandb-jsonl", "csv", "tensorboard", "console"),
    "NeMo-RL": ("wandb-jsonl", "csv", "tensorboard"),
    "AReaL": ("wandb-jsonl", "csv", "tensorboard"),
    "prime-rl": ("wandb-jsonl", "csv"),
    "ROLL": ("wandb-jsonl", "csv", "tensorboard"),
}
#: Where a stack's trainer waits: its generation (synchronous) or a wait of its own.
OWN_WAIT = {"SkyRL": 10, "slime": 20, "NeMo-RL": 15, "prime-rl": 5}


def wall_of(i: int) -> float:
    return 100.0 + i


def generation_of(i: int) -> float:
    return 40.0 + i


def wait_of(stack: str, i: int) -> float:
    return OWN_WAIT[stack] + i if stack in OWN_WAIT else generation_of(i)


COMPUTE = 30.0


def metrics(stack: str, i: int) -> list[dict[str, float]]:
    """What ``stack`` logs at step ``i``, as the dicts it logs them in (one call each)."""
    wall, gen, wait = wall_of(i), generation_of(i), wait_of(stack, i)
    if stack == "verl":
        loop = "timing_s/agent_loop"
        return [{
            "timing_s/step": wall, "timing_s/gen": gen, "timing_s/update_actor": COMPUTE,
            "timing_s/old_log_prob": 5.0, f"{loop}/generate_sequences/mean": 8.0,
            f"{loop}/generate_sequences/max": 20.0, f"{loop}/tool_calls/mean": 2.0,
            f"{loop}/tool_calls/max": 15.0 if i % 3 == 0 else 5.0,
            f"{loop}/slowest/generate_sequences": 10.0,
            f"{loop}/slowest/tool_calls": 15.0 if i % 3 == 0 else 5.0,
            "actor/pg_loss": 0.01, "training/global_step": i,
        }]  # fmt: skip
    if stack == "SkyRL":
        return [{
            "timing/step": wall, "timing/generate": gen, "timing/policy_train": COMPUTE,
            "timing/wait_for_generation_buffer": wait, "timing/sync_weights": 2.0,
        }]  # fmt: skip
    if stack == "slime":  # the rollout's perf, then the trainer's (perf/step_time = wait+train)
        return [
            {"perf/rollout_time": gen, "rollout/step": i},
            {"perf/train_wait_time": wait, "perf/train_time": wall - wait,
             "perf/step_time": wall, "perf/wait_time_ratio": wait / wall, "rollout/step": i},
        ]  # fmt: skip
    if stack == "NeMo-RL":
        return [{
            "timing/train/total_step_time": wall, "timing/train/exposed_generation": wait,
            "timing/train/generation": gen, "timing/train/policy_training": COMPUTE,
            "timing/train/weight_sync": 1.0,
        }]  # fmt: skip
    if stack == "AReaL":  # no step total: its phases add up to it
        return [{
            "timeperf/rollout": gen, "timeperf/train_step": COMPUTE,
            "timeperf/update_weights": wall - gen - COMPUTE,
        }]  # fmt: skip
    if stack == "prime-rl":  # the trainer's and the orchestrator's, two logs
        return [
            {"time/step": wall, "time/wait_for_batch": wait, "time/forward_backward": COMPUTE},
            {"time/step": wall, "time/generate_completions": gen},
        ]
    if stack == "ROLL":
        return [{"time/step_total": wall, "time/step_generate": gen, "time/step_train": COMPUTE}]
    raise ValueError(stack)


def expected(stack: str, i: int) -> dict[str, float | None]:
    """The record the reader should make of step ``i``."""
    return {
        "step": i,
        "wall_s": wall_of(i),
        "generation_s": generation_of(i),
        "compute_s": wall_of(i) - wait_of(stack, i) if stack == "slime" else COMPUTE,
        "wait_s": wait_of(stack, i),
    }


def rows(stack: str, steps: int) -> list[tuple[int, dict[str, float]]]:
    return [(i, values) for i in range(1, steps + 1) for values in metrics(stack, i)]


def write_wandb_jsonl(path: Path, stack: str, steps: int) -> list[Path]:
    """``wandb-history.jsonl``: a line per ``wandb.log`` call, W&B's ``_step`` counting calls."""
    lines = []
    for n, (i, values) in enumerate(rows(stack, steps)):
        lines.append(json.dumps({**values, "_step": i, "_runtime": 3.0 * n, "_timestamp": 1e9}))
    path.write_text("\n".join(lines) + "\n")
    return [path]


def write_file_logger(path: Path, stack: str, steps: int) -> list[Path]:
    """verl's file logger (``trainer.logger=['file']``): ``{"step": N, "data": {...}}``."""
    lines = [json.dumps({"step": i, "data": values}) for i, values in rows(stack, steps)]
    path.write_text("\n".join(lines) + "\n")
    return [path]


def write_csv(path: Path, stack: str, steps: int) -> list[Path]:
    """A W&B panel's CSV export: ``Step``, then ``RUN - KEY`` with its ``__MIN`` and ``__MAX``."""
    merged: dict[int, dict[str, float]] = {}
    for i, values in rows(stack, steps):
        merged.setdefault(i, {}).update(values)
    keys = sorted({key for values in merged.values() for key in values})
    header = ["Step"] + [f"my-run - {key}{band}" for key in keys for band in ("", "__MIN", "__MAX")]
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        for i, values in merged.items():
            cells = [str(values.get(key, "")) for key in keys for _ in range(3)]
            writer.writerow([str(i), *cells])
    return [path]


def write_tensorboard(path: Path, stack: str, steps: int) -> list[Path]:
    """An event file by TensorBoard's own writer (as torch's SummaryWriter writes it)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    path.mkdir()
    writer = EventFileWriter(str(path))
    for i, values in rows(stack, steps):
        summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
        writer.add_event(Event(wall_time=time.time(), step=i, summary=summary))
    writer.close()
    return sorted(path.iterdir())


def write_console(path: Path, stack: str, steps: int) -> list[Path]:
    """The trainer's log: slime's ``perf N: {dict}``, verl's ``step:N - key:value - ...``."""
    lines = ["INFO starting the run", "(TaskRunner pid=81) Training Progress: 0%"]
    for i, values in rows(stack, steps):
        if stack == "slime":
            lines.append(f"[2026-01-01 00:00:0{i % 10}] perf {i}: {values!r}")
        else:
            pairs = " - ".join(f"{k}:np.float64({v})" for k, v in values.items())
            lines.append(f"(TaskRunner pid=81) step:{i} - {pairs}")
    path.write_text("\n".join(lines) + "\n")
    return [path]


WRITERS: dict[str, Callable[[Path, str, int], list[Path]]] = {
    "wandb-jsonl": write_wandb_jsonl,
    "file-logger": write_file_logger,
    "csv": write_csv,
    "tensorboard": write_tensorboard,
    "console": write_console,
}
NAMES = {
    "wandb-jsonl": "wandb-history.jsonl",
    "file-logger": "metrics.jsonl",
    "csv": "export.csv",
    "tensorboard": "tb",
    "console": "train.log",
}


def write(directory: Path, stack: str, kind: str, steps: int = 10) -> list[Path]:
    """``stack``'s log of ``steps`` steps as ``kind``, in ``directory``: its files (prime-rl's
    trainer and orchestrator write two; written as one here, as a W&B export of both)."""
    return WRITERS[kind](directory / NAMES[kind], stack, steps)


def hand_checked_log(path: Path, steps: int = 10) -> Path:
    """The what-if's run, figures to check by hand: each step 200 s, the trainer waiting on a
    100 s generation; per trajectory 20 s in tools and 80 s generating (environment 20 %)."""
    loop = "timing_s/agent_loop"
    data = {
        "timing_s/step": 200.0, "timing_s/gen": 100.0, "timing_s/update_actor": 90.0,
        f"{loop}/tool_calls/mean": 20.0, f"{loop}/generate_sequences/mean": 80.0,
        f"{loop}/slowest/tool_calls": 30.0, f"{loop}/slowest/generate_sequences": 90.0,
    }  # fmt: skip
    lines = [json.dumps({"step": i, "data": data}) for i in range(1, steps + 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


def two_substrate_report():
    """A report of two substrates at 10 steps per rollout, each a tax per trajectory of
    ``cold + teardown + 10 x min(action, step)``: local 0.5 + 0.5 + 10 x 0.1 = 2 s,
    docker-session 2 + 1 + 10 x 0.3 = 6 s."""
    from pytest_rollout_tax.core.stats import Stats
    from pytest_rollout_tax.report.document import Report, SubstrateEntry
    from pytest_rollout_tax.report.projection import Scale

    def entry(cold: float, teardown: float, action: float) -> SubstrateEntry:
        return SubstrateEntry(
            kind="local",
            rollouts=4,
            cold_start=Stats.of([cold] * 4),
            teardown=Stats.of([teardown] * 4),
            action=Stats.of([action] * 4),
            step=Stats.of([1.0] * 4),
        )

    return Report(
        projection=Scale(rollouts=1000, steps=10),
        substrates={"local": entry(0.5, 0.5, 0.1), "docker-session": entry(2.0, 1.0, 0.3)},
        ranking=[],
        plugin_version="test",
        machine={},
    )
