"""The base of every hosted substrate (E2B, Daytona, Modal, ...): a provider writes its SDK
calls, the base does credentials, pacing, connection reuse, labels and reaping (late creates
included), the workdir, redaction and the error table. How to write one:
``docs/substrates/adding.md``."""

from .base import CLIENT_PHASE, PACED_PHASE, HostedHandle, HostedSubstrate
from .clients import PER_ROLLOUT, REUSED
from .credentials import Credentials
from .errors import CREATING, ErrorTable, Kind, Row, status_of
from .labels import OWNER_LABEL, Listed
from .options import LABEL_PREFIX, HostedOptions
from .transport import HostedTransport, Provider

__all__ = [
    "CLIENT_PHASE",
    "CREATING",
    "LABEL_PREFIX",
    "OWNER_LABEL",
    "PACED_PHASE",
    "PER_ROLLOUT",
    "REUSED",
    "Credentials",
    "ErrorTable",
    "HostedHandle",
    "HostedOptions",
    "HostedSubstrate",
    "HostedTransport",
    "Kind",
    "Listed",
    "Provider",
    "Row",
    "status_of",
]
