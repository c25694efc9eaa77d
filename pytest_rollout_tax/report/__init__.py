"""From rollout records to the report: aggregation, projection, the terminal table, JSON, HTML."""
