"""The plugin's options (each with an ini twin) and ``Settings``, their values parsed and
checked when pytest configures: a bad value is a usage error before any test runs."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from .. import flags
from ..core.paths import regular_file
from ..core.transport import OUTPUT_CAP
from ..errors import ConfigError, HistoryUnavailable, NotRegularFileError, RolloutTaxError
from ..fleet import burst
from ..gate import history
from ..gate.storage import DEFAULT_STORAGE
from ..replay import MODES, Mode
from ..replay.load import REPLAY_SUFFIXES
from ..report.aggregate import STEP_CHOICES
from ..report.projection import Scale
from ..report.train_model import TrainModel
from ..substrates.registry import Registry
from ..substrates.selection import Catalog, SubstrateSpec, resolve, split_names, variant_tables
from .shard import Shard, parse_start

#: ``--rollout-order`` choices.
ORDERS = ("grouped", "interleave")
#: Ceilings of the counts: each rollout is a pytest item and each probe an exec, held in memory
#: and run in turn; a fleet is a number of workers to project onto.
MAX_ROUNDS = 10_000
MAX_PROBES = 10_000
#: The largest ``--rollout-output-cap``: a step's output is held in memory.
MAX_OUTPUT_CAP = 16 << 30
_SIZE = re.compile(r"(\d{1,12})\s*([kmgKMG]?)")

# -- options ---------------------------------------------------------------------------------

#: An ini value's type, as ``Parser.addini`` takes it.
IniType = Literal["string", "paths", "pathlist", "args", "linelist", "bool", "int", "float"]

OPTIONS: list[tuple[str, dict[str, Any], str, IniType | None, Any]] = [
    # flag, addoption kwargs, help, ini type, ini default
    ("--substrate", {"action": "append", "metavar": "NAME[,NAME...]"},
     "substrates to run each workload on (repeatable); default: local", "args", ["local"]),
    ("--substrate-opt", {"action": "append", "metavar": "NAME.KEY=VALUE"},
     "an option for one substrate, e.g. docker.image=IMG or k8s.namespace=rl (repeatable)",
     "linelist", []),
    ("--rollout-rounds", {"metavar": "N"},
     "fresh rollouts of every workload per substrate, overriding the markers' rounds "
     "(the ini value is only the default for markers that set none; default 1)",
     "string", "1"),
    ("--rollout-probes", {"metavar": "N"},
     "no-op execs timed per sandbox to measure the per-action tax (default 5)", "string", "5"),
    (flags.PROJECT.plugin, {"metavar": flags.PROJECT.metavar}, flags.PROJECT.help, "string",
     None),
    (flags.THINK_TIME.plugin, {"metavar": flags.THINK_TIME.metavar},
     f"{flags.THINK_TIME.help} (default: the replayed trajectories' recorded think time, "
     "else none)", "string", None),
    ("--rollout-replay", {"action": "append", "metavar": "PATH"},
     "replay the recorded agent trajectories in PATH, a file or a directory (repeatable); "
     "in a directory, files that are not trajectories are skipped and counted", "paths", []),
    ("--rollout-replay-glob", {"action": "append", "metavar": "GLOB"},
     "also replay the files pytest collects whose path (relative to the rootdir) matches "
     "GLOB, e.g. runs/*/*.traj.json (repeatable); others are never collected as trajectories",
     "linelist", []),
    ("--rollout-replay-mode", {"metavar": "shape|exact"},
     "shape: each recorded action is one step with its recorded output size and exit code "
     "(runs anywhere); exact: the recorded commands as they were, in your image "
     "(default shape)", "string", "shape"),
    ("--rollout-replay-strict", {"action": "store_true", "default": None},
     "stop the run when a trajectory file found in a --rollout-replay folder or by the glob "
     "cannot be read (default: replay the others and name it in one line)", "bool", False),
    ("--rollout-burst", {"metavar": "N[,N...]"},
     "before the tests, start N sandboxes at once on each selected substrate, up to their "
     "first no-op exec, then tear them down; each level in turn, e.g. 1,4,16 (default: none)",
     "string", ""),
    (flags.FLEET.plugin, {"metavar": flags.FLEET.metavar}, f"{flags.FLEET.help} (default: none)",
     "string", ""),
    (flags.RANK_BY.plugin, {"metavar": flags.RANK_BY.metavar},
     f"{flags.RANK_BY.help} (default: worker-hours)", "string", "worker-hours"),
    (flags.TRAIN.plugin, {"metavar": flags.TRAIN.metavar}, f"{flags.TRAIN.help} (default: "
     "none, unless --rollout-rank-by=train)", "string", None),
    ("--rollout-json-steps", {"metavar": "all|none"},
     "per-step data in the --rollout-json report: all (each step's kind, time and exit code) "
     "or none (a smaller file; saved runs still keep step times for the gate); default all",
     "string", "all"),
    (flags.STORAGE.plugin, {"metavar": flags.STORAGE.metavar}, flags.STORAGE.help,
     "string", DEFAULT_STORAGE),
    ("--rollout-compare", {"nargs": "?", "const": "", "metavar": "NAME|PATH"},
     "compare with a saved run (default: the newest one)", "string", None),
    (flags.FAIL.plugin, {"action": "append", "metavar": flags.FAIL.metavar}, flags.FAIL.help,
     "linelist", []),
    (flags.MISSING.plugin, {"metavar": flags.MISSING.metavar}, flags.MISSING.help, "string",
     "fail"),
    (flags.STRICT.plugin, {"action": "store_true", "default": None}, flags.STRICT.help, "bool",
     False),
    (flags.CONTROL.plugin, {"metavar": flags.CONTROL.metavar}, flags.CONTROL.help, "string",
     None),
    ("--rollout-history-fail", {"action": "store_true", "default": None},
     "fail the run when the run just saved starts a new change point (a slowdown) in the "
     "history of saved runs; the mainline gate (needs pytest-rollout-tax[history])",
     "bool", False),
    ("--rollout-no-redact", {"action": "store_true", "default": None},
     "keep the secrets of rollout tests (their env values, their substrate's credentials) in "
     "pytest's own failure and captured-output sections, which are redacted by default; for "
     "debugging on your own machine, never in a CI whose logs others read", "bool", False),
    ("--rollout-output-cap", {"metavar": "BYTES"},
     "bytes of each output stream (stdout, stderr) one step keeps, e.g. 67108864, 64m or 1g; "
     "past it, output is counted and discarded, and the result says it was truncated "
     "(default 64m)", "string", "64m"),
    ("--rollout-order", {"metavar": "grouped|interleave"},
     "run order of the rollouts: grouped (each workload's substrates and rounds together) or "
     "interleave (round-robin across substrates: A B A B ..., fair on a drifting machine); "
     "default grouped", "string", "grouped"),
    ("--rollout-shard", {"metavar": "K/N"},
     "run shard K (from 0) of N: a deterministic part of the rollouts; N runs, one per K, "
     "together run each rollout once (merge them with python -m pytest_rollout_tax merge)",
     "string", None),
    ("--rollout-start-at", {"metavar": "TIME"},
     "wait until TIME (ISO 8601, UTC without an offset, or epoch seconds) before the first "
     "create, so the shards of a burst start together", "string", None),
]  # fmt: skip


def ini_name(flag: str) -> str:
    return {"--substrate": "rollout_substrates", "--substrate-opt": "rollout_substrate_opts"}.get(
        flag, flag.lstrip("-").replace("-", "_")
    )


def add_options(parser: pytest.Parser, taken: Callable[[str], bool] = lambda flag: False) -> None:
    """Every option in the plugin's one group, each with its ini twin; a flag another plugin
    has ``taken`` only as its ini twin."""
    group = parser.getgroup("rollout-tax", "rollout tax (latency of execution substrates)")
    for flag, kwargs, help_text, ini_type, ini_default in OPTIONS:
        if not taken(flag):
            group.addoption(flag, dest=ini_name(flag), help=f"{help_text} [ini: {ini_name(flag)}]",
                            **kwargs)  # fmt: skip
        parser.addini(ini_name(flag), help_text, type=ini_type, default=ini_default)
    group.addoption(
        "--rollout-reap",
        action="store_true",
        help="remove sandboxes left by earlier sessions on the selected substrates, then exit",
    )


def dests() -> list[str]:
    """The ``config.option`` names of every rollout-tax option."""
    return [ini_name(flag) for flag, *_ in OPTIONS] + ["rollout_reap"]


def ini_defaults() -> dict[str, Any]:
    """Every rollout-tax ini key with its default."""
    return {ini_name(flag): default for flag, *_, default in OPTIONS}


def option(config: pytest.Config, flag: str) -> Any:
    """The command-line value of an option, else its ini twin."""
    name = ini_name(flag)
    value = config.getoption(name, None)  # None: the flag yielded to another plugin's
    return config.getini(name) if value is None or value == [] else value


def number(
    config: pytest.Config, flag: str, kind: type, minimum: float, maximum: float = math.inf
) -> Any:
    value = option(config, flag)
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{flag}={value!r}: expected a number") from None
    if not math.isfinite(number):
        raise pytest.UsageError(f"{flag}={value!r}: expected a finite number")
    if number < minimum:
        raise pytest.UsageError(f"{flag}={value!r}: must be at least {minimum}")
    if number > maximum:
        raise pytest.UsageError(f"{flag}={value!r}: at most {maximum:,}")
    return number


@dataclass(frozen=True)
class Settings:
    """Every rollout-tax option, parsed and checked."""

    specs: dict[str, SubstrateSpec]
    #: Rounds for markers without ``rounds``; they override the markers when given on the CLI.
    rounds: int
    rounds_from_cli: bool
    probes: int
    scale: Scale
    #: ``--rollout-burst`` levels (empty: no burst).
    bursts: list[int]
    #: ``--rollout-fleet`` workers, or None.
    fleet: int | None
    #: Which step columns ``rollouts[]`` items keep: ``all`` or ``none``.
    json_steps: str
    #: Every substrate name a marker may use, and which of them are aliases.
    catalog: Catalog
    #: Trajectory files and directories to replay (``--rollout-replay``), and how.
    replay_paths: tuple[Path, ...] = ()
    replay_mode: Mode = "shape"
    #: ``--rollout-replay-glob`` patterns: more trajectory files, where pytest collects.
    replay_globs: tuple[str, ...] = ()
    #: Stop on an unreadable trajectory file found in a folder (``--rollout-replay-strict``).
    replay_strict: bool = False
    #: Fail on a new change point at the run just saved (``--rollout-history-fail``).
    history_fail: bool = False
    #: ``grouped`` or ``interleave``.
    order: str = "grouped"
    #: Redact rollout tests' own pytest reports (off with ``--rollout-no-redact``).
    redact: bool = True
    #: This run's shard (``--rollout-shard``), or None: the whole run.
    shard: Shard | None = None
    #: Epoch seconds to wait for before the first create (``--rollout-start-at``), or None.
    start_at: float | None = None
    #: Bytes of each output stream a step keeps (``--rollout-output-cap``).
    output_cap: int = OUTPUT_CAP
    #: The training step to project (``--rollout-train``), or None.
    train: TrainModel | None = None

    @classmethod
    def from_config(cls, config: pytest.Config, registry: Registry) -> Settings:
        try:
            selected = split_names(option(config, "--substrate"), "--substrate")
            tables = variant_tables(config.rootpath / "pyproject.toml")
            aliases = registry.aliases()
            opts = option(config, "--substrate-opt")
            specs = resolve(selected, opts, tables, registry.names(), aliases)
            json_steps = str(option(config, "--rollout-json-steps"))
            if json_steps not in STEP_CHOICES:
                raise ValueError(f"--rollout-json-steps={json_steps!r}: expected all or none")
            bursts = _burst_levels(str(option(config, "--rollout-burst") or ""))
            fleet_text = str(option(config, flags.FLEET.plugin) or "").strip()
            fleet = flags.FLEET.value(fleet_text, flags.FLEET.plugin) if fleet_text else None
            think_text = option(config, flags.THINK_TIME.plugin)
            think = None
            if think_text is not None:
                think = flags.THINK_TIME.value(str(think_text), flags.THINK_TIME.plugin)
            scale = _scale(option(config, flags.PROJECT.plugin), think)
            by_text = str(option(config, flags.RANK_BY.plugin))
            by = flags.RANK_BY.value(by_text, flags.RANK_BY.plugin)
            scale = dataclasses.replace(scale, rank_by=by)
            train_text = option(config, flags.TRAIN.plugin)
            train = None
            if train_text is not None:
                train = flags.TRAIN.value(str(train_text), flags.TRAIN.plugin)
            elif by == "train":
                train = TrainModel()
            replay_paths = tuple(Path(path) for path in option(config, "--rollout-replay"))
            for path in replay_paths:
                check_replay_path(path)
            replay_mode = str(option(config, "--rollout-replay-mode"))
            if replay_mode not in MODES:
                raise ValueError(
                    f"--rollout-replay-mode={replay_mode!r}: expected {' or '.join(MODES)}"
                )
            order = str(option(config, "--rollout-order"))
            if order not in ORDERS:
                raise ValueError(f"--rollout-order={order!r}: expected grouped or interleave")
            if control := option(config, flags.CONTROL.plugin):  # run fairly beside the rest
                names = [spec.name for spec in specs]
                if control not in names:
                    raise ValueError(
                        f"{flags.CONTROL.plugin}={control!r}: not a selected substrate; "
                        f"selected: {', '.join(names)}"
                    )
                order = "interleave"
            shard_text = option(config, "--rollout-shard")
            shard = Shard.parse(shard_text, "--rollout-shard") if shard_text else None
            start_text = option(config, "--rollout-start-at")
            start_at = parse_start(start_text, "--rollout-start-at") if start_text else None
            output_cap = _size(str(option(config, "--rollout-output-cap")), "--rollout-output-cap")
            history_fail = bool(option(config, "--rollout-history-fail"))
            if history_fail:
                history.require()
        except HistoryUnavailable as exc:
            raise pytest.UsageError(f"--rollout-history-fail: {exc}") from None
        except (RolloutTaxError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from None
        return cls(
            specs={spec.name: spec for spec in specs},
            rounds=number(config, "--rollout-rounds", int, 1, MAX_ROUNDS),
            rounds_from_cli=config.getoption("rollout_rounds", None) is not None,
            probes=number(config, "--rollout-probes", int, 0, MAX_PROBES),
            scale=scale,
            bursts=bursts,
            fleet=fleet,
            json_steps=json_steps,
            catalog=Catalog.of(tables, aliases),
            replay_paths=replay_paths,
            replay_mode=replay_mode,
            replay_globs=tuple(option(config, "--rollout-replay-glob")),
            replay_strict=bool(option(config, "--rollout-replay-strict")),
            history_fail=history_fail,
            order=order,
            redact=not option(config, "--rollout-no-redact"),
            shard=shard,
            start_at=start_at,
            output_cap=output_cap,
            train=train,
        )


def _scale(text: str | None, think_time_s: float | None) -> Scale:
    """The projection's scale: ``--rollout-project`` (:data:`flags.PROJECT`) at the think
    time; not given, the default, whose steps the replays' mean length may replace."""
    projected = None if text is None else flags.PROJECT.value(text, flags.PROJECT.plugin)
    return Scale.asked(projected, think_time_s)


