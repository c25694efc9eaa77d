"""The terminal summary (decision first, then the ranked table and its notes) and the atomic
JSON writer."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from ..errors import ConfigError
from ..fleet import burst
from .format import hours, ratio, seconds, share
from .lines import (
    decision_lines,
    divergence_lines,
    environment_lines,
    few_samples_lines,
    header_lines,
    not_run_lines,
    ranked_names,
    spread_line,
)
from .table import table_lines
from .variants import comparison_lines

__all__ = ["hours", "ratio", "seconds", "share"]

#: The summary is at least this wide, wider on a wider terminal (``COLUMNS``).
MIN_WIDTH = 80


def terminal_width() -> int:
    """The terminal's width (``COLUMNS`` when set), never below MIN_WIDTH."""
    return max(MIN_WIDTH, shutil.get_terminal_size((MIN_WIDTH, 24)).columns)


def render_summary(report: dict, width: int | None = None) -> list[str]:
    """The lines of the end-of-session summary: the decision, the projection's terms, one
    table row per substrate (cheapest first), then notes; no line wider than ``width`` (None:
    the terminal's) where the table can narrow to it."""
    width = width or terminal_width()
    substrates = report["substrates"]
    lines = []
    for note in [*decision_lines(report), *header_lines(report)]:
        lines += wrap(note, width)
    lines += table_lines([(name, substrates[name]) for name in ranked_names(report)], width)
    notes = []
    for name, sub in substrates.items():
        if (shares := shares_line(name, sub)) is not None:
            notes.append(shares)
    notes += environment_lines(report)
    if (spread := spread_line(report)) is not None:
        notes.append(spread)
    notes += comparison_lines(substrates)
    for shared in report.get("shared_sandboxes") or []:
        notes.append(
            f"rollout-tax: error: {shared['substrate']}: {len(shared['rollouts'])} rollouts got "
            f"the same sandbox {shared['sandbox_id']}: {', '.join(shared['rollouts'])}"
        )
    for name, sub in substrates.items():
        notes += fleet_lines(name, sub)
    for name, sub in substrates.items():
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
    notes += divergence_lines(substrates)
    notes += not_run_lines(report)
    notes += few_samples_lines(substrates)
    notes += control_plane_lines(report)
    for note in notes:
        lines += wrap(note, width)
    return lines


def wrap(note: str, width: int) -> list[str]:
    """A note as lines no wider than ``width``, the later ones indented; never broken at a
    hyphen (substrate names have them)."""
    return textwrap.wrap(note, width=width, subsequent_indent="    ", break_on_hyphens=False)


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
    by_endpoint: dict[str, list[str]] = {}
    for name, plane in planes.items():
        rtt = seconds(plane["rtt_s"]) if plane["rtt_s"] is not None else "failed"
        by_endpoint.setdefault(plane["endpoint"], []).append(f"{name} {rtt}")
    trips = "; ".join(f"{', '.join(named)} ({endpoint})" for endpoint, named in by_endpoint.items())
    lines = [f"control-plane round trip from this client ({where or 'unknown machine'}): {trips}"]
    for name, plane in planes.items():
        if plane["stand_in"]:
            kind = report["substrates"][name].get("kind") or name
            lines.append(
                f"warning: {name}'s figures come from a local stand-in at {plane['endpoint']}, "
                f"not the real {kind} service"
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


def tax_cap_note(name: str, entry: dict) -> str | None:
    """The note for a substrate whose no-op probe is slower than its mean step, else None."""
    action, step = entry.get("action"), entry.get("step")
    if not action or not step or action["mean"] <= step["mean"]:
        return None
    return (
        f"note: {name}'s no-op probe ({seconds(action['mean'])}) is slower than its mean step "
        f"({seconds(step['mean'])}); its per-step tax is capped at the step"
    )


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
