"""The terminal summary table and the atomic JSON writer."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from ..core.stats import min_samples
from ..errors import ConfigError
from ..fleet import burst
from . import isolation

#: The summary fits a terminal this wide.
WIDTH = 100

HEADERS = (
    "substrate",
    "rollouts",
    "failed",
    "cold start\np50/p95",
    "action\np50/p95",
    "step\np50",
    "teardown\np50",
    "worker\nhours",
    "tax\nhours",
)


def seconds(value: float | None) -> str:
    """A duration in the unit that reads best: ``850us``, ``12.3ms``, ``1.24s``, ``2m05s``."""
    if value is None:
        return "-"
    if value < 0.9995e-3:  # below what rounds to 1.00ms
        return f"{value * 1e6:.0f}us"
    if value < 0.9995:
        return f"{value * 1e3:.3g}ms"
    if value < 119.5:
        return f"{value:.3g}s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes}m{rest:02d}s"


def hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def ratio(value: float) -> str:
    if value < 0.1:
        return f"{value:.2g}x"
    return f"{value:.2f}x" if value < 10 else f"{value:,.0f}x"


def render_summary(report: dict) -> list[str]:
    """The lines of the end-of-session summary: one table row per substrate, then notes."""
    projection = report["projection"]
    think = projection["think_time_s"]
    source = projection.get("think_time_source", "option")
    headline = (
        f"hours projected for {projection['rollouts']:,} rollouts x {projection['steps']} steps"
        + (f" with {think_time(think, source)} per step" if think else "")
        + "; tax = substrate overhead only"
    )
    lines = textwrap.wrap(headline, width=WIDTH)
    notes = []
    rows = []
    for name, sub in report["substrates"].items():
        rows.append(
            [
                name,
                sub["rollouts"],
                sub["failures"],
                _pair(sub["cold_start"]),
                _pair(sub["action"]),
                _stat(sub["step"], "p50"),
                _stat(sub["teardown"], "p50"),
                hours(sub["worker_hours"]),
                hours(sub["tax_hours"]),
            ]
        )
    lines += tabulate(
        rows,
        headers=HEADERS,
        tablefmt="simple",
        colalign=("left",) + ("right",) * (len(HEADERS) - 1),
    ).splitlines()
    for name, sub in report["substrates"].items():
        if (shares := shares_line(name, sub)) is not None:
            notes.append(shares)
    spread = report["spread"]
    if spread:
        notes.append(
            f"spread: cold start p50 {ratio(spread['cold_start_p50'])} "
            f"({spread['slowest']} vs {spread['fastest']}), "
            f"worker-hours {ratio(spread['worker_hours'])}"
            + (f" at {think_time(think, source)}/step" if think else "")
        )
    notes += variant_lines(report["substrates"])
    notes += isolation.runtime_lines(report["substrates"])
    notes += isolation.snapshot_lines(report["substrates"])
    for shared in report.get("shared_sandboxes") or []:
        notes.append(
            f"rollout-tax: error: {shared['substrate']}: {len(shared['rollouts'])} rollouts got "
            f"the same sandbox {shared['sandbox_id']}: {', '.join(shared['rollouts'])}"
        )
    for name, sub in report["substrates"].items():
        notes += fleet_lines(name, sub)
    for name, sub in report["substrates"].items():
        if sub.get("cost_usd") is not None:  # the substrate knows its price (ec2.price_per_hour)
            notes.append(
                f"{name}: the projected worker-hours cost ${sub['cost_usd']:,.0f} "
                f"at ${sub['price_per_hour']:g} per sandbox-hour"
            )
        if (cap := tax_cap_note(name, sub)) is not None:
            notes.append(cap)
        if sub["failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in sub["failure_reasons"].items())
            success = 1 - sub["failures"] / sub["rollouts"]
            notes.append(f"{name}: {success:.0%} of rollouts succeeded; failures: {reasons}")
        notes += few_samples_lines(name, sub)
    notes += control_plane_lines(report)
    for note in notes:
        lines += textwrap.wrap(note, width=WIDTH, subsequent_indent="    ")
    return lines


def think_time(think: float, source: str) -> str:
    """``2s think time``, or ``2s recorded think time`` when the trajectories recorded it."""
    return f"{seconds(think)} {'recorded ' if source == 'recorded' else ''}think time"


def fleet_lines(name: str, entry: dict) -> list[str]:
    """The burst, warm-pool and fleet lines of one substrate (none when not measured)."""
    lines = []
    if entry.get("burst"):
        lines.append(burst_line(name, entry["burst"]))
    pool = entry.get("pool")
    if pool:
        claims = pool["hits"] + pool["misses"]
        created = pool["creations"]
        line = (
            f"{name} warm pool of {pool['size']}"
            + (f" x {pool['pools']} processes" if pool["pools"] > 1 else "")
            + f": {pool['hits']}/{claims} claims found a sandbox ready; claim p50 "
            f"{_stat(entry['cold_start'], 'p50')} vs pool creation p50 {_stat(created, 'p50')}; "
            f"idle {seconds(pool['idle_sandbox_s'])} in all"
        )
        if claims and created and entry["cold_start"]:
            saved = created["mean"] - entry["cold_start"]["mean"]
            idle = pool["idle_sandbox_s"] / claims
            verdict = "pays for itself" if saved > idle else "costs more than it saves"
            line += (
                f"; per rollout it saves {seconds(max(saved, 0.0))} of cold start and adds "
                f"{seconds(idle)} idle: it {verdict}"
            )
        if pool["creation_failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in pool["failure_reasons"].items())
            line += f"; {pool['creation_failures']} pool creation(s) failed: {reasons}"
        lines.append(line)
    fleet = entry.get("fleet")
    if fleet:
        lines.append(
            f"{name} fleet of {fleet['workers']:,} workers: {hours(fleet['wall_clock_hours'])} "
            f"wall-clock hours, {hours(fleet['worker_hours'])} worker-hours (cold start "
            f"{seconds(fleet['cold_start_s'])} from {fleet['cold_start_from']})"
        )
    return lines


def burst_line(name: str, levels: list[dict]) -> str:
    """One line of a substrate's burst levels, naming the knee."""
    parts = []
    for level in levels:
        part = f"{level['concurrency']}: p50 {_stat(level['cold_start'], 'p50')}"
        if level["creates_per_s"] is not None:
            part += f", {level['creates_per_s']:.3g} creates/s"
        if level["failures"]:
            reasons = "; ".join(f"{n}x {why}" for why, n in level["failure_reasons"].items())
            part += f", {level['failures']} failed ({reasons})"
        parts.append(part)
    line = f"{name} burst cold start at " + " | ".join(parts)
    if len(levels) > 1:
        found = burst.knee(levels)
        line += (
            f"; knee at {found} (p50 > 2x the lowest level's)"
            if found
            else "; no knee (p50 within 2x of the lowest level's)"
        )
    return line


