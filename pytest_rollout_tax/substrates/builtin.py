"""Registers the built-in substrates through the same hook third-party plugins use."""

from __future__ import annotations

from .hookspecs import hookimpl

_MODULE = "pytest_rollout_tax.substrates"


@hookimpl
def rollout_tax_substrates() -> dict[str, object]:
    return {
        "local": f"{_MODULE}.local:LocalSubstrate",
        "docker": f"{_MODULE}.docker:DockerSubstrate",
        "bwrap": f"{_MODULE}.bwrap:BwrapSubstrate",
        "k8s": f"{_MODULE}.kubernetes:KubernetesSubstrate",
        "kubernetes": f"{_MODULE}.kubernetes:KubernetesSubstrate",
        "e2b": f"{_MODULE}.e2b:E2BSubstrate",
        "daytona": f"{_MODULE}.daytona:DaytonaSubstrate",
        "ec2": f"{_MODULE}.ec2:EC2Substrate",
        "modal": f"{_MODULE}.modal:ModalSubstrate",
        "runloop": f"{_MODULE}.runloop:RunloopSubstrate",
        "coreweave": f"{_MODULE}.coreweave:CoreWeaveSubstrate",
        "prime": f"{_MODULE}.prime:PrimeSubstrate",
    }
