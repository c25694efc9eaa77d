"""Late creates on the EC2 stand-in (moto behind the fault proxy): a RunInstances answered
only after the create's budget, or cancelled between its request and its answer, leaves no
live instance of the session: it is found by its tags and terminated."""

from __future__ import annotations

import pytest
from support.ec2_moto import ec2_client
from support.late_answer import keyboard_interrupts

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.substrate import SESSION_LABEL
from pytest_rollout_tax.errors import CreateTimeout

GONE = ("shutting-down", "terminated")


def live_of_session(moto_server, session: str) -> list[str]:
    """Ids of the session's instances that are not on their way out, asked of moto directly."""
    client = ec2_client(moto_server.url)
    tag = [{"Name": f"tag:{SESSION_LABEL}", "Values": [session]}]
    found = client.describe_instances(Filters=tag)["Reservations"]
    listed = [i for r in found for i in r["Instances"]]
    return [i["InstanceId"] for i in listed if i["State"]["Name"] not in GONE]


def test_a_run_instances_answered_after_its_budget_leaves_no_instance(
    make_ec2, ec2_proxy, moto_server
):
    substrate = make_ec2(create_timeout="1")
    held = ec2_proxy.hold("RunInstances").arm()
    rollout = Rollout(substrate="ec2")
    with pytest.raises(CreateTimeout, match=r"create ran past its 1 s budget"):
        substrate.start(rollout)
    assert rollout.budget_exceeded == "create"
    held.release.set()
    assert substrate.late_creates.settle(60)
    assert held.made.is_set()
    assert live_of_session(moto_server, substrate.session_id) == []
    assert substrate.late_creates.reaped >= 1


def test_a_run_instances_cancelled_before_its_answer_leaves_no_instance(
    make_ec2, ec2_proxy, moto_server
):
    substrate = make_ec2()
    held = ec2_proxy.hold("RunInstances").arm(interrupt=True)
    with keyboard_interrupts(), pytest.raises(KeyboardInterrupt):
        substrate.start(Rollout(substrate="ec2"))
    assert held.made.is_set()
    held.release.set()
    assert substrate.late_creates.settle(60)
    assert live_of_session(moto_server, substrate.session_id) == []
    assert substrate.late_creates.reaped >= 1
