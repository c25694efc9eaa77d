"""Options of the real services, from the environment: each returns options or a skip reason.

The live tests (test_*_live.py) and the contract suite's live variants read the same knobs.
"""

from __future__ import annotations

import os

#: kubernetes substrate option -> the environment variable that sets it for live tests.
K8S_KNOBS = {
    "context": "ROLLOUT_TAX_K8S_CONTEXT",
    "namespace": "ROLLOUT_TAX_K8S_NAMESPACE",
    "image": "ROLLOUT_TAX_K8S_IMAGE",
    "runtime_class": "ROLLOUT_TAX_K8S_RUNTIME_CLASS",
}
EC2_REQUIRED = ("ROLLOUT_TAX_EC2_AMI", "ROLLOUT_TAX_EC2_KEY_NAME", "ROLLOUT_TAX_EC2_SSH_KEY")
EC2_KNOBS = {
    "ssh_user": "ROLLOUT_TAX_EC2_SSH_USER",
    "instance_type": "ROLLOUT_TAX_EC2_INSTANCE_TYPE",
    "subnet_id": "ROLLOUT_TAX_EC2_SUBNET_ID",
    "security_group_ids": "ROLLOUT_TAX_EC2_SECURITY_GROUP_IDS",
    "connect": "ROLLOUT_TAX_EC2_CONNECT",
    "region": "ROLLOUT_TAX_EC2_REGION",
}


def k8s_options() -> dict[str, str] | str:
    """Options for the cluster KUBECONFIG points at, or why there is none."""
    if not os.environ.get("KUBECONFIG"):
        return "KUBECONFIG is not set: the live Kubernetes tests need a real cluster"
    return {key: os.environ[env] for key, env in K8S_KNOBS.items() if os.environ.get(env)}


def e2b_options() -> dict[str, object] | str:
    """Options for the real E2B service, or why there are none."""
    if not os.environ.get("E2B_API_KEY", "").strip():
        return "E2B_API_KEY is not set: the live E2B tests need a real account's API key"
    return {"template": os.environ.get("E2B_LIVE_TEMPLATE", "base"), "timeout": 120}


def prime_options() -> dict[str, object] | str:
    """Options for the real Prime Intellect service, or why there are none."""
    if not os.environ.get("PRIME_API_KEY", "").strip():
        return "PRIME_API_KEY is not set: the live Prime tests need a real account's API key"
    image = os.environ.get("PRIME_LIVE_IMAGE")
    return {"image": image, "timeout_minutes": 10} if image else {"timeout_minutes": 10}


def daytona_options() -> dict[str, object] | str:
    """Options for the real Daytona service, or why there are none."""
    if not os.environ.get("DAYTONA_API_KEY", "").strip():
        return "DAYTONA_API_KEY is not set: the live Daytona tests need a real account's API key"
    snapshot = os.environ.get("DAYTONA_LIVE_SNAPSHOT")
    return {"snapshot": snapshot} if snapshot else {}


def modal_options() -> dict[str, object] | str:
    """Options for the real Modal service, or why there are none."""
    missing = [v for v in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET") if not os.environ.get(v)]
    if missing:
        return f"{' and '.join(missing)} not set: the live Modal tests need a real account's token"
    return {
        "image": os.environ.get("MODAL_LIVE_IMAGE", "python:3.12-slim-bookworm"),
        "timeout": 120,
    }


def runloop_options() -> dict[str, object] | str:
    """Options for the real Runloop service, or why there are none."""
    if not os.environ.get("RUNLOOP_API_KEY", "").strip():
        return "RUNLOOP_API_KEY is not set: the live Runloop tests need a real account's API key"
    blueprint = os.environ.get("RUNLOOP_LIVE_BLUEPRINT")
    return {"blueprint": blueprint, "keep_alive": 600} if blueprint else {"keep_alive": 600}


def coreweave_options() -> dict[str, object] | str:
    """Options for the real CoreWeave Sandboxes service, or why there are none."""
    if not os.environ.get("CWSANDBOX_API_KEY"):
        return "CWSANDBOX_API_KEY not set: the live CoreWeave tests need a real organization's key"
    return {"image": os.environ.get("CWSANDBOX_LIVE_IMAGE", "python:3.11"), "max_lifetime": 600}


def ec2_options() -> dict[str, str] | str:
    """Options for real EC2 (AMI, key pair, SSH key from the environment), or why not."""
    missing = [name for name in EC2_REQUIRED if not os.environ.get(name)]
    if missing:
        return f"live EC2 tests need AWS credentials and {', '.join(missing)}: not set"
    import boto3

    if boto3.Session().get_credentials() is None:
        return "live EC2 tests need AWS credentials: none found in the standard chain"
    options = {
        "ami": os.environ["ROLLOUT_TAX_EC2_AMI"],
        "key_name": os.environ["ROLLOUT_TAX_EC2_KEY_NAME"],
        "ssh_key": os.environ["ROLLOUT_TAX_EC2_SSH_KEY"],
        "ready_timeout": "600",
    }
    return options | {key: os.environ[env] for key, env in EC2_KNOBS.items() if os.environ.get(env)}
