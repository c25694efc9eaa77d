"""A mini-swe-agent Environment backed by any substrate (``pip install
'pytest-rollout-tax[mini]'``): the agent's commands run in a rollout's ``sandbox``, each one
a recorded step, so a mini-swe-agent run lands in the same summary as any workload.

    def test_my_agent(sandbox):
        agent = DefaultAgent(model, SandboxEnvironment(sandbox), **agent_config)
        agent.run("Fix the failing test")

Outside pytest, a recorder's sandbox serves the same (docs/record.md):

    with record("docker", out="runs/") as recorder, recorder.rollout("task") as sandbox:
        DefaultAgent(model, SandboxEnvironment(sandbox), **agent_config).run("Fix it")
"""

from __future__ import annotations

import platform
from typing import Any

from minisweagent.exceptions import Submitted
from minisweagent.utils.serialize import recursive_merge
from pydantic import BaseModel

from ..core.sandbox import Sandbox
from ..errors import StepTimeout
from ..replay import harness_command
from .versions import require

SUPPORTED = ">=2.4,<3"
VERSION = require("mini-swe-agent", SUPPORTED, "pytest_rollout_tax.integrations.mini_swe_agent")

#: The first line of an output that ends the run, as mini-swe-agent's environments check it.
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class SandboxEnvironmentConfig(BaseModel):
    """As mini-swe-agent's local and docker environments: where, with what, how long."""

    cwd: str = ""
    """Working directory of every command (relative: to the sandbox's workdir)."""
    env: dict[str, str] = {}
    """Environment variables every command gets."""
    timeout: int = 30
    """Seconds a command may run before it is killed (mini-swe-agent's default)."""


class SandboxEnvironment:
    """mini-swe-agent's Environment protocol (``execute``, ``get_template_vars``,
    ``serialize``) over a :class:`~pytest_rollout_tax.sandbox.Sandbox`."""

    def __init__(
        self, sandbox: Sandbox, *, config_class: type = SandboxEnvironmentConfig, **kwargs: Any
    ) -> None:
        self.sandbox = sandbox
        self.config = config_class(**kwargs)

    def execute(
        self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None
    ) -> dict[str, Any]:
        """Run ``action["command"]`` in the sandbox with bash (sh without it), stderr merged
        into the output, as mini-swe-agent's environments do; raises Submitted when the agent
        submits."""
        command = action.get("command", "")
        limit = timeout or self.config.timeout
        try:
            result = self.sandbox.exec(
                harness_command(f"exec 2>&1\n{command}"),
                timeout=limit,
                env=self.config.env or None,
                cwd=cwd or self.config.cwd or None,
            )
        except StepTimeout as exc:  # the sandbox stays usable: the agent sees it, as in mini
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {exc}",
                "extra": {"exception_type": "TimeoutExpired", "exception": str(exc)},
            }
        else:
            output = {"output": result.stdout, "returncode": result.exit_code, "exception_info": ""}
        _check_finished(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The config, this machine's ``platform.uname()`` (as mini's docker environment), the
        substrate and the sandbox's workdir."""
        return recursive_merge(
            self.config.model_dump(),
            platform.uname()._asdict(),
            {"substrate": self.sandbox.rollout.substrate, "workdir": self.sandbox.workdir},
            kwargs,
        )

    def serialize(self) -> dict[str, Any]:
        """The environment's part of a saved trajectory (variable names, never their values)."""
        config = self.config.model_dump(mode="json")
        config["env"] = sorted(config.get("env", {}))
        return {
            "info": {
                "config": {
                    "environment": config | {"substrate": self.sandbox.rollout.substrate},
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }


def _check_finished(output: dict[str, Any]) -> None:
    """Raise Submitted when the output's first line is the submit marker and it exited 0."""
    lines = output.get("output", "").lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() == SUBMIT_MARKER and output["returncode"] == 0:
        submission = "".join(lines[1:])
        raise Submitted(
            {
                "role": "exit",
                "content": submission,
                "extra": {"exit_status": "Submitted", "submission": submission},
            }
        )
