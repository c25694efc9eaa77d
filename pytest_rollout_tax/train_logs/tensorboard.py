"""TensorBoard event files (``events.out.tfevents.*``), read by TensorBoard's own event
accumulator: scalars as ``simple_value`` (torch's and tensorboardX's writers) or as scalar
tensors (``tf.summary.scalar``). Needs the [train] extra (tensorboard)."""

from __future__ import annotations

from pathlib import Path

from ..errors import TrainLogError
from .records import Row

#: How a TensorBoard event file is named.
MARK = "tfevents"


def read(path: Path) -> list[Row]:
    """A row per (step, tag) scalar event; rows of one step merge later."""
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
        from tensorboard.util import tensor_util
    except ImportError:
        raise TrainLogError(
            f"{path}: reading a TensorBoard event file needs the [train] extra: "
            "pip install 'pytest-rollout-tax[train]'"
        ) from None
    accumulator = ea.EventAccumulator(str(path), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    try:
        accumulator.Reload()
    except Exception as exc:  # the reader's own errors (DataLossError, a bad proto) vary
        raise TrainLogError(f"{path}: not a readable TensorBoard event file ({exc})") from None
    tags = accumulator.Tags()
    rows: list[Row] = [
        (event.step, {tag: float(event.value)})
        for tag in tags.get(ea.SCALARS, [])
        for event in accumulator.Scalars(tag)
    ]
    for tag in tags.get(ea.TENSORS, []):
        for event in accumulator.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.size == 1 and value.dtype.kind in "fiu":
                rows.append((event.step, {tag: float(value.reshape(()))}))
    return rows