def control_plane_lines(report: dict) -> list[str]:
    """Where the client ran, each control plane's round trip, and which are local stand-ins."""
    planes = {
        n: s["control_plane"] for n, s in report["substrates"].items() if s.get("control_plane")
    }
    if not planes:
        return []
    machine = report.get("machine") or {}
    where = ", ".join(
        str(part)
        for part in (
            machine.get("platform"),
            f"{machine['cpu_count']} CPUs" if machine.get("cpu_count") else None,
            machine.get("ci"),
        )
        if part
    )
    trips = "; ".join(
        f"{name} {seconds(plane['rtt_s']) if plane['rtt_s'] is not None else 'failed'} "
        f"({plane['endpoint']})"
        for name, plane in planes.items()
    )
    lines = [f"control-plane round trip from this client ({where or 'unknown machine'}): {trips}"]
    for name, plane in planes.items():
        if plane["stand_in"]:
            kind = report["substrates"][name].get("kind") or name
            lines.append(
                f"warning: {name}'s figures come from a local stand-in at {plane['endpoint']}, "
                f"not the real {kind} service"
            )
    return lines


#: The percentiles the summary table shows, per metric (the highest first).
SHOWN_PERCENTILES = {
    "cold_start": ("p95", "p50"),
    "action": ("p95", "p50"),
    "step": ("p50",),
    "teardown": ("p50",),
}


def few_samples_lines(name: str, entry: dict) -> list[str]:
    """A warning per metric whose shown percentile comes from too few samples."""
    lines = []
    for metric, shown in SHOWN_PERCENTILES.items():
        samples = entry[metric]["n"] if entry.get(metric) else 0
        if metric != "cold_start" and not samples:
            continue  # not measured (no probes): shown as "-"
        short = next((q for q in shown if samples < min_samples(q)), None)
        if short is not None:
            label = "cold-start" if metric == "cold_start" else metric
            lines.append(
                f"warning: {name} has {samples} {label} sample(s); a {short} needs "
                f"{min_samples(short)} or more (run more rounds)"
            )
    return lines


#: How the summary names the parts of the worker-hours decomposition.
PART_LABELS = {
    "cold_start": "cold start",
    "overhead": "overhead",
    "command": "command",
    "think": "think",
    "teardown": "teardown",
    "idle": "pool idle",
    "isolation": "isolation",
}


def shares_line(name: str, entry: dict) -> str | None:
    """Where a substrate's worker-hours go, in shares, e.g. ``docker hours: cold start 10%,
    overhead 84%, command 3.6%, think 0%, teardown 2.7% (tax 97%)``."""
    parts, total = entry.get("decomposition"), entry.get("worker_hours")
    if not parts or not total:
        return None
    terms = ", ".join(
        f"{PART_LABELS.get(part, part)} {share(value / total)}"
        for part, value in parts.items()
        if part != "idle" or value  # a pool's idle time, where there is a pool
    )
    tax = entry.get("tax_hours")
    return f"{name} hours: {terms}" + (f" (tax {share(tax / total)})" if tax else "")


