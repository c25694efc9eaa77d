"""The ec2 substrate against real AWS: runs only when credentials and an AMI are configured.

What every substrate does runs there too, as tests/contract/'s ``ec2-live`` variant; these are
the ec2-specific checks. The options come from tests/support/live.py (``live.ec2_options()``):

    ROLLOUT_TAX_EC2_AMI=ami-...           AMI to launch (required)
    ROLLOUT_TAX_EC2_KEY_NAME=NAME         EC2 key pair installed for the SSH user (required)
    ROLLOUT_TAX_EC2_SSH_KEY=PATH          its private key file (required)
    ROLLOUT_TAX_EC2_SSH_USER=ec2-user     optional, as are ..._INSTANCE_TYPE, ..._SUBNET_ID,
    ROLLOUT_TAX_EC2_SECURITY_GROUP_IDS=sg-a,sg-b, ..._CONNECT (default public_ip), ..._REGION
    plus AWS credentials and a region through the standard chain (env, profile, SSO, role).

Each test launches real instances (billed) and terminates them; a crashed run leaves instances
tagged rollout-tax.io/session, which ``pytest --rollout-reap --substrate=ec2`` removes.
"""

from __future__ import annotations

import pytest
from support import live

from pytest_rollout_tax.errors import StepTimeout


@pytest.fixture(scope="module")
def live_substrate():
    options = live.ec2_options()
    if isinstance(options, str):
        pytest.skip(options)
    from pytest_rollout_tax.substrates.ec2 import EC2Substrate

    substrate = EC2Substrate(**options, tags={"purpose": "rollout-tax-live-test"})
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def test_live_phases_one_connection_through_a_timeout_and_termination(live_substrate):
    with live_substrate.start(timeout=120) as sb:
        assert list(sb.rollout.phases) == ["requested", "running", "ssh_ready", "first_exec"]
        connection = sb.exec("echo $SSH_CONNECTION").stdout
        with pytest.raises(StepTimeout):
            sb.exec("sleep 300", timeout=1)
        assert sb.exec("echo $SSH_CONNECTION").stdout == connection
        instance_id = sb.id
    described = live_substrate.client.describe_instances(InstanceIds=[instance_id])
    states = {i["State"]["Name"] for r in described["Reservations"] for i in r["Instances"]}
    assert states <= {"shutting-down", "terminated"}


def test_live_session_transport_holds_one_shell_through_a_timeout():
    options = live.ec2_options()
    if isinstance(options, str):
        pytest.skip(options)
    from pytest_rollout_tax.substrates.ec2 import EC2Substrate

    substrate = EC2Substrate(
        **options, transport="session", tags={"purpose": "rollout-tax-live-test"}
    )
    try:
        with substrate.start() as sb:  # no default timeout: the parent of a command is the shell
            phases = ["requested", "running", "ssh_ready", "session", "first_exec"]
            assert list(sb.rollout.phases) == phases
            shell = sb.exec("echo $PPID").stdout
            with pytest.raises(StepTimeout):
                sb.exec("sleep 300", timeout=1)
            sb.write_file("f", b"\0\xff")
            assert sb.read_file("f", binary=True) == b"\0\xff"
            assert sb.exec("echo $PPID").stdout == shell
    finally:
        substrate.reap(substrate.session_id)
        substrate.close()


def test_live_session_leaves_nothing_behind(live_substrate):
    with live_substrate.start() as sb:
        assert sb.exec("true").ok
    assert live_substrate.reap(live_substrate.session_id) == 0
