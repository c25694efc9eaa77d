"""The shipped rate sheet (``prices.toml``) and the rate in force for one substrate."""

from __future__ import annotations

import tomllib
from datetime import date
from functools import cache
from importlib import resources
from typing import Any

from .price import STALE_AFTER_DAYS, USER_SOURCE, PriceOptions, Rate, Resources

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
    vcpus, gib = given.get("vcpus", resources_.vcpus), given.get("gib", resources_.gib)
    if prices["instance_hour"] is None and vcpus is None and gib is None:
        return None  # priced by size, and the size is unknown: no price, never $0
    yours = any(key in given for key in PRICE_KEYS)
    return Rate(
        **{key: value or 0.0 for key, value in prices.items()},
        vcpus=vcpus or 0.0,
        gib=gib or 0.0,
        share=given.get("share", resources_.share),
        instance_type=resources_.instance_type,
        source=USER_SOURCE if yours else listed.get("source", USER_SOURCE),
        as_of=None if yours else listed.get("as_of"),
        billing=listed.get("billing", ""),
    )


def table(today: date) -> list[dict[str, str]]:
    """The shipped rate sheet as rows to print, stale prices flagged."""
    rows = []
    for kind, entry in sorted(sheet().items()):
        per_instance = entry.get("instance_hour")
        instances = (
            ", ".join(f"{name} {price:g}" for name, price in per_instance.items())
            if isinstance(per_instance, dict)
            else _dollars(per_instance)
        )
        age = (today - date.fromisoformat(entry["as_of"])).days
        rows.append(
            {
                "substrate": kind,
                "$/vCPU-h": _dollars(entry.get("vcpu_hour")),
                "$/GiB-h": _dollars(entry.get("gib_hour")),
                "$/instance-h": instances,
                "fee $/h": _dollars(entry.get("fixed_hour")),
                "min billed": f"{entry['min_billed_s']:g} s" if "min_billed_s" in entry else "",
                "as of": entry["as_of"] + (" (stale)" if age > STALE_AFTER_DAYS else ""),
            }
        )
    return rows


def _dollars(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
