"""Shared test infrastructure: the docker engine and the local stand-ins for remote services."""
