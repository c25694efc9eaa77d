"""The streaming bookkeeping gives the numbers the list-based one gave, exactly."""

from __future__ import annotations

import json
import random
from collections import Counter

from support.reports import as_schema_1, build_report

from pytest_rollout_tax.core.price import Rate
from pytest_rollout_tax.core.record import Rollout, Step
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.gate.compare import Check, compare_reports
from pytest_rollout_tax.report import projection
from pytest_rollout_tax.report.aggregate import Aggregate, RolloutRows
from pytest_rollout_tax.report.build import summarize
from pytest_rollout_tax.report.cost import project_cost
from pytest_rollout_tax.report.document import Report
from pytest_rollout_tax.report.projection import Means, Scale, Spread

SCALE = Scale(rollouts=1_000_000, steps=None, think_time_s=0.5)


def records(count: int, seed: int, slower: float = 1.0) -> list[Rollout]:
    """Varied records: three substrates, failures, missing figures, phases, prices."""
    rng = random.Random(seed)
    made = []
    for index in range(count):
        substrate = ("local", "docker", "ec2")[index % 3]
        started = index % 11 != 0
        cold = rng.lognormvariate(-2, 0.5) * slower if started else None
        made.append(
            Rollout(
                test=f"t.py::test_{index % 4}[{substrate}-{index}]",
                substrate=substrate,
                kind=rng.choice([substrate, substrate, ""]),
                transport=rng.choice(["exec", "session"]),
                round=index // 3 + 1,
                planned_steps=rng.choice([None, 150, 40]),
                outcome="error" if not started else rng.choice(["passed"] * 5 + ["failed"]),
                cold_start_s=cold,
                phases={"pull": 0.5, "create": cold}
                if cold and index % 2
                else {"create": cold}
                if cold
                else {},
                teardown_s=rng.random() / 10 if started else None,
                trajectory_s=rng.random() if started and index % 5 else None,
                steps=[
                    # to the microsecond, as the report keeps steps
                    Step(rng.choice(["exec", "write_file"]), round(rng.expovariate(80) * slower, 6))
                    for _ in range(rng.randrange(0, 30) if started else 0)
                ],
                action_probes_s=[rng.expovariate(900) for _ in range(3 if started else 0)],
                error=None if started else rng.choice(["SandboxStartError: a", "TimeoutError: b"]),
                price_per_hour=rng.choice([0.1, 0.2]) if substrate == "ec2" else None,
            )
        )
    return made


def reference_substrate(rollouts: list[Rollout], scale: Scale) -> dict:
    """The substrate entry as the list-based summary (before aggregation) computed it."""
    cold = Stats.of(r.cold_start_s for r in rollouts if r.cold_start_s is not None)
    action = Stats.of(s for r in rollouts for s in r.action_probes_s)
    step = Stats.of(s.wall_s for r in rollouts for s in r.steps)
    teardown = Stats.of(r.teardown_s for r in rollouts if r.teardown_s is not None)
    trajectory = Stats.of(r.trajectory_s for r in rollouts if r.trajectory_s is not None)
    failed = [r for r in rollouts if r.failed]
    means = Means(
        cold.mean if cold else None,
        action.mean if action else None,
        step.mean if step else None,
        teardown.mean if teardown else 0.0,
    )
    hours = projection.worker_hours(means, scale)
    prices = [r.price_per_hour for r in rollouts if r.price_per_hour is not None]
    kinds = Counter(r.kind for r in rollouts if r.kind)
    entry = {
        "kind": kinds.most_common(1)[0][0] if kinds else None,
        "transport": Counter(r.transport for r in rollouts).most_common(1)[0][0],
        "rollouts": len(rollouts),
        "failures": len(failed),
        "failure_reasons": dict(Counter(r.error or r.outcome for r in failed).most_common()),
        "cold_start": cold.to_dict() if cold else None,
        "action": action.to_dict() if action else None,
        "step": step.to_dict() if step else None,
        "teardown": teardown.to_dict() if teardown else None,
        "trajectory": trajectory.to_dict() if trajectory else None,
        "think": None,
        "phases": {
            name: Stats.of(r.phases[name] for r in rollouts if name in r.phases).to_dict()
            for name in dict.fromkeys(n for r in rollouts for n in r.phases)
        },
        "worker_hours": hours,
        "tax_hours": projection.tax_hours(means, scale),
        "decomposition": projection.decompose(means, scale).to_dict()
        if cold and action and step
        else None,
    }
    if prices:
        entry["price_per_hour"] = prices[-1]
        if entry["decomposition"] is not None:
            cost = project_cost(
                entry["decomposition"], Rate(instance_hour=prices[-1]), rollouts=scale.rollouts,
                think_s=0.0,
            )  # fmt: skip
            entry["cost"] = cost.to_dict()
            entry["cost_usd"] = cost.dollars
    return entry


def reference_report(rollouts: list[Rollout], scale: Scale) -> dict:
    """Substrates, projection and spread as the list-based summary computed them."""
    recorded = sorted(rollouts, key=lambda r: (r.substrate, r.test, r.round))
    lengths = [r.planned_steps or len(r.steps) for r in recorded if r.cold_start_s is not None]
    scale = Scale(scale.rollouts, round(sum(lengths) / len(lengths)), scale.think_time_s)
    names = sorted({r.substrate for r in recorded})
    substrates = {n: reference_substrate([r for r in recorded if r.substrate == n], scale)
                  for n in names}  # fmt: skip
    return {"steps": scale.steps, "substrates": substrates, "spread": reference_spread(substrates)}


