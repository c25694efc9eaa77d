"""The built-in substrates, one module per backend; each knows its own SDK and nothing else."""

#: The standard sandbox image, built without a registry by ``scripts/ensure-docker``.
SANDBOX_IMAGE = "rollout-tax/sandbox:bookworm"
