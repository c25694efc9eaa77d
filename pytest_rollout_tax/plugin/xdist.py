"""pytest-xdist: what a worker hands its controller, and the controller's hooks.

The workers' records arrive with their teardown reports (``pytest_runtest_logreport``), so a
worker that crashes loses only the rollout it was running.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pytest

from ..fleet.instances import Substrates

#: The controller's session id, handed to every worker (they label sandboxes alike).
SESSION_ID_KEY = "rollout_tax_session"
#: A worker's marker errors, raised on the controller.
USAGE_ERRORS_KEY = "rollout_tax_usage_errors"
#: A worker's warm-pool stats, merged on the controller.
POOLS_KEY = "rollout_tax_pools"
#: What a worker's collection of trajectory files found (``replay_files.Notes``).
REPLAY_NOTES_KEY = "rollout_tax_replay_notes"


def controller_session_id(config: pytest.Config) -> str | None:
    """The session id an xdist worker was handed; None outside a worker."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput[SESSION_ID_KEY] if workerinput else None


class WorkerNode(Protocol):
    """What the controller's hooks use of pytest-xdist's ``WorkerController`` (xdist ships no
    type hints); its ``workeroutput`` exists once the worker has ended (:func:`handed_over`)."""

    workerinput: dict[str, Any]


def hand_over(config: pytest.Config, key: str, value: Any) -> None:
    """Send ``value`` from a worker to its controller, which reads it when the worker ends."""
    # pytest-xdist sets the dict on a worker's config; pytest's Config does not declare it
    config.workeroutput[key] = value  # type: ignore[attr-defined]


def handed_over(node: WorkerNode) -> dict[str, Any]:
    """What an ended worker handed over (:func:`hand_over`); empty for one that crashed first."""
    output: dict[str, Any] = getattr(node, "workeroutput", {})
    return output


class XdistController:
    """Controller-side hooks: hand the session id out, gather what workers send, reap after
    a crashed worker."""

    def __init__(
        self,
        substrates: Substrates,
        add_pool_records: Callable[[dict[str, list[dict[str, Any]]]], None],
    ) -> None:
        self.substrates = substrates
        self.add_pool_records = add_pool_records
        self.crashed = False

    def pytest_configure_node(self, node: WorkerNode) -> None:
        node.workerinput[SESSION_ID_KEY] = self.substrates.session_id

    def pytest_testnodedown(self, node: WorkerNode, error: object) -> None:
        self.crashed = self.crashed or error is not None
        output = handed_over(node)
        self.add_pool_records(output.get(POOLS_KEY, {}))  # one warm pool per worker
        usage_errors = output.get(USAGE_ERRORS_KEY)
        if usage_errors:  # a bad marker found by the worker's collection
            raise pytest.UsageError(*usage_errors)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.crashed:  # a worker died without cleaning up: reap what it left
            self.substrates.reap_session(list(self.substrates.specs))
