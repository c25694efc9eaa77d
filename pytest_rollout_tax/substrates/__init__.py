"""The built-in substrates, one module per backend; each knows its own SDK and nothing else."""
