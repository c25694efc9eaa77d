"""A Recorder outside pytest: rollouts timed as the plugin times them, think time measured
live, safe across threads, asyncio tasks and processes, nothing secret written."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time

import pytest

from pytest_rollout_tax import ConfigError, Recorder, Rollout, RolloutTaxError, record
from pytest_rollout_tax.core.record import steps_of
from pytest_rollout_tax.errors import PrepareFailed, RateLimited, SandboxStartError, SandboxUnbound
from pytest_rollout_tax.recording import read, report_of
from pytest_rollout_tax.recording.recorder import start_failed

#: A think time's allowance over the agent's own measure of it: the calls around a step.
THINK_TOLERANCE_S = 0.005


def agent_loop(recorder: Recorder, task: str, steps: int = 4) -> list[float]:
    """A rollout whose agent thinks a little before each step and measures its own gaps."""
    gaps = []
    with recorder.rollout(task) as sandbox:
        returned = time.perf_counter()
        for index in range(steps):
            sum(range(20_000 * (index + 1)))  # the model's time: varied, no sleep
            gaps.append(time.perf_counter() - returned)
            sandbox.exec(["true"])
            returned = time.perf_counter()
    return gaps


def test_think_time_is_the_gap_the_agent_saw_before_each_step(tmp_path):
    with record("local", out=tmp_path, probes=2) as recorder:
        gaps = agent_loop(recorder, "task")
    (rollout,) = read(tmp_path).rollouts
    steps = list(steps_of(rollout["steps"]))
    assert [s.kind for s in steps] == ["exec"] * 4
    thinks = [s.think_s for s in steps]
    assert all(abs(t - g) < THINK_TOLERANCE_S for t, g in zip(thinks, gaps, strict=True)), (
        thinks,
        gaps,
    )
    assert rollout["outcome"] == "passed"
    assert len(rollout["action_probes_s"]) == 2
    assert rollout["cold_start_s"] > 0 and rollout["teardown_s"] > 0


def test_the_report_says_think_time_was_measured_live(tmp_path):
    with record("local", out=tmp_path, probes=1) as recorder:
        agent_loop(recorder, "task")
    report, _ = report_of(tmp_path, plugin_version="test")
    assert report.projection.think_time_source == "live"
    assert report.projection.think_time_s > 0
    assert report.substrates["local"].rollouts == 1


def test_rounds_of_one_task_are_numbered_and_a_failure_is_recorded(tmp_path):
    with record("local", out=tmp_path, probes=0) as recorder:
        agent_loop(recorder, "task", steps=1)
        with pytest.raises(ValueError), recorder.rollout("task") as sandbox:
            sandbox.exec("true")
            raise ValueError("the agent broke")
    rollouts = read(tmp_path).rollouts
    assert [(r["test"], r["round"], r["outcome"]) for r in rollouts] == [
        ("task[local-1]", 1, "passed"),
        ("task[local-2]", 2, "failed"),
    ]
    assert rollouts[1]["error"] == "failed: ValueError"


def test_threads_and_asyncio_tasks_share_one_recorder(tmp_path):
    with record("local", out=tmp_path, probes=0) as recorder:
        threads = [
            threading.Thread(target=agent_loop, args=(recorder, f"thread-{n}", 2)) for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        async def tasks() -> None:
            await asyncio.gather(
                *(asyncio.to_thread(agent_loop, recorder, "async", 2) for _ in range(4))
            )

        asyncio.run(tasks())
    rollouts = read(tmp_path).rollouts
    assert len(rollouts) == 8
    assert len({r["sandbox_id"] for r in rollouts}) == 8
    assert sorted(r["round"] for r in rollouts if r["test"].startswith("async")) == [1, 2, 3, 4]
    assert all(len(r["steps"]["kind"]) == 2 for r in rollouts)


def _process(out: str) -> None:
    with record("local", out=out, probes=0) as recorder:
        agent_loop(recorder, "process", steps=2)


def test_each_process_writes_its_own_journal_and_the_report_has_every_rollout(tmp_path):
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_process, args=(str(tmp_path),)) for _ in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    recorded = read(tmp_path)
    assert len(recorded.headers) == 2 and len(recorded.rollouts) == 2
    report, _ = report_of(tmp_path, plugin_version="test")
    assert report.substrates["local"].rollouts == 2


def test_closing_ends_an_open_rollout_as_interrupted(tmp_path):
    recorder = record("local", out=tmp_path, probes=0)
    sandbox = recorder.start("task")
    sandbox.exec("true")
    recorder.close()
    (rollout,) = read(tmp_path).rollouts
    assert rollout["outcome"] == "interrupted"
    assert sandbox.closed
    with pytest.raises(ConfigError, match="closed"):
        recorder.start("task")


def test_no_env_value_and_no_exception_text_reaches_the_journal(tmp_path):
    secret = "canary-record-5e1f0a"
    with record("local", out=tmp_path, probes=0) as recorder:
        with pytest.raises(RuntimeError), recorder.rollout("task") as sandbox:
            sandbox.exec("echo $TOKEN", env={"TOKEN": secret})
            raise RuntimeError(secret)
        sandbox = recorder.start("task")
        sandbox.exec("true", env={"TOKEN": secret})
        recorder.end(sandbox, f"the grader said {secret}")
    text = "".join(path.read_text() for path in tmp_path.iterdir())
    assert secret not in text
    assert "the grader said [REDACTED]" in text


@pytest.mark.parametrize(
    ("substrate", "options", "message"),
    [
        ("nowhere", {}, "unknown substrate 'nowhere'"),
        ("local", {"probes": -1}, "probes=-1"),
        ("local", {"colour": "red"}, "colour"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, substrate, options, message):
    with pytest.raises((ConfigError, ValueError)) as raised:
        record(substrate, out=tmp_path, **options)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_sandbox_that_never_starts_is_a_recorded_infra_failure(tmp_path, docker_client):
    recorder = record("docker", out=tmp_path, image="rollout-tax/no-such-image:1")
    with recorder, pytest.raises(RolloutTaxError, match="no-such-image"):
        recorder.start("task")
    (rollout,) = read(tmp_path).rollouts
    assert rollout["outcome"] == "infra_failed" and "no-such-image" in rollout["error"]
    assert rollout["infra_cause"] == "unavailable"


@pytest.mark.parametrize(
    ("error", "outcome", "reason"),
    [
        (RateLimited("e2b: HTTP 429", "slow down"), "rate_limited", "slow down"),
        (SandboxUnbound("k8s: claim never bound"), "unbound", "claim never bound"),
        (SandboxStartError("docker: no image"), "infra_failed", "no image"),
        (PrepareFailed("docker: prepare=setup failed"), "error", "setup failed"),
    ],
)
def test_a_start_that_fails_is_classified_as_the_plugin_does(error, outcome, reason):
    rollout = Rollout(substrate="x")
    start_failed(rollout, error)
    assert rollout.outcome == outcome and reason in rollout.error
