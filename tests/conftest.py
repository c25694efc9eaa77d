"""Fixtures shared by the test modules; each stand-in lives in its own tests/support module."""

from __future__ import annotations

from support.docker_engine import docker_client, sandbox_image

__all__ = ["docker_client", "sandbox_image"]
