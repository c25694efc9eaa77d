"""Many sandboxes at once: the run's substrates, warm pools, bursts."""
