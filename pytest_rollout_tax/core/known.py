"""A dataclass from a JSON object written by another version: keys it does not have (a newer
writer's) are left out, and keys the object lacks (an older writer's) take their defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def from_known(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls`` made of the fields of ``data`` it has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in data.items() if key in names})
