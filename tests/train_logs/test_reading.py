"""Each stack's log, from each file kind it reaches disk as, read into one record per step;
a file that is none of them is one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import train_logs

from pytest_rollout_tax.errors import TrainLogError
from pytest_rollout_tax.train_logs.load import load
from pytest_rollout_tax.train_logs.stacks import STACKS

CASES = [(stack, kind) for stack, kinds in train_logs.KINDS.items() for kind in kinds]
FIELDS = ("step", "wall_s", "generation_s", "compute_s", "wait_s")


def test_every_stack_has_a_fixture_and_comes_in_several_kinds():
    assert set(train_logs.KINDS) == {stack.name for stack in STACKS}
    assert all(len(kinds) >= 2 for kinds in train_logs.KINDS.values())


@pytest.mark.parametrize(("stack", "kind"), CASES, ids=[f"{s}-{k}" for s, k in CASES])
def test_a_stack_is_told_by_its_keys_and_each_step_read(tmp_path: Path, stack: str, kind: str):
    files = train_logs.write(tmp_path, stack, kind, steps=10)
    log = load(files)
    assert log.stack.name == stack
    assert [r.step for r in log.records] == list(range(1, 11))
    for record in log.records:
        assert {f: getattr(record, f) for f in FIELDS} == train_logs.expected(stack, record.step)


def test_verl_trajectories_tool_time_and_slowest_are_read(tmp_path: Path):
    log = load(train_logs.write(tmp_path, "verl", "wandb-jsonl", steps=6))
    first = log.records[0]
    assert (first.tool_s, first.trajectory_generation_s) == (2.0, 8.0)
    assert (first.slowest_tool_s, first.slowest_generation_s) == (5.0, 10.0)
    assert [r.step for r in log.records if r.straggler] == [3, 6]


def test_prime_rl_trainer_and_orchestrator_logs_join_by_step(tmp_path: Path):
    trainer, orchestrator = tmp_path / "trainer.jsonl", tmp_path / "orchestrator.jsonl"
    trainer.write_text(
        "\n".join(json.dumps({"step": i, **train_logs.metrics("prime-rl", i)[0]}) for i in (1, 2))
    )
    orchestrator.write_text(
        "\n".join(json.dumps({"step": i, **train_logs.metrics("prime-rl", i)[1]}) for i in (1, 2))
    )
    log = load([trainer, orchestrator])
    assert log.kinds == ("jsonl", "jsonl")
    assert [(r.wait_s, r.generation_s) for r in log.records] == [(6.0, 41.0), (7.0, 42.0)]


def test_a_skyrl_run_without_the_buffer_waits_on_generation(tmp_path: Path):
    path = tmp_path / "skyrl.jsonl"
    path.write_text(json.dumps({"step": 1, "timing/step": 9.0, "timing/generate": 4.0}) + "\n")
    assert load([path]).records[0].wait_s == 4.0


def test_rows_without_any_step_time_are_no_step(tmp_path: Path):
    path = tmp_path / "roll.jsonl"
    rows = [{"step": 1, "time/step_total": 5.0}, {"step": 2, "val/score": 0.5}]
    path.write_text("\n".join(map(json.dumps, rows)) + "\n")
    assert [r.step for r in load([path]).records] == [1]


def one_line(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(TrainLogError) as caught:
        load([path])
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_an_empty_file_is_one_line(tmp_path: Path):
    assert "empty file" in one_line(tmp_path, "empty.jsonl", b"\n  \n")


def test_a_corrupt_jsonl_line_is_named(tmp_path: Path):
    data = b'{"timing_s/step": 1.0}\n{"timing_s/step": 2.\n'
    assert ":2: not a JSON line" in one_line(tmp_path, "run.jsonl", data)


def test_a_binary_file_is_one_line(tmp_path: Path):
    assert "binary file" in one_line(tmp_path, "model.bin", bytes(range(256)) * 4)


def test_a_corrupt_tensorboard_file_is_one_line(tmp_path: Path):
    message = one_line(tmp_path, "events.out.tfevents.1.host", b"\x00garbage" * 50)
    assert "no metric in it" in message


def test_a_foreign_file_names_its_keys_and_the_stacks_known(tmp_path: Path):
    rows = [{"step": i, "loss": 0.1, "lr": 1e-5, "reward/mean": 0.2} for i in range(3)]
    message = one_line(tmp_path, "hf.jsonl", "\n".join(map(json.dumps, rows)).encode())
    assert "its keys: loss, lr, reward/mean (3 in all)" in message
    for stack in STACKS:
        assert stack.name in message and stack.markers[0] in message


def test_a_foreign_csv_and_log_are_one_line_each(tmp_path: Path):
    assert "csv file" in one_line(tmp_path, "x.csv", b"epoch,acc\n1,0.5\n")
    assert "log file, no metric" in one_line(tmp_path, "x.log", b"INFO nothing here\n")


def test_a_ragged_csv_is_one_line(tmp_path: Path):
    assert "cells under a header" in one_line(tmp_path, "r.csv", b"a,b\n1,2,3\n")


def test_a_stack_with_no_step_time_is_one_line(tmp_path: Path):
    path = tmp_path / "slime.jsonl"
    path.write_text(json.dumps({"perf/wait_time_ratio": 0.5}) + "\n")
    with pytest.raises(TrainLogError, match="slime keys but no step"):
        load([path])


def test_a_missing_file_is_one_line(tmp_path: Path):
    with pytest.raises(TrainLogError, match="cannot read"):
        load([tmp_path / "nope.jsonl"])


def test_log_lines_as_ray_and_loggers_print_them(tmp_path: Path):
    """Colour codes, Ray's actor prefixes and repeats, timestamps and logger names, numpy and
    torch scalars, two roles printing one rollout's perf: each step read once."""
    path = tmp_path / "train.log"
    path.write_text(
        "\x1b[36m(RolloutManager pid=1)\x1b[0m [2026-01-01 00:00:01 rollout_manager] "
        "metrics.py:89 - perf 0: {'perf/rollout_time': 100.0, 'x': tensor(0.5, device='cuda')}\n"
        "\x1b[36m(MegatronTrainRayActor pid=2)\x1b[0m \x1b[1;37mperf 0: {'perf/train_wait_time': "
        "np.float64(90.0), 'perf/train_time': 10.0, 'perf/step_time': 100.0}\x1b[0m"
        "\x1b[32m [repeated 7x across cluster]\x1b[0m\n"
        "INFO:metrics:eval 0: {'perf/rollout_time': 2000.0}\n"
        "step 0: {'train/loss': nan, 'train/grad_norm': 0.2}\n"
        "INFO:metrics:perf 1: {'perf/train_wait_time': 5.0, 'perf/train_time': 10.0, "
        "'perf/step_time': 15.0, 'perf/rollout_time': 4.0}\n"
    )
    log = load([path])
    assert log.stack.name == "slime"
    assert [(r.step, r.wall_s, r.generation_s, r.wait_s) for r in log.records] == [
        (0, 100.0, 100.0, 90.0),
        (1, 15.0, 4.0, 5.0),
    ]


def test_verl_console_lines_with_colour_and_three_decimals(tmp_path: Path):
    path = tmp_path / "verl.log"
    path.write_text(
        "> (main_task pid=9) epoch 0, step 2\n"
        "\x1b[36m(TaskRunner pid=9)\x1b[0m step:2 - actor/pg_loss:-0.109 - timing_s/gen:198.822"
        " - timing_s/update_actor:74.060 - timing_s/step:310.398 - off_policy/min:np.int64(0)\n"
    )
    (record,) = load([path]).records
    assert (record.step, record.wall_s, record.wait_s, record.compute_s) == (
        2, 310.398, 198.822, 74.060,
    )  # fmt: skip


def test_tensorboard_without_the_extra_is_one_line(tmp_path: Path, monkeypatch):
    files = train_logs.write(tmp_path, "ROLL", "tensorboard")
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    with pytest.raises(TrainLogError, match=r"needs the \[train\] extra"):
        load(files)
