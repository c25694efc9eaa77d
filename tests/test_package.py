"""The public API: what ``from pytest_rollout_tax import ...`` offers, and its one error tree."""

import importlib
import inspect
import pkgutil

import pytest_rollout_tax
from pytest_rollout_tax import errors

#: Pinned: a name added to or removed from the public API is a decision, made here too.
PUBLIC = [
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


def test_all_is_pinned_and_every_name_in_it_exists():
    assert pytest_rollout_tax.__all__ == PUBLIC
    for name in PUBLIC:
        assert hasattr(pytest_rollout_tax, name), name


def test_everything_exported_that_is_not_a_module_is_in_all():
    exported = {
        name
        for name, value in vars(pytest_rollout_tax).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert exported == set(PUBLIC) - {"__version__"}


def modules():
    for info in pkgutil.walk_packages(pytest_rollout_tax.__path__, "pytest_rollout_tax."):
        if ".integrations." in info.name or info.name.endswith("__main__"):
            continue  # integrations import the harness they serve; __main__ runs the CLI
        yield importlib.import_module(info.name)


def test_every_public_exception_of_the_package_is_a_rollout_tax_error():
    found = set()
    for module in modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("pytest_rollout_tax")
                and not name.startswith("_")
            ):
                assert issubclass(value, errors.RolloutTaxError), f"{value.__module__}.{name}"
                found.add(value)
    assert errors.UsageError in found and errors.NoSavedRun in found


def test_every_error_the_package_exports_is_defined_in_errors():
    for name in PUBLIC:
        value = getattr(pytest_rollout_tax, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert value.__module__ == "pytest_rollout_tax.errors", name


def test_errors_that_are_builtin_kinds_stay_them():
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.UsageError, errors.ConfigError)
    assert issubclass(errors.NoSavedRun, LookupError)
    assert issubclass(errors.NotRegularFileError, OSError)
    assert issubclass(errors.StepTimeout, TimeoutError)
