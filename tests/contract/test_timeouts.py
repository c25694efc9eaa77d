"""Step timeouts: what counts as one, and what a step past its timeout leaves behind."""

from __future__ import annotations

import math
import re

import pytest

from pytest_rollout_tax import Rollout, StepTimeout

INVALID = [math.nan, math.inf, -math.inf, 0, 0.0, -1, True, "1"]


def test_a_step_past_its_timeout_is_killed_with_its_children_and_the_sandbox_stays_usable(
    box, space
):
    message = rf"^{re.escape(box.substrate.name)}: step ran past its 1 s timeout; "
    with pytest.raises(StepTimeout, match=message):
        box.exec(f"sleep 300 & echo $! > {space}/pid; wait", timeout=1)
    pid = box.read_file(f"{space}/pid").strip()
    # the background child of the step went with it (a zombie counts as gone)
    gone = f"for i in $(seq 100); do ps -o stat= -p {pid} | grep -qv Z || exit 0; sleep 0.1; done"
    gone += "; exit 1"
    assert box.exec(gone, timeout=30).ok
    assert box.exec("echo alive").stdout == "alive\n"


def test_the_sandbox_timeout_is_the_default_of_every_step(contract_substrate):
    with contract_substrate.start(timeout=1) as sandbox:
        with pytest.raises(StepTimeout):
            sandbox.exec("sleep 300")
        assert sandbox.exec("echo alive", timeout=30).stdout == "alive\n"


@pytest.mark.parametrize("timeout", INVALID, ids=repr)
def test_a_timeout_that_is_not_a_positive_finite_number_is_a_value_error(box, timeout):
    steps = len(box.rollout.steps)
    with pytest.raises(ValueError, match="positive finite number"):
        box.exec("true", timeout=timeout)
    assert len(box.rollout.steps) == steps


@pytest.mark.parametrize("timeout", INVALID[:4], ids=repr)
def test_a_sandbox_timeout_that_is_not_a_positive_finite_number_starts_nothing(
    contract_substrate, timeout
):
    rollout = Rollout(substrate=contract_substrate.name)
    with pytest.raises(ValueError, match="positive finite number"):
        contract_substrate.start(rollout, timeout=timeout)
    assert rollout.phases == {}  # not even a create request was sent
