"""Measure the rollout infrastructure tax of coding-agent RL, as a pytest plugin."""

from __future__ import annotations

from importlib import metadata as _metadata

from .core.record import Rollout, Step
from .core.sandbox import ExecResult, Sandbox
from .core.substrate import Substrate
from .errors import (
    ConfigError,
    CredentialsMissing,
    HistoryUnavailable,
    MergeRefused,
    NoSavedRun,
    NotRegularFileError,
    PlotsUnavailable,
    ReplayFailure,
    RolloutTaxError,
    RuntimeMissing,
    SandboxError,
    SandboxStartError,
    SavedRunError,
    StepTimeout,
    SubstrateUnavailable,
    TrajectoryError,
    UsageError,
)
from .recording import Recorder, record
from .substrates.hookspecs import hookimpl
from .substrates.registry import get_substrate

try:
    __version__ = _metadata.version("pytest-rollout-tax")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "ConfigError",
    "CredentialsMissing",
    "ExecResult",
    "HistoryUnavailable",
    "MergeRefused",
    "NoSavedRun",
    "NotRegularFileError",
    "PlotsUnavailable",
    "Recorder",
    "ReplayFailure",
    "Rollout",
    "RolloutTaxError",
    "RuntimeMissing",
    "Sandbox",
    "SandboxError",
    "SandboxStartError",
    "SavedRunError",
    "Step",
    "StepTimeout",
    "Substrate",
    "SubstrateUnavailable",
    "TrajectoryError",
    "UsageError",
    "__version__",
    "get_substrate",
    "hookimpl",
    "record",
]
