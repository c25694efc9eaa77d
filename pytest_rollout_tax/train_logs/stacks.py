"""The RL stacks whose logs are read, each as the keys its code writes (docs/training-logs.md),
and which stack a file's keys belong to.

A part of a step (its wall clock, its generation, the trainer's wait) is read from the first of
its keys a row has; the stack is the one whose marker keys the file has most of.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

VERL_LOOP = "timing_s/agent_loop"


@dataclass(frozen=True)
class Stack:
    """One stack's names for the parts of a training step, each a tuple of keys tried in order
    (empty: the stack does not log it)."""

    name: str
    #: Keys only this stack writes: a file with any of them is this stack's.
    markers: tuple[str, ...]
    step: tuple[str, ...]
    generation: tuple[str, ...]
    compute: tuple[str, ...]
    #: The time the trainer waited for rollouts; a synchronous stack's is its generation.
    wait: tuple[str, ...]
    #: Per trajectory, over the step's trajectories: mean time in tools, mean time generating,
    #: and the slowest trajectory's two.
    tool: tuple[str, ...] = ()
    trajectory_generation: tuple[str, ...] = ()
    slowest_tool: tuple[str, ...] = ()
    slowest_generation: tuple[str, ...] = ()
    #: Keys whose sum is the step when no step key is logged (AReaL's phases).
    step_parts: tuple[str, ...] = ()

    def keys(self) -> set[str]:
        fields = (
            self.step, self.generation, self.compute, self.wait, self.tool,
            self.trajectory_generation, self.slowest_tool, self.slowest_generation,
            self.step_parts,
        )  # fmt: skip
        return {key for keys in fields for key in keys}


STACKS: tuple[Stack, ...] = (
    Stack(
        "verl",
        markers=("timing_s/step", "timing_s/gen", "timing_s/update_actor"),
        step=("timing_s/step",),
        generation=("timing_s/gen",),
        compute=("timing_s/update_actor",),
        wait=("timing_s/gen",),
        tool=(f"{VERL_LOOP}/tool_calls/mean",),
        trajectory_generation=(f"{VERL_LOOP}/generate_sequences/mean",),
        slowest_tool=(f"{VERL_LOOP}/slowest/tool_calls",),
        slowest_generation=(f"{VERL_LOOP}/slowest/generate_sequences",),
    ),
    Stack(
        "SkyRL",
        markers=("timing/wait_for_generation_buffer", "timing/policy_train", "timing/generate"),
        step=("timing/step",),
        generation=("timing/generate",),
        compute=("timing/policy_train",),
        wait=("timing/wait_for_generation_buffer", "timing/generate"),
    ),
    Stack(  # newer slime trees time the trainer under timing/ (its rollout stays perf/)
        "slime",
        markers=(
            "perf/train_wait_time",
            "perf/rollout_time",
            "perf/wait_time_ratio",
            "timing/train_wait_time",
        ),
        step=("perf/step_time", "timing/step_time"),
        generation=("perf/rollout_time",),
        compute=("perf/train_time", "timing/train_time"),
        wait=("perf/train_wait_time", "timing/train_wait_time"),
    ),
    Stack(
        "NeMo-RL",
        markers=(
            "timing/train/total_step_time",
            "timing/train/exposed_generation",
            "timing/train/policy_training",
        ),
        step=("timing/train/total_step_time",),
        generation=("timing/train/generation", "timing/train/exposed_generation"),
        compute=("timing/train/policy_training",),
        wait=("timing/train/exposed_generation", "timing/train/generation"),
    ),
    Stack(
        "AReaL",
        markers=("timeperf/rollout", "timeperf/train_step", "timeperf/update_weights"),
        step=("timeperf/step",),
        generation=("timeperf/rollout",),
        compute=("timeperf/train_step",),
        wait=("timeperf/rollout",),
        step_parts=("timeperf/rollout", "timeperf/train_step", "timeperf/update_weights"),
    ),
    Stack(
        "prime-rl",
        markers=("time/wait_for_batch", "time/generate_completions", "time/forward_backward"),
        step=("time/step",),
        generation=("time/generate_completions",),
        compute=("time/forward_backward",),
        wait=("time/wait_for_batch",),
    ),
    Stack(
        "ROLL",
        markers=("time/step_total", "time/step_generate", "time/step_train"),
        step=("time/step_total",),
        generation=("time/step_generate",),
        compute=("time/step_train",),
        wait=("time/step_generate",),
    ),
)
BY_NAME = {stack.name: stack for stack in STACKS}


def detect(keys: Collection[str]) -> Stack | None:
    """The stack with the most of its markers among ``keys``, None when no stack has one."""
    found = set(keys)
    best = max(STACKS, key=lambda stack: len(found.intersection(stack.markers)))
    return best if found.intersection(best.markers) else None
