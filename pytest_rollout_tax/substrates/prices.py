"""The shipped rate sheet (``prices.toml``) and the rate in force for one substrate."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from ..core.price import USER_SOURCE, PriceOptions, Rate, Resources

#: The keys of a price (not of the resources it bills for).
PRICE_KEYS = ("vcpu_hour", "gib_hour", "instance_hour", "fixed_hour", "min_billed_s")


@cache
def sheet() -> dict[str, dict[str, Any]]:
    """The shipped list prices by substrate kind."""
    text = resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def rate_for(kind: str, resources_: Resources, price: PriceOptions) -> Rate | None:
    """The rate in force: the sheet's list price for ``kind`` overridden by the user's
    ``price.*`` keys, on the resources the substrate bills for; None without any price."""
    listed = dict(sheet().get(kind, {}))
    per_instance = listed.pop("instance_hour", None)
    if isinstance(per_instance, dict):  # priced by instance type (ec2)
        listed["instance_hour"] = per_instance.get(resources_.instance_type)
    given = price.given()
    prices = {key: listed.get(key) for key in PRICE_KEYS} | {
        key: given[key] for key in PRICE_KEYS if key in given
    }
    if all(prices[key] is None for key in ("vcpu_hour", "gib_hour", "instance_hour")):
        return None
    yours = any(key in given for key in PRICE_KEYS)
    return Rate(
        **{key: value or 0.0 for key, value in prices.items()},
        vcpus=given.get("vcpus", resources_.vcpus) or 0.0,
        gib=given.get("gib", resources_.gib) or 0.0,
        share=given.get("share", resources_.share),
        instance_type=resources_.instance_type,
        source=USER_SOURCE if yours else listed.get("source", USER_SOURCE),
        as_of=None if yours else listed.get("as_of"),
        billing=listed.get("billing", ""),
    )


def how_to_set(name: str) -> str:
    """The line a row without a price shows."""
    return (
        f"{name}: no price; set the machine's with --substrate-opt {name}.price.instance_hour=D "
        f"(dollars per hour; {name}.price.share=K sandboxes per machine)"
    )
