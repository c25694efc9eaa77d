"""The report's schema names and the metrics whose raw samples every report keeps."""

from __future__ import annotations

SCHEMA = "rollout-tax/2"


#: Older schemas this version still reads (saved runs, baselines).
READABLE_SCHEMAS = ("rollout-tax/1", SCHEMA)


#: The STATS entries of a ``substrates[NAME]`` report entry, each backed by raw samples.
SAMPLE_METRICS = ("cold_start", "action", "step", "teardown", "trajectory")
