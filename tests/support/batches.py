"""Real training batches for the training projection's check: ``batch`` rollouts on ``slots``
concurrent sandboxes (a pool of ``slots`` workers taking rollouts in order), each replaying a
window of a recorded trajectory's actions with its recorded think time slept before each
step, and each batch's real makespan measured.

The earlier batches' rollouts feed the model (``report.training``); its median makespan is
then compared with the real batches' median.
"""

from __future__ import annotations

import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_tax import get_substrate
from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import Substrate
from pytest_rollout_tax.replay.load import load
from pytest_rollout_tax.replay.model import RecordedStep
from pytest_rollout_tax.replay.run import shape_command
from pytest_rollout_tax.report.projection import Scale
from pytest_rollout_tax.report.schedule import makespan
from pytest_rollout_tax.report.train_model import TrainModel
from pytest_rollout_tax.report.training import project_training
from pytest_rollout_tax.report.training_units import measured_units

from .reports import build_report

TRAJECTORY = Path(__file__).resolve().parents[2] / "example_trajectories/fix-rounding.traj.json"
#: Recorded actions each rollout replays (a window of the trajectory, from a seeded offset).
WINDOW = 6
#: The recorded think time is slept at this scale (about 3 s a step recorded: 0.15 s here), so
#: a batch takes seconds, with the recording's spread between rollouts.
THINK_SCALE = 0.05
#: Each transport: the docker substrate's options.
TRANSPORTS = {"docker": {}, "docker-session": {"transport": "session"}}


@dataclass(frozen=True)
class Plan:
    """One rollout: the recorded actions it replays and the think time before each."""

    steps: tuple[RecordedStep, ...]

    def think(self, step: RecordedStep) -> float:
        return (step.think_s or 0.0) * THINK_SCALE


def plans(count: int, seed: int) -> list[Plan]:
    """``count`` rollouts' plans: windows of the recorded trajectory, from seeded offsets."""
    steps = load(TRAJECTORY)[0].steps
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        start = rng.randrange(len(steps) - WINDOW + 1)
        made.append(Plan(tuple(steps[start : start + WINDOW])))
    return made


def one_rollout(substrate: Substrate, plan: Plan) -> Rollout:
    """A fresh sandbox, the plan's steps with their think time slept, the sandbox removed."""
    with substrate.start() as sandbox:
        for step in plan.steps:
            think = plan.think(step)
            time.sleep(think)
            sandbox.exec(shape_command(step.output_bytes, step.exit_code))
            sandbox.rollout.steps[-1].think_s = think
    sandbox.rollout.outcome = "passed"
    return sandbox.rollout


def run_batch(substrate: Substrate, batch: list[Plan], slots: int) -> tuple[float, list[Rollout]]:
    """The batch on ``slots`` workers: its real makespan and its rollouts."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=slots) as pool:
        rollouts = list(pool.map(lambda plan: one_rollout(substrate, plan), batch))
    return time.perf_counter() - started, rollouts


@dataclass(frozen=True)
class Check:
    """The model's median makespan against the real batches' median; and each real batch's
    makespan against the slot schedule of its own measured rollouts (``replayed_s``)."""

    predicted_s: float
    real_s: tuple[float, ...]
    replayed_s: tuple[float, ...]
    earlier_rollouts: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.real_s)

    @property
    def error(self) -> float:
        """The prediction's error, as a share of the real median."""
        return abs(self.predicted_s - self.median_s) / self.median_s

    @property
    def replay_errors(self) -> list[float]:
        """Each real batch's schedule error, as a share of its real makespan."""
        return [
            abs(mine - real) / real for mine, real in zip(self.replayed_s, self.real_s, strict=True)
        ]


def replayed(rollouts: list[Rollout], slots: int) -> float:
    """The makespan the slot schedule gives a batch's own rollouts, in the order they ran."""
    scale = Scale(rollouts=len(rollouts), steps=WINDOW, think_time_source="none")
    units = measured_units([r.to_dict() for r in rollouts], scale, {})
    return makespan(next(iter(units.values())).seconds, slots)[0]


def check(
    transport: str, *, batch: int = 8, slots: int = 4, earlier: int = 5, real: int = 5
) -> Check:
    """``earlier`` batches measured and ``real`` batches whose makespans the model, fed the
    earlier batches' rollouts, predicts (its median simulated makespan). After one warm-up
    batch (not counted), the two alternate, an earlier batch first (E R E R ...): a machine
    whose load drifts during the check loads both alike, as ``--rollout-order interleave``
    does for substrates."""
    made = plans((1 + earlier + real) * batch, seed=44)
    chunks = [made[index * batch : (index + 1) * batch] for index in range(1 + earlier + real)]
    order = [("E", index) for index in range(earlier)] + [("R", index) for index in range(real)]
    order.sort(key=lambda kind_index: (kind_index[1], kind_index[0]))  # E0 R0 E1 R1 ...
    substrate = get_substrate("docker", **TRANSPORTS[transport])
    runs: dict[str, list[tuple[float, list[Rollout]]]] = {"E": [], "R": []}
    try:
        run_batch(substrate, chunks[0], slots)  # a warm-up: the engine's first creates
        for number, (kind, _) in enumerate(order, start=1):
            runs[kind].append(run_batch(substrate, chunks[number], slots))
    finally:
        substrate.close()
    measured = [rollout for _, rollouts in runs["E"] for rollout in rollouts]
    for rollout in measured:
        rollout.substrate = transport
    spans = [span for span, _ in runs["R"]]
    replays = [replayed(rollouts, slots) for _, rollouts in runs["R"]]
    scale = Scale(rollouts=batch, steps=WINDOW, think_time_source="none")
    report = build_report(measured, scale, plugin_version="t", machine={}, commit=None)
    model = TrainModel(batch=batch, slots=slots, train_s=0.0)
    entry = project_training(report, model).substrates[transport]
    return Check(entry.makespan_p50_s, tuple(spans), tuple(replays), len(measured))
