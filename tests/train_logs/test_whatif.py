"""What another substrate would change, with figures checked by hand: a 10-step verl run (each
step 200 s, the trainer waiting 100 s; per trajectory 20 s in tools, 80 s generating) and a
report of two substrates (tax per trajectory: local 2 s, docker-session 6 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.train_logs import hand_checked_log, two_substrate_report

from pytest_rollout_tax.errors import TrainLogError
from pytest_rollout_tax.summary.train_log import training_lines
from pytest_rollout_tax.train_logs.load import load
from pytest_rollout_tax.train_logs.section import training
from pytest_rollout_tax.train_logs.whatif import taxes, what_ifs


@pytest.fixture
def records(tmp_path: Path):
    return load([hand_checked_log(tmp_path / "run.jsonl")]).records


def test_the_tax_per_trajectory_is_cold_teardown_and_steps_of_per_step_tax():
    assert taxes(two_substrate_report(), 10) == pytest.approx({"local": 2.0, "docker-session": 6.0})


def test_from_local_to_docker_session(records):
    found = {w.substrate: w for w in what_ifs(records, two_substrate_report(), 10, "local", 8)}
    docker = found["docker-session"]
    assert docker.change_s == pytest.approx(4.0)  # 6 s - 2 s per trajectory
    assert docker.environment_share == pytest.approx(24 / 104)  # 23.1 %
    assert docker.wait_s == pytest.approx(10 * 104)
    assert docker.wait_less == pytest.approx(-0.04)  # waits 4 % more
    assert docker.gpu_hours_saved == pytest.approx(-8 * 10 * 4 / 3600)  # 0.09 more
    assert found["local"].change_s == 0 and found["local"].wait_less == 0


def test_from_docker_session_to_local(records):
    found = {
        w.substrate: w for w in what_ifs(records, two_substrate_report(), 10, "docker-session", 8)
    }
    local = found["local"]
    assert local.environment_share == pytest.approx(16 / 96)  # 16.7 %
    assert local.wait_less == pytest.approx(0.04)
    assert local.gpu_hours_saved == pytest.approx(8 * 10 * 4 / 3600)


def test_without_the_runs_substrate_its_tool_time_is_taken_as_tax_free(records):
    found = {w.substrate: w for w in what_ifs(records, two_substrate_report(), 10)}
    assert found["local"].environment_share == pytest.approx(22 / 102)
    assert found["docker-session"].environment_share == pytest.approx(26 / 106)
    assert found["docker-session"].wait_less == pytest.approx(-0.06)
    assert found["docker-session"].gpu_hours_saved is None


def test_the_tool_time_never_goes_below_zero(records):
    report = two_substrate_report()
    found = {w.substrate: w for w in what_ifs(records, report, 100, "docker-session")}
    # per trajectory: local 0.5 + 0.5 + 100 x 0.1 = 11 s, docker 2 + 1 + 30 = 33 s: -22 s of 20
    assert found["local"].environment_share == 0.0
    assert found["local"].wait_s == pytest.approx(10 * 80)


def test_an_unknown_run_substrate_is_named(records):
    with pytest.raises(TrainLogError, match="ran on 'modal': not a substrate the report measured"):
        what_ifs(records, two_substrate_report(), 10, "modal")


def test_the_lines_read_as_the_issue_asks(tmp_path: Path, records):
    log = load([hand_checked_log(tmp_path / "again.jsonl")])
    section = training(log, two_substrate_report(), report_label="r.json", gpus=8, ran_on="local")
    lines = training_lines(section)
    assert "trainer wait: 50.0 % of step time (median), 50.0 % at p90" in lines[1]
    assert lines[2].startswith("environment: 20.0 % of trajectory time on your run")
    assert "straggler steps (slowest trajectory longer in tools than generating): 0 of 10" in lines
    assert "idle GPU-hours: 2.2 over this run on 8 GPUs (the trainer's wait)" in lines
    assert (
        "environment: 20.0 % of trajectory time on your run; on docker-session it would be "
        "23.1 % (+4.00 s per trajectory); the trainer would wait 4.0 % more; "
        "0.1 GPU-hours more over this run"
    ) in lines
    assert lines[-1].startswith("assumptions: generation unchanged; ")
    data = section.to_dict()
    assert data["what_if"]["tool_calls_per_trajectory"] == 10
    assert [s["substrate"] for s in data["what_if"]["substrates"]] == ["local", "docker-session"]
    assert len(data["steps"]) == 10


def test_a_stack_without_tool_time_says_why_there_is_no_what_if(tmp_path: Path):
    from support import train_logs

    log = load(train_logs.write(tmp_path, "ROLL", "csv"))
    section = training(log, two_substrate_report())
    assert section.what_ifs == []
    assert training_lines(section)[-1] == (
        "what another substrate would change: ROLL logs no tool time per trajectory: the "
        "environment's part of the run is unknown"
    )
