"""The summary's dollars: each priced substrate's bill and where it goes, whose price it is,
and how to price the others."""

from __future__ import annotations

from datetime import date

from ..core.price import STALE_AFTER_DAYS
from ..report.cost import Cost
from ..report.document import Report, SubstrateEntry
from ..text.units import PART_LABELS, dollars, share


def cost_lines(report: Report, names: list[str], today: date | None = None) -> list[str]:
    """One line per priced substrate, a stale price flagged; then, when any is priced, one line
    naming the substrates without a price and how to set one."""
    today = today or date.today()
    substrates = report.substrates
    lines = []
    for name in names:
        entry = substrates[name]
        if entry.projected.cost is not None:
            lines.append(_bill(name, entry, entry.projected.cost, report.projection.rollouts))
            rate = entry.billing
            if rate is not None and rate.stale(today):
                lines.append(
                    f"warning: {name}'s list price was read on {rate.as_of}, over "
                    f"{STALE_AFTER_DAYS} days ago: check it, or set {name}.price.*"
                )
    unpriced = [n for n in names if substrates[n].dollars is None]
    if unpriced and len(unpriced) < len(names):
        lines.append(
            f"dollars: no price for {', '.join(unpriced)}; set one with --substrate-opt "
            "NAME.price.instance_hour=D (the machine's dollars per hour), or the sandbox's size "
            "NAME.price.vcpus=N and NAME.price.gib=G (docs/measurement.md#dollars)"
        )
    return lines


def _bill(name: str, entry: SubstrateEntry, cost: Cost, rollouts: int) -> str:
    """``e2b dollars: $18,136 for 1,000,000 rollouts ($886 environment only); think held 95%,
    command 3% ... at $0.0828 per sandbox-hour (list price of 2026-12-01)``."""
    rate = entry.billing
    total = cost.dollars
    line = f"{name} dollars: {dollars(total)} for {rollouts:,} rollouts"
    environment = cost.environment_dollars
    if abs(environment - total) > 0.005 * total:
        line += f" ({dollars(environment)} environment only)"
    parts = sorted(
        ((part, value) for part, value in cost.parts.items() if value > 0),
        key=lambda pair: -pair[1],
    )
    if parts and total:
        line += "; " + ", ".join(
            f"{_label(part)} {share(value / total)}" for part, value in parts[:4]
        )
    if rate is not None:
        whose = "your price" if rate.yours else f"list price of {rate.as_of}"
        line += f"; at ${rate.sandbox_hour:.4g} per sandbox-hour ({whose})"
    if not cost.fee_counted:
        line += "; its fixed fee needs --rollout-fleet"
    return line


def _label(part: str) -> str:
    return "think held" if part == "think" else PART_LABELS.get(part, part)
