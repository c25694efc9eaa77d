"""Typed substrate options from strings (``--substrate-opt``) or TOML values (pyproject)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_options(schema: type, raw: Mapping[str, Any], *, owner: str) -> Any:
    """Build the ``schema`` dataclass from ``raw``, naming ``owner.key`` in every error.

    A schema may define ``check()``, raising ValueError with a message that starts with the key.
    """
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    values = {}
    for key, value in _nested(raw).items():
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise ConfigError(f"{owner}.{key}: unknown option (options of {owner}: {known})")
        if dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{owner}.{key}={value!r}: expected {key}.KEY=VALUE options")
            values[key] = parse_options(hints[key], value, owner=f"{owner}.{key}")
            continue
        try:
            values[key] = coerce(value, hints[key])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{owner}.{key}={value!r}: {exc}") from None
    instance = schema(**values)
    check = getattr(instance, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as exc:
            raise ConfigError(f"{owner}.{exc}") from None
    return instance


def _nested(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``{"price.vcpu_hour": 1}`` (``--substrate-opt NAME.price.vcpu_hour=1``) folded into
    ``{"price": {"vcpu_hour": 1}}``, beside a TOML table of the same name."""
    folded: dict[str, Any] = {}
    for key, value in raw.items():
        head, dot, rest = key.partition(".")
        if not dot:
            folded[key] = value
            continue
        table = folded.setdefault(head, {})
        if isinstance(table, Mapping):
            folded[head] = {**table, rest: value}
    return folded


def coerce(value: Any, hint: Any) -> Any:
    """Convert ``value`` to the type ``hint`` names; strings are parsed, TOML values checked."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        is_none = value is None or (
            isinstance(value, str) and value.lower() in ("", "none", "null")
        )
        if is_none and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}")
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        text = str(value).lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise ValueError("expected true or false")
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"expected a number, got {type(value).__name__}")
        try:
            number = hint(value)
        except (ValueError, OverflowError):  # int()'s own message names Python, not the option
            kind = "an integer" if hint is int else "a number"
            raise ValueError(f"expected {kind}") from None
        if hint is float and number != number:
            raise ValueError("expected a number")
        return number
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return str(value)
    if origin is dict:
        return {str(k): coerce(v, args[1]) for k, v in _as_mapping(value).items()}
    if origin is list:
        return [coerce(item, args[0]) for item in _as_list(value)]
    raise TypeError(f"unsupported option type {hint!r}")


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """A mapping from a TOML table, a JSON object, or ``K=V,K2=V2``."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str):
        raise TypeError("expected KEY=VALUE pairs")
    text = value.strip()
    if text.startswith("{"):
        table = json.loads(text)
        if not isinstance(table, dict):
            raise TypeError("expected a JSON object")
        return table
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        pairs[key.strip()] = val.strip()
    return pairs


def _as_list(value: Any) -> list[Any]:
    """A list from a TOML array, a JSON array, or ``a,b,c``."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise TypeError("expected a list")
    text = value.strip()
    if text.startswith("["):
        items = json.loads(text)
        if not isinstance(items, list):
            raise TypeError("expected a JSON array")
        return items
    return [item.strip() for item in text.split(",") if item.strip()]
