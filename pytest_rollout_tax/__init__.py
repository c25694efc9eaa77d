"""Measure the rollout infrastructure tax of coding-agent RL, as a pytest plugin."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .core.contract import NotRegularFileError
from .core.record import Rollout, Step
from .core.sandbox import ExecResult, Sandbox
from .core.substrate import Substrate
from .errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from .substrates.registry import get_substrate

try:
    __version__ = version("pytest-rollout-tax")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "ConfigError",
    "CredentialsMissing",
    "ExecResult",
    "NotRegularFileError",
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
