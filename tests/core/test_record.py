import pytest

from pytest_rollout_tax.core.record import PhaseClock, Rollout, Step, step_walls, steps_of


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


def test_steps_travel_as_compact_columns():
    steps = [Step("exec", 0.01, 0), Step("read_file", 0.002), Step("exec", 1.5, 2)]
    rollout = Rollout(substrate="local", steps=steps)
    data = rollout.to_dict()
    assert data["steps"] == {
        "kinds": ["exec", "read_file"],
        "kind": [0, 1, 0],
        "wall_us": [10_000, 2_000, 1_500_000],
        "exit_code": [0, None, 2],
    }
    assert Rollout.from_dict(data) == rollout
    assert step_walls(data["steps"]) == [0.01, 0.002, 1.5]


def test_steps_are_kept_to_the_microsecond():
    data = Rollout(steps=[Step("exec", 0.0012344999), Step("exec", 0.0000004)]).to_dict()
    assert data["steps"]["wall_us"] == [1234, 0]
    assert [step.wall_s for step in Rollout.from_dict(data).steps] == [0.001234, 0.0]


def test_steps_of_schema_1_still_read():
    columns = {"kind": ["exec", "read_file"], "wall_s": [0.01, 0.002], "exit_code": [0, None]}
    objects = [
        {"kind": "exec", "wall_s": 0.01, "exit_code": 0},
        {"kind": "read_file", "wall_s": 0.002, "exit_code": None},
    ]
    expected = [Step("exec", 0.01, 0), Step("read_file", 0.002)]
    assert list(steps_of(columns)) == list(steps_of(objects)) == expected
    assert step_walls(columns) == step_walls(objects) == [0.01, 0.002]
    assert step_walls(None) == [] == list(steps_of({}))


def test_optional_step_columns_are_absent_until_a_step_has_a_value():
    plain = Rollout(steps=[Step("read_file", 0.002), Step("write_file", 0.003)])
    assert set(plain.to_dict()["steps"]) == {"kinds", "kind", "wall_us", "exit_code"}
    execs = Rollout(steps=[Step("exec", 0.01, 0, output_bytes=12), Step("read_file", 0.002)])
    assert execs.to_dict()["steps"]["output_bytes"] == [12, None]
    assert "think_us" not in execs.to_dict()["steps"]
    replayed = Rollout(
        steps=[Step("exec", 0.01, 0, 5, think_s=2.5, recorded_s=0.1), Step("exec", 0.02, 1, 0)],
        replay={"format": "rollout-tax", "divergent_steps": None},
    )
    data = replayed.to_dict()
    assert data["steps"]["think_us"] == [2_500_000, None]
    assert data["steps"]["recorded_us"] == [100_000, None]
    assert data["replay"] == {"format": "rollout-tax", "divergent_steps": None}
    assert "replay" not in plain.to_dict()
    for rollout in (plain, execs, replayed):  # read back through steps_of
        assert Rollout.from_dict(rollout.to_dict()) == rollout
