"""What the commands share: a count argument, and a saved run that must exist."""

from __future__ import annotations

from .. import flags
from ..errors import NoSavedRun, UsageError
from ..gate.storage import SavedRun, Storage

#: An argument that is a count (``--shards``, ``--rollouts``), parsed as the plugin parses it.
COUNT = flags.argparse_type(flags.count)


def load_required(storage: Storage, ref: str, argument: str) -> SavedRun:
    """The saved run ``ref``; its absence is a usage error naming ``argument``."""
    try:
        return storage.load(ref)
    except NoSavedRun as exc:
        raise UsageError(f"{argument}: {exc}") from None