def share(fraction: float) -> str:
    """A share of a whole: ``84%``, ``3.6%``, ``0.1%``, ``<0.1%``, ``0%``."""
    if fraction == 0:
        return "0%"
    if fraction < 0.001:
        return "<0.1%"
    return f"{fraction:.0%}" if fraction >= 0.1 else f"{fraction:.1%}"


def variant_lines(substrates: dict[str, dict]) -> list[str]:
    """For each kind run as several variants (e.g. ``docker`` and ``docker-session``), each
    variant against the kind's baseline: its ``exec`` transport, else the first name."""
    by_kind: dict[str, list[str]] = {}
    for name, entry in substrates.items():
        if entry.get("kind"):
            by_kind.setdefault(entry["kind"], []).append(name)
    lines = []
    for names in by_kind.values():
        exec_names = [n for n in names if substrates[n].get("transport") == "exec"] or names
        base = substrates[baseline := exec_names[0]]
        for name in names:
            entry = substrates[name]
            if name == baseline or not entry["action"] or not base["action"]:
                continue
            if "isolation" in entry:  # another runtime: isolation.runtime_lines compares it
                continue
            speed = entry["action"]["p50"] / base["action"]["p50"]
            line = f"{name} vs {baseline}: action p50 {ratio(speed)}"
            if entry["tax_hours"] is not None and base["tax_hours"] is not None:
                line += f", tax-hours {entry['tax_hours'] - base['tax_hours']:+,.0f}"
            lines.append(line)
    return lines


def tax_cap_note(name: str, entry: dict) -> str | None:
    """The note for a substrate whose no-op probe is slower than its mean step, else None."""
    action, step = entry.get("action"), entry.get("step")
    if not action or not step or action["mean"] <= step["mean"]:
        return None
    return (
        f"note: {name}'s no-op probe ({seconds(action['mean'])}) is slower than its mean step "
        f"({seconds(step['mean'])}); its per-step tax is capped at the step"
    )


def _pair(stats: dict | None) -> str:
    return f"{seconds(stats['p50'])}/{seconds(stats['p95'])}" if stats else "-"


def _stat(stats: dict | None, name: str) -> str:
    return seconds(stats[name]) if stats else "-"


class NotRegularFileError(OSError):
    """A report's path exists and is not a regular file (a directory, device, fifo, socket)."""


#: What a path that is not a regular file is, by its mode.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link loop"),
)


def report_target(path: str | os.PathLike[str]) -> Path:
    """The file a report written to ``path`` replaces: symbolic links followed to their target.

    Raises NotRegularFileError when that file exists and is not a regular file.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.lstat().st_mode
    except OSError:  # missing (a new file), or unreachable: the write itself reports it
        return target
    if stat.S_ISREG(mode):
        return target
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    if os.path.abspath(path) != str(target):
        kind = f"it resolves to {target}, {kind}"
    raise NotRegularFileError(errno.EINVAL, f"not a regular file ({kind})", os.fspath(path))


def current_umask() -> int:
    """The process's umask, read from /proc where possible (changing it races other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # briefly the strictest mask, should another thread create a file
    os.umask(mask)
    return mask


def check_report_path(path: str | os.PathLike[str], where: str) -> Path:
    """Fail fast when a file cannot be written to ``path``; errors start with ``where``."""
    if Path(path).is_dir():
        raise ConfigError(f"{where}: is a directory; name a file")
    try:
        target = report_target(path)
    except NotRegularFileError as exc:
        raise ConfigError(f"{where}: {exc.strerror}; name a regular file or a new one") from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot create its directory: {exc.strerror}") from None
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: its directory is not writable")
    return target


#: Bytes written to a report file at a time.
BUFFER = 1 << 20
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def stream_json(handle: TextIO, data: dict) -> None:
    """Write ``data`` as compact JSON, each item of a top-level list encoded on its own."""
    handle.write("{")
    for index, (key, value) in enumerate(data.items()):
        handle.write(("," if index else "") + _ENCODE(key) + ":")
        if isinstance(value, Sequence) and not isinstance(value, str):
            handle.write("[")
            for position, item in enumerate(value):
                handle.write(("," if position else "") + _ENCODE(item))
            handle.write("]")
        else:
            handle.write(_ENCODE(value))
    handle.write("}")


def write_json(path: str | os.PathLike[str], data: dict) -> Path:
    """Write ``data`` as compact JSON atomically to ``path`` (through a symlink, to its target).

    A crash never leaves a half-written file; the file's mode is 0666 less the umask.
    """

    def write(handle: TextIO) -> None:
        stream_json(handle, data)
        handle.write("\n")

    return write_atomically(path, write)


def write_atomically(path: str | os.PathLike[str], write: Callable[[TextIO], None]) -> Path:
    """Have ``write`` fill a temporary file next to ``path``, then rename it over ``path``.

    Through a symlink, its target is replaced; the file's mode is 0666 less the umask.
    """
    target = report_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", buffering=BUFFER) as handle:
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
    return Path(path)