def check_replay_path(path: Path) -> None:
    """A trajectory file, or a directory holding one; else a ValueError naming the problem."""
    where = f"--rollout-replay={path}"
    if not path.exists():
        raise ValueError(f"{where}: no such file or directory")
    if path.is_dir():
        if not any(p.is_file() and p.name.endswith(REPLAY_SUFFIXES) for p in path.rglob("*")):
            suffixes = ", ".join(f"*{suffix}" for suffix in REPLAY_SUFFIXES)
            raise ValueError(f"{where}: no trajectory file ({suffixes}) in this directory")
        return
    try:
        regular_file(path)
    except NotRegularFileError as exc:
        raise ValueError(f"{where}: {exc.strerror}; expected a trajectory file") from None


def _size(text: str, flag: str) -> int:
    """``64m`` -> 67108864: bytes, or k, m, g (binary units); from 1 byte to MAX_OUTPUT_CAP."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{flag}={text!r}: expected a size in bytes like 67108864, 64m or 1g")
    size: int = int(match[1]) * 1024 ** " kmg".index((match[2] or " ").lower())
    if not 1 <= size <= MAX_OUTPUT_CAP:
        raise ValueError(f"{flag}={text!r}: expected 1 byte to {MAX_OUTPUT_CAP >> 30}g")
    return size


def _burst_levels(text: str) -> list[int]:
    if not text.strip():
        return []
    try:
        return burst.parse_levels(text)
    except ConfigError as exc:
        raise ConfigError(f"--rollout-burst={exc}") from None
