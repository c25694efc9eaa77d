"""``ec2``: one fresh cloud VM per sandbox, reached over one SSH connection.

Control plane (:mod:`.lifecycle`, :mod:`.aws`): boto3 with the standard credential chain
and region resolution. Data plane: paramiko (:mod:`.ssh`, :mod:`.login`, :mod:`.hostkeys`),
with host keys pinned per instance. Transports: ``exec`` (:mod:`.transport`, one channel per
step, files over SFTP) and ``session`` (:mod:`.shell`, one channel running ``sh``).
"""

from __future__ import annotations

from ...errors import ExtraMissing

try:
    import boto3  # noqa: F401 - checked here, used by the modules below
    import paramiko  # noqa: F401
except ImportError:  # pragma: no cover - exercised by a test that hides the extra
    raise ExtraMissing("ec2", "aws") from None

from .errors import SSHChannelError, SSHError
from .lifecycle import EC2Handle, EC2Substrate
from .options import EC2Options, endpoint
from .ssh import SSH_LOG, SSHConnection

__all__ = [
    "SSH_LOG",
    "EC2Handle",
    "EC2Options",
    "EC2Substrate",
    "SSHChannelError",
    "SSHConnection",
    "SSHError",
    "endpoint",
]
