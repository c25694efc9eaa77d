"""The ec2 substrate against real AWS: runs only when credentials and an AMI are configured.

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

import os

import pytest

from pytest_rollout_tax.errors import StepTimeout

REQUIRED = ("ROLLOUT_TAX_EC2_AMI", "ROLLOUT_TAX_EC2_KEY_NAME", "ROLLOUT_TAX_EC2_SSH_KEY")
OPTIONAL = {
    "ssh_user": "ROLLOUT_TAX_EC2_SSH_USER",
    "instance_type": "ROLLOUT_TAX_EC2_INSTANCE_TYPE",
    "subnet_id": "ROLLOUT_TAX_EC2_SUBNET_ID",
    "security_group_ids": "ROLLOUT_TAX_EC2_SECURITY_GROUP_IDS",
    "connect": "ROLLOUT_TAX_EC2_CONNECT",
    "region": "ROLLOUT_TAX_EC2_REGION",
}


@pytest.fixture(scope="module")
def live_opts() -> dict[str, str]:
    """Options for real EC2, or a skip that says what is missing."""
    missing = [name for name in REQUIRED if not os.environ.get(name)]
    if missing:
        pytest.skip(f"live EC2 tests need AWS credentials and {', '.join(missing)}: not set")
    import boto3

    if boto3.Session().get_credentials() is None:
        pytest.skip("live EC2 tests need AWS credentials: none found in the standard chain")
    opts = {
        "ami": os.environ["ROLLOUT_TAX_EC2_AMI"],
        "key_name": os.environ["ROLLOUT_TAX_EC2_KEY_NAME"],
        "ssh_key": os.environ["ROLLOUT_TAX_EC2_SSH_KEY"],
        "ready_timeout": "600",
    }
    opts |= {key: os.environ[env] for key, env in OPTIONAL.items() if os.environ.get(env)}
    return opts


@pytest.fixture(scope="module")
def live_substrate(live_opts):
    from pytest_rollout_tax.substrates.ec2 import EC2Substrate

    substrate = EC2Substrate(**live_opts, tags={"purpose": "rollout-tax-live-test"})
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def test_live_round_trip(live_substrate):
    with live_substrate.start(timeout=120) as sb:
        assert list(sb.rollout.phases) == ["requested", "running", "ssh_ready", "first_exec"]
        assert sb.exec("echo hi; exit 3").exit_code == 3
        payload = bytes(range(256)) * 1024
        sb.write_file("nested/dir/blob.bin", payload)
        assert sb.read_file("nested/dir/blob.bin", binary=True) == payload
        connection = sb.exec("echo $SSH_CONNECTION").stdout
        with pytest.raises(StepTimeout):
            sb.exec("sleep 300", timeout=1)
        assert sb.exec("echo $SSH_CONNECTION").stdout == connection
        assert len(sb.probe(10)) == 10
        instance_id = sb.instance_id
    described = live_substrate.client.describe_instances(InstanceIds=[instance_id])
    states = {i["State"]["Name"] for r in described["Reservations"] for i in r["Instances"]}
    assert states <= {"shutting-down", "terminated"}


def test_live_session_leaves_nothing_behind(live_substrate):
    with live_substrate.start() as sb:
        assert sb.exec("true").ok
    assert live_substrate.reap(live_substrate.session_id) == 0
