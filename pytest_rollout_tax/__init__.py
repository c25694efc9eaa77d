"""Measure the rollout infrastructure tax of coding-agent RL, as a pytest plugin."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from .record import Rollout, Step
from .registry import get_substrate
from .sandbox import ExecResult, Sandbox
from .substrate import Substrate

try:
    __version__ = version("pytest-rollout-tax")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "ConfigError",
    "CredentialsMissing",
    "ExecResult",
    "Rollout",
    "RolloutTaxError",
    "Sandbox",
    "SandboxError",
    "SandboxStartError",
    "Step",
    "StepTimeout",
    "Substrate",
    "SubstrateUnavailable",
    "__version__",
    "get_substrate",
]
