"""Saved runs and the gate on them: storage, comparison, noise, calibration, history."""
