"""The harness versions an adapter was written against: another version is refused in one
line naming both, before anything of it is used."""

from __future__ import annotations

from importlib import metadata

from packaging.specifiers import SpecifierSet

from ..errors import ConfigError


def require(distribution: str, supported: str, adapter: str) -> str:
    """The installed version of ``distribution`` if ``supported`` (a specifier such as
    ``>=1.4,<2``) admits it; else a ConfigError naming both versions."""
    try:
        installed = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"{adapter} needs {distribution}{supported}, which is not installed"
        ) from None
    if installed not in SpecifierSet(supported):
        raise ConfigError(
            f"{adapter} supports {distribution}{supported}; installed: {distribution} {installed}"
        )
    return installed
