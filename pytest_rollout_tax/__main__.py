"""``python -m pytest_rollout_tax``: see :mod:`pytest_rollout_tax.cli`."""

from .cli import run

run()
