"""Saved runs and the gate on them: storage, comparison, calibration, history."""
