"""CSV metric tables: a W&B run history exported as CSV (``run.history().to_csv()``, or a
panel's export, whose columns read ``RUN - KEY`` beside ``RUN - KEY__MIN`` and ``__MAX``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..errors import TrainLogError
from .records import Row, row_of

#: A W&B panel export's extra columns: the min and max of a smoothed line.
BANDS = ("__MIN", "__MAX")


def column(name: str) -> str:
    """A header cell's metric key: ``my-run - timing_s/gen`` is ``timing_s/gen``."""
    return name.rsplit(" - ", 1)[-1].strip()


def read(path: Path, text: str) -> list[Row]:
    """A row per data line; a line with more cells than the header is an error."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
        rows = []
        for values in reader:
            if len(values) > len(header):
                raise TrainLogError(
                    f"{path}:{reader.line_num}: {len(values)} cells under a header of "
                    f"{len(header)}: not a metrics table"
                )
            cells = {
                column(name): value
                for name, value in zip(header, values, strict=False)
                if value.strip() and not name.endswith(BANDS)
            }
            rows.append(row_of(cells))
    except csv.Error as exc:
        raise TrainLogError(f"{path}:{reader.line_num}: not CSV ({exc})") from None
    return rows
