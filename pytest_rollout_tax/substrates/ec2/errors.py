"""The ec2 backend's SSH errors, and how any exception reads in one line of a message."""

from __future__ import annotations

from ...core.transport import one_line
from ...errors import SandboxError


class SSHError(SandboxError):
    """The SSH connection to a live instance failed, was lost, or presented a changed key."""


class SSHChannelError(SSHError):
    """No channel could be opened: the connection is gone and nothing was started."""


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (or the type alone), on one line."""
    lines = str(exc).strip().splitlines()
    text = one_line(lines[0]) if lines else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
