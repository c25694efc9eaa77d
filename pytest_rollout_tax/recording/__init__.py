"""Record mode: a live run's rollouts timed and journaled outside pytest (docs/record.md).

:func:`record` makes a :class:`Recorder`; :func:`report_of` turns the directory it wrote into
the usual report (``python -m pytest_rollout_tax summarize DIR``)."""

from .journal import Recorded, read
from .load import notes, report_of
from .recorder import Recorder, record

__all__ = ["Recorded", "Recorder", "notes", "read", "record", "report_of"]
