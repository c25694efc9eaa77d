import pytest

from pytest_rollout_tax.record import PhaseClock, Rollout, Step, step_walls


def test_rollout_round_trips_through_its_dict():
    rollout = Rollout(
        test="t.py::test_x[local-1]",
        substrate="local",
        round=1,
        outcome="passed",
        cold_start_s=0.1,
        phases={"create": 0.05, "first_exec": 0.05},
        steps=[Step("exec", 0.01, 0), Step("read_file", 0.002)],
        action_probes_s=[0.001],
    )
    assert Rollout.from_dict(rollout.to_dict()) == rollout


def test_failed_outcomes():
    assert Rollout(outcome="failed").failed and Rollout(outcome="error").failed
    assert not Rollout(outcome="passed").failed and not Rollout(outcome="skipped").failed


def test_first_failure_reason_wins():
    rollout = Rollout()
    rollout.fail("SandboxStartError: boom")
    rollout.fail("a consequence")
    assert rollout.error == "SandboxStartError: boom"


def test_cold_start_excludes_phases_marked_out_of_it():
    phases: dict[str, float] = {}
    clock = PhaseClock(phases)
    clock.mark("pull", cold_start=False)
    clock.mark("create")
    clock.mark("first_exec")
    assert list(phases) == ["pull", "create", "first_exec"]
    assert clock.cold_start() == phases["create"] + phases["first_exec"]
    assert clock.cold_start() + phases["pull"] == pytest.approx(sum(phases.values()))


def test_steps_travel_as_columns_and_old_lists_still_read():
    rollout = Rollout(substrate="local", steps=[Step("exec", 0.01, 0), Step("read_file", 0.002)])
    data = rollout.to_dict()
    assert data["steps"] == {
        "kind": ["exec", "read_file"],
        "wall_s": [0.01, 0.002],
        "exit_code": [0, None],
    }
    old_steps = [
        {"kind": "exec", "wall_s": 0.01, "exit_code": 0},
        {"kind": "read_file", "wall_s": 0.002, "exit_code": None},
    ]
    old = {**data, "steps": old_steps}
    assert Rollout.from_dict(old) == Rollout.from_dict(data) == rollout
    assert step_walls(old["steps"]) == step_walls(data["steps"]) == [0.01, 0.002]
    assert step_walls(None) == [] and step_walls({"wall_s": [1.0]}) == [1.0]


def test_optional_step_columns_are_absent_until_a_step_has_a_value():
    plain = Rollout(steps=[Step("read_file", 0.002), Step("write_file", 0.003)])
    assert set(plain.to_dict()["steps"]) == {"kind", "wall_s", "exit_code"}
    execs = Rollout(steps=[Step("exec", 0.01, 0, output_bytes=12), Step("read_file", 0.002)])
    assert execs.to_dict()["steps"]["output_bytes"] == [12, None]
    assert "think_s" not in execs.to_dict()["steps"]
    replayed = Rollout(
        steps=[Step("exec", 0.01, 0, 5, think_s=2.5, recorded_s=0.1), Step("exec", 0.02, 1, 0)],
        replay={"format": "rollout-tax", "divergent_steps": None},
    )
    data = replayed.to_dict()
    assert data["steps"]["think_s"] == [2.5, None]
    assert data["steps"]["recorded_s"] == [0.1, None]
    assert data["replay"] == {"format": "rollout-tax", "divergent_steps": None}
    assert "replay" not in plain.to_dict()
    for rollout in (plain, execs, replayed):  # read back through steps_of
        assert Rollout.from_dict(rollout.to_dict()) == rollout
