"""``docker``: one container per sandbox on a Docker engine (the paper's "single container").

``lifecycle`` creates, removes and reaps containers; steps reach them through one of two
transports: ``exec`` (one exec API call per step, files through the archive API) or
``session`` (one shell per container, attached for its whole life).
"""

from .engine import DEFAULT_HOST
from .exec import DockerExec
from .handle import DockerHandle
from .lifecycle import KEEPALIVE, OWNER_LABEL, DockerSubstrate
from .options import DEFAULT_IMAGE, DockerOptions
from .shell import DockerShell

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_IMAGE",
    "KEEPALIVE",
    "OWNER_LABEL",
    "DockerExec",
    "DockerHandle",
    "DockerOptions",
    "DockerShell",
    "DockerSubstrate",
]
