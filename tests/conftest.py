"""Fixtures shared by the test modules; each stand-in lives in its own tests/support module."""

from __future__ import annotations

from support.agent_sandbox_api import claims_api, claims_kubeconfig
from support.coreweave_server import coreweave_env, coreweave_server
from support.daytona_server import daytona_env, daytona_server
from support.docker_engine import (
    bwrap_ready,
    docker_client,
    experimental_runsc,
    runsc_runtime,
    sandbox_image,
)
from support.e2b_server import e2b_env, e2b_server
from support.ec2_moto import (
    ec2_aws_env,
    ec2_faults,
    ec2_keys,
    ec2_opts,
    ec2_proxy,
    ec2_world,
    make_ec2,
    moto_server,
    sshd_image,
    sshd_target,
)
from support.http_recorder import http_recorder
from support.k8s_api import k8s_api, k8s_kubeconfig
from support.modal_server import modal_env, modal_server
from support.optional import no_matplotlib
from support.otlp_receiver import otlp_receiver
from support.prometheus import prometheus
from support.runloop_server import runloop_env, runloop_server
from support.substrates import runsc_gap, selected_substrate

try:  # the prime extra is not in [all] (scripts/ensure-prime says why): its tests then skip
    from support.prime_server import prime_env, prime_server
except ImportError:
    prime_env = prime_server = None

__all__ = [
    "bwrap_ready",
    "claims_api",
    "claims_kubeconfig",
    "coreweave_env",
    "coreweave_server",
    "daytona_env",
    "daytona_server",
    "docker_client",
    "e2b_env",
    "e2b_server",
    "ec2_aws_env",
    "ec2_faults",
    "ec2_keys",
    "ec2_opts",
    "ec2_proxy",
    "ec2_world",
    "experimental_runsc",
    "http_recorder",
    "k8s_api",
    "k8s_kubeconfig",
    "make_ec2",
    "modal_env",
    "modal_server",
    "moto_server",
    "no_matplotlib",
    "otlp_receiver",
    "prime_env",
    "prime_server",
    "prometheus",
    "runloop_env",
    "runloop_server",
    "runsc_runtime",
    "sandbox_image",
    "selected_substrate",
    "sshd_image",
    "sshd_target",
]


def pytest_collection_modifyitems(items):
    """The known gaps of Debian's gVisor are strict xfails on its variants."""
    for item in items:
        runsc_gap(item)
