"""The step policy: one path for every step, the no-op probe's too, on every transport."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from docker.api.exec_api import ExecApiMixin
from support.substrates import open_substrate

from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.shell import ShellTransport
from pytest_rollout_tax.substrates import local
from pytest_rollout_tax.substrates.ec2.ssh import SSHConnection
from pytest_rollout_tax.substrates.kubernetes import exec_transport

#: Per variant: the module or class and the attribute of the call that hands a step to the
#: substrate, the position of the command among its arguments (self counts), and what the
#: step's timeout wraps it in there (None: the client enforces it; E2B's SDK too; on a session,
#: the helper's server takes the deadline in the request).
SENDS: dict[str, tuple[Any, str, int, str | None]] = {
    "local": (local.subprocess, "Popen", 0, None),
    "local-session": (ShellTransport, "_request", 1, "R 60.000"),
    "docker": (ExecApiMixin, "exec_create", 2, "timeout"),
    "docker-session": (ShellTransport, "_request", 1, "R 60.000"),
    "k8s": (exec_transport.exec_ws, "run", 3, "timeout"),
    "k8s-session": (ShellTransport, "_request", 1, "R 60.000"),
    "ec2": (SSHConnection, "run", 1, None),
    "ec2-session": (ShellTransport, "_request", 1, "R 60.000"),
}


@pytest.fixture(params=list(SENDS))
def recorded(request, monkeypatch) -> Iterator[tuple[Sandbox, list[Any], str | None]]:
    """A started sandbox of the variant, the commands it hands its substrate from now on, and
    the wrapper expected around them."""
    owner, attribute, position, wrapper = SENDS[request.param]
    sent: list[Any] = []
    original: Callable[..., Any] = getattr(owner, attribute)

    def record(*args: Any, **kwargs: Any) -> Any:
        sent.append(args[position])
        return original(*args, **kwargs)

    with open_substrate(request.param, request) as substrate, substrate.start(timeout=60) as box:
        monkeypatch.setattr(owner, attribute, record)
        yield box, sent, wrapper
        monkeypatch.undo()


def _as_bin_true(command: Any) -> Any:
    """``command`` with its program ``true`` as ``/bin/true``."""
    if isinstance(command, bytes):  # a request to the session's helper: NUL-ended fields
        return command.replace(b"\0true\0", b"\0/bin/true\0")
    if isinstance(command, str):
        return command.replace(" true", " /bin/true")
    return [*command[:-1], "/bin/true" if command[-1] == "true" else command[-1]]


def test_the_probe_sends_what_a_step_of_the_same_command_sends(recorded):
    sandbox, sent, wrapper = recorded
    sandbox.probe(1)
    sandbox.exec(["true"])
    sandbox.exec(["/bin/true"])
    probe, step, bin_true = sent[-3:]
    assert probe == step
    assert _as_bin_true(probe) == bin_true
    if wrapper is not None:  # the timeout wrapper is part of the probe, as of every step
        assert wrapper in (probe.decode() if isinstance(probe, bytes) else str(probe))
