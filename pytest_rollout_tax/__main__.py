"""``python -m pytest_rollout_tax``: see :mod:`pytest_rollout_tax.cli`."""

from .cli import main

raise SystemExit(main())