def reference_spread(substrates: dict[str, dict]) -> Spread | None:
    """The spread of the substrates with a valid result (some rollout succeeded)."""
    valid = {n: s for n, s in substrates.items() if s["failures"] < s["rollouts"]}
    return projection.spread(
        {n: s["cold_start"]["p50"] for n, s in valid.items() if s["cold_start"]},
        {n: s["worker_hours"] for n, s in valid.items() if s["worker_hours"] is not None},
    )


def streamed(rollouts: list[Rollout], seed: int = 0) -> Report:
    """The report the plugin builds: records through the wire form, in arrival order."""
    arriving = [r.to_dict() for r in rollouts]
    random.Random(seed).shuffle(arriving)  # xdist workers finish in any order
    aggregate = Aggregate()
    for record in arriving:
        aggregate.add(json.loads(json.dumps(record)))
    return summarize(aggregate, SCALE, plugin_version="1", machine={}, commit=None)


def test_the_same_records_give_the_same_percentiles_and_projection_exactly():
    rollouts = records(600, seed=1)
    expected = reference_report(rollouts, SCALE)
    for report in (streamed(rollouts), build_report(rollouts, SCALE, plugin_version="1",
                                                     machine={}, commit=None)):  # fmt: skip
        assert report.projection.steps == expected["steps"]
        # the same figures, bit for bit, in the same order
        data = report.to_dict()
        assert json.dumps(data["substrates"]) == json.dumps(expected["substrates"])
        assert report.spread == expected["spread"]


def test_rollouts_come_out_in_report_order_with_every_step():
    rollouts = records(90, seed=2)
    rows = streamed(rollouts).rollouts
    assert isinstance(rows, RolloutRows)
    ordered = sorted(rollouts, key=lambda r: (r.substrate, r.test, r.round))
    assert list(rows) == [r.to_dict() for r in ordered]
    assert [Rollout.from_dict(item) for item in rows] == ordered


def test_gate_verdicts_are_the_same_for_old_and_new_saved_runs():
    baseline = build_report(records(300, 3), SCALE, plugin_version="1", machine={}, commit=None)
    current = streamed(records(300, 4, slower=1.3))
    texts = ("step.p50:5%", "cold_start.p95:10%", "action.p50:1%", "worker_hours:1%")
    checks = [Check.parse(text) for text in texts]
    new = compare_reports(baseline, current, checks)
    for steps_as in ("columns", "objects"):
        old = Report.from_dict(json.loads(json.dumps(as_schema_1(baseline, steps_as), indent=2)))
        assert compare_reports(old, current, checks) == new
    assert new.failed
    assert any("FAILED" in line and "step.p50" in line for line in new.regression)


def test_a_record_without_steps_columns_counts_no_steps():
    aggregate = Aggregate(columns=("wall_us",))
    aggregate.add({**Rollout(substrate="local", cold_start_s=0.1).to_dict(), "steps": None})
    (row,) = aggregate.rows
    assert len(row.wall_us) == 0 and row.kind is None
    assert "steps" not in RolloutRows(aggregate.rows, ()).__getitem__(0)
    assert aggregate.samples["local"].rollouts == 1


def test_optional_step_columns_are_kept_packed_and_come_back_with_their_nulls():
    steps = [Step("exec", 0.1, 0, 12, think_s=2.5, recorded_s=0.25), Step("read_file", 0.2),
             Step("exec", 0.3, 1, 0, think_s=0.0)]  # fmt: skip
    rollout = Rollout(test="t", substrate="local", cold_start_s=0.1, steps=steps)
    aggregate = Aggregate.of([rollout])
    assert {column.typecode for column in aggregate.rows[0].optional.values()} == {"q"}
    assert set(aggregate.rows[0].optional) == {"output_bytes", "think_us", "recorded_us"}
    assert RolloutRows(aggregate.rows, aggregate.columns)[0] == rollout.to_dict()
    assert list(aggregate.samples["local"].think) == [2.5, 0.0]


def test_a_modal_run_saved_with_phase_pace_loads_it_as_paced():
    """Modal's create pacing was phase ``pace`` before the hosted base named it ``paced`` on
    every hosted substrate: a run saved then compares phase by phase with one saved now."""
    paced = [
        Rollout(
            substrate="modal", kind="modal", cold_start_s=1.0, phases={"paced": 0.2, "create": 1.0}
        )
        for _ in range(3)
    ]
    new = build_report(paced, SCALE, plugin_version="1", machine={}, commit=None)
    saved = json.loads(json.dumps(new.to_dict()).replace('"paced"', '"pace"'))
    assert "pace" in saved["substrates"]["modal"]["phases"]  # as a run saved then reads
    old = Report.from_dict(saved)
    assert old.substrates["modal"].phases == new.substrates["modal"].phases
    assert [item["phases"] for item in old.rollouts] == [{"paced": 0.2, "create": 1.0}] * 3
    assert Rollout.from_dict(saved["rollouts"][0]).phases == {"paced": 0.2, "create": 1.0}
