"""A training run's own logs: one reader per file kind (JSONL, W&B history CSV, TensorBoard
events, log lines), the stack told from the keys found, one record per training step, the
run's figures, and what another measured substrate would change (docs/training-logs.md)."""
