"""SWE-ReX beside our docker transports: cold start, no-op and real steps, in one interleaved run.

    python benchmarks/peers.py [--rounds 15] [--actions 300] [--steps 20] [--json PATH]

Everything runs on one engine and one base image (``rollout-tax/sandbox:bookworm``):

- ``docker-exec``, ``docker-session``: our docker substrate, ``get_substrate("docker",
  transport="exec")`` and ``transport="session"``; the no-op action is ``Sandbox.probe``, the
  figure the report calls ``action``;
- ``swerex-command``, ``swerex-bash``: SWE-ReX (PyPI ``swe-rex``), ``DockerDeployment(image=...,
  pull="never")`` on ``rollout-tax/swerex:VERSION``: the base image plus ``swerex-remote``,
  built here from ``images/swerex/Dockerfile`` when missing, with no registry.
  ``Command(["true"])`` is its fastest path per action; ``BashAction("true")`` runs in a bash
  session, as SWE-agent drives it. Its cold start is ``start()`` to the first ``Command``
  returned (``swerex-bash``: ``start()``, ``create_session`` and the first ``BashAction``);
- floors: a bare docker-py ``exec_run(argv)`` in a container configured as ours, and a bare
  ``sh`` held open in the ``docker-session`` sandbox's own container on an exec with stdin
  attached (``exec_create(stdin=True)`` + ``exec_start(socket=True)``), sent the command's line
  (it forks and execs the program) and a sentinel line: the floor of a session step.

Real steps (``real_steps.STEPS``: ``/bin/true``, ``echo hi``, ``ls /``, ``git status`` on a
small repository, 1 MB of output) run with the same argv on our two transports, SWE-ReX
``Command`` and both floors (``BashAction``, ~100 ms of pexpect delay per command, only runs
the no-op). Every round takes one sample of every path, in reverse order every other round
(ABC CBA), so drift in the machine's load hits all alike. Reported: cold start to the first
command returned (p50), the no-op action (p50, p95), each real step (p50), teardown (p50), the
ratios of the medians, and the targets of issues 11 and 29, stated with their measured ratios
(not asserted).

Prerequisites: ``eval "$(scripts/ensure-docker)"``; ``pip install swe-rex aiohttp`` in this
Python environment (SWE-ReX's client imports aiohttp without declaring it); the docker CLI on
PATH (SWE-ReX's deployment runs it). Every container started here carries this run's session
label and is removed at the end, on Ctrl-C or SIGTERM too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import docker
from docker.models.containers import Container
from real_steps import MAKE_REPO, STEPS, AttachedShell, check_output, held_shell_line
from sampling import interleaved_all

from pytest_rollout_tax import Sandbox, Substrate, get_substrate
from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.substrates.docker import DEFAULT_IMAGE, KEEPALIVE, OWNER_LABEL

os.environ.setdefault("SWE_REX_LOG_STREAM_LEVEL", "WARNING")  # swerex reads it on import
try:
    from swerex.deployment.docker import DockerDeployment
    from swerex.runtime.abstract import (
        BashAction,
        Command,
        CreateBashSessionRequest,
    )
except ImportError as exc:  # main() says what to install
    SWEREX_MISSING: ImportError | None = exc
else:
    SWEREX_MISSING = None

T = TypeVar("T")

RECIPE_DIR = Path(__file__).resolve().parent.parent / "images" / "swerex"
RECIPE_LABEL = "rollout-tax.recipe"
#: Seconds any single step may take before the run fails instead of hanging.
STEP_TIMEOUT_S = 120.0

PATHS = {
    "docker-exec": "our docker substrate, transport=exec",
    "docker-session": "our docker substrate, transport=session",
    "swerex-command": "SWE-ReX Command([...])",
    "swerex-bash": "SWE-ReX BashAction in a session",
    "floor-exec-run": "floor: bare docker-py exec_run",
    "floor-attached-shell": "floor: sh held open, the same container",
}
OURS = ("docker-exec", "docker-session")
SWEREX = ("swerex-command", "swerex-bash")
FLOORS = ("floor-exec-run", "floor-attached-shell")
#: The paths every real step runs on (``BashAction`` adds its send delay to each: no-op only).
STEP_PATHS = ("docker-exec", "docker-session", "swerex-command", *FLOORS)
METRICS = ("cold_start", "session_phase", "noop", *STEPS, "teardown")
#: Issue 29's bounds: the session's real step against the held-shell line (goal 1.2x) and
#: SWE-ReX ``Command``'s step against the session's.
HELD_SHELL_BOUND, HELD_SHELL_GOAL, SWEREX_LEAD = 1.5, 1.2, 3.0


class Figure(NamedTuple):
    """One timed sample: ``seconds`` of ``metric`` on ``path``."""

    path: str
    metric: str
    seconds: float


def timed(action: Callable[[], object]) -> float:
    """Seconds ``action`` took."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def timed_step(action: Callable[[], str | bytes], step: str) -> float:
    """Seconds ``action`` took; RuntimeError if the 1 MB step came back short."""
    started = time.perf_counter()
    output = action()
    elapsed = time.perf_counter() - started
    check_output(step, output)
    return elapsed


# -- the peer and the floors ---------------------------------------------------------------------


class SweRex:
    """One SWE-ReX ``DockerDeployment``, driven call by call from this run's event loop."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, image: str, labels: Mapping[str, str]
    ) -> None:
        self._loop = loop
        docker_args = [
            arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")
        ]
        self.deployment = DockerDeployment(image=image, pull="never", docker_args=docker_args)

    def start(self) -> None:
        """Run the container and wait until ``swerex-remote`` answers."""
        self._wait(self.deployment.start())

    def command(self, argv: list[str]) -> str:
        """Run ``argv`` with ``Command`` (a fresh subprocess, no shell); its stdout."""
        command = Command(command=argv, check=True, timeout=STEP_TIMEOUT_S)
        return self._wait(self.deployment.runtime.execute(command)).stdout

    def open_session(self) -> None:
        """Open the default bash session that :meth:`bash` runs in."""
        self._wait(self.deployment.runtime.create_session(CreateBashSessionRequest()))

    def bash(self, line: str) -> str:
        """Run ``line`` with ``BashAction`` in the session; its output."""
        action = BashAction(command=line, check="raise", timeout=STEP_TIMEOUT_S)
        return self._wait(self.deployment.runtime.run_in_session(action)).output

    def stop(self) -> None:
        """Kill the container (it was run with ``--rm``) and close the client."""
        self._wait(self.deployment.stop())

    def close(self) -> None:
        """:meth:`stop` after a failure or an interrupt: its errors are dropped (the run's sweep
        removes the container whatever state SWE-ReX is left in)."""
        with contextlib.suppress(Exception):
            self.stop()

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coroutine)


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Run:
    """What every measurement shares: the engine, the images, the labels and the cleanup."""

    client: docker.DockerClient
    loop: asyncio.AbstractEventLoop
    image: str
    swerex_image: str
    session: str
    substrates: dict[str, Substrate]

    @property
    def labels(self) -> dict[str, str]:
        """The labels of every container started here, ours or not: this run's session and this
        process as its owner (as our substrate labels its own), so that a concurrent session's
        reaper spares them and :meth:`sweep` finds them all."""
        owner = self.substrates["docker-exec"].owner
        return {SESSION_LABEL: self.session, OWNER_LABEL: owner}

    def raw_container(self) -> Container:
        """A container made with docker-py alone, configured as our substrate makes its own."""
        return self.client.containers.run(
            self.image,
            entrypoint=KEEPALIVE,
            working_dir="/workspace",
            network_mode="none",
            init=True,
            security_opt=["no-new-privileges"],
            labels=self.labels,
            detach=True,
        )

    def swerex(self) -> SweRex:
        return SweRex(self.loop, self.swerex_image, self.labels)

    def sweep(self, patience_s: float = 30.0) -> set[str]:
        """Force-remove every container of this run still there and wait until they are gone
        (the engine answers 409 while a SWE-ReX container removes itself); the ids found."""
        label = f"{SESSION_LABEL}={self.session}"
        found: set[str] = set()
        deadline = time.monotonic() + patience_s
        while left := self.client.api.containers(all=True, filters={"label": label}):
            if time.monotonic() > deadline:
                raise RuntimeError(f"peers: could not remove the containers labelled {label}")
            for container in left:
                found.add(container["Id"])
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    self.client.api.remove_container(container["Id"], force=True, v=True)
            time.sleep(0.1)
        return found


def ours_cold(name: str, substrate: Substrate) -> list[Figure]:
    """One cold start of ours (create, start, [open the session,] first no-op) and teardown."""
    started = time.perf_counter()
    sandbox = substrate.start(timeout=STEP_TIMEOUT_S)
    cold = time.perf_counter() - started
    teardown = timed(sandbox.close)
    figures = [Figure(name, "cold_start", cold), Figure(name, "teardown", teardown)]
    if "session" in sandbox.rollout.phases:
        figures.append(Figure(name, "session_phase", sandbox.rollout.phases["session"]))
    return figures


def swerex_cold(run: Run) -> list[Figure]:
    """One cold start of SWE-ReX: ``start()``, the first ``Command``, then a session and its
    first ``BashAction``, each timed alone; then teardown (``stop()``)."""
    rex = run.swerex()
    try:
        start = timed(rex.start)
        command = timed(lambda: rex.command(["true"]))
        session = timed(rex.open_session)
        bash = timed(lambda: rex.bash("true"))
    except BaseException:
        rex.close()
        raise
    teardown = timed(rex.stop)
    return [
        Figure("swerex-command", "cold_start", start + command),
        Figure("swerex-bash", "cold_start", start + session + bash),
        Figure("swerex-bash", "session_phase", session),
        Figure("swerex-command", "teardown", teardown),
        Figure("swerex-bash", "teardown", teardown),
    ]


def measure_cold_starts(run: Run, rounds: int, warmup: int) -> list[Figure]:
    """``rounds`` fresh sandboxes of ours (each transport) and of SWE-ReX, interleaved."""
    samplers: dict[str, Callable[[], list[Figure]]] = {
        name: (lambda name=name: ours_cold(name, run.substrates[name])) for name in OURS
    }
    samplers["swerex"] = lambda: swerex_cold(run)
    interleaved_all(warmup, samplers)
    return flatten(interleaved_all(rounds, samplers, progress_line("cold starts", rounds)))


@contextlib.contextmanager
def live_targets(run: Run) -> Iterator[dict[str, Any]]:
    """One live sandbox per path, each with the small repository of ``git status``; the held
    shell in the session sandbox's own container. All removed on the way out."""
    with contextlib.ExitStack() as stack:
        targets: dict[str, Any] = {
            name: stack.enter_context(run.substrates[name].start(timeout=STEP_TIMEOUT_S))
            for name in OURS
        }
        rex = run.swerex()
        stack.callback(rex.close)
        rex.start()
        rex.open_session()
        container = run.raw_container()
        stack.callback(container.remove, force=True)
        shell = AttachedShell(run.client.api, targets["docker-session"].id)
        stack.callback(shell.close)
        for name in OURS:
            if not (made := targets[name].exec(["sh", "-c", MAKE_REPO])).ok:
                raise RuntimeError(f"peers: making the repository failed: {made.stderr}")
        rex.command(["sh", "-c", MAKE_REPO])
        if (made := container.exec_run(["sh", "-c", MAKE_REPO])).exit_code != 0:
            raise RuntimeError(f"peers: making the repository failed: {made.output!r}")
        targets.update({"swerex": rex, "container": container, "shell": shell})
        yield targets


def noop_samplers(targets: Mapping[str, Any]) -> dict[str, Callable[[], float]]:
    """The no-op action of every path, each returning its seconds."""
    rex: SweRex = targets["swerex"]
    container: Container = targets["container"]
    shell: AttachedShell = targets["shell"]
    samplers: dict[str, Callable[[], float]] = {
        name: (lambda sandbox=targets[name]: probe(sandbox)) for name in OURS
    }
    samplers["swerex-command"] = lambda: timed(lambda: rex.command(["true"]))
    samplers["swerex-bash"] = lambda: timed(lambda: rex.bash("true"))
    samplers["floor-exec-run"] = lambda: timed(lambda: container.exec_run(["true"]))
    samplers["floor-attached-shell"] = lambda: timed(lambda: shell.run("true"))
    return samplers


def step_samplers(targets: Mapping[str, Any]) -> dict[tuple[str, str], Callable[[], float]]:
    """Every real step on every path of :data:`STEP_PATHS`, keyed ``(path, step)``, each
    returning its seconds (and checking the 1 MB step's size)."""
    rex: SweRex = targets["swerex"]
    container: Container = targets["container"]
    shell: AttachedShell = targets["shell"]
    samplers: dict[tuple[str, str], Callable[[], float]] = {}
    for step, argv in STEPS.items():
        actions: dict[str, Callable[[], str | bytes]] = {
            name: (
                lambda sandbox=targets[name], a=argv: sandbox.exec(a, timeout=STEP_TIMEOUT_S).stdout
            )
            for name in OURS
        }
        actions["swerex-command"] = lambda a=argv: rex.command(a)
        actions["floor-exec-run"] = lambda a=argv: container.exec_run(a).output
        actions["floor-attached-shell"] = lambda a=argv: shell.run(held_shell_line(a))
        for name in STEP_PATHS:
            samplers[name, step] = lambda a=actions[name], s=step: timed_step(a, s)
    return samplers


def probe(sandbox: Sandbox) -> float:
    """One no-op through the sandbox's transport: the report's ``action`` figure."""
    return sandbox.probe(1)[0]


def measure_actions(run: Run, actions: int, steps: int, warmup: int) -> list[Figure]:
    """No-op actions, then every real step, on one live sandbox per path, each interleaved."""
    with live_targets(run) as targets:
        noops = noop_samplers(targets)
        interleaved_all(warmup, noops)
        samples = interleaved_all(actions, noops, progress_line("no-op actions", actions))
        figures = [Figure(p, "noop", s) for p, values in samples.items() for s in values]
        real = step_samplers(targets)
        interleaved_all(warmup, real)
        by_step = interleaved_all(steps, real, progress_line("real steps", steps))
        figures += [Figure(p, step, s) for (p, step), values in by_step.items() for s in values]
    return figures


def flatten(samples: Mapping[str, list[list[Figure]]]) -> list[Figure]:
    return [figure for per_path in samples.values() for one in per_path for figure in one]


def progress_line(what: str, total: int) -> Callable[[int], None]:
    """A progress callback that prints ``what i/total`` to stderr, about 10 times in all."""
    step = max(total // 10, 1)

    def report(done: int) -> None:
        if done % step == 0 or done == total:
            print(f"peers: {what} {done}/{total}", file=sys.stderr, flush=True)

    return report


# -- the image of the peer ---------------------------------------------------------------------


def ensure_swerex_image(client: docker.DockerClient, base: str, version: str) -> float | None:
    """Build ``rollout-tax/swerex:VERSION`` FROM ``base`` unless an image of this recipe exists;
    the seconds the build took (None if none was needed)."""
    tag = swerex_tag(version)
    recipe = recipe_id(client.images.get(base).id, version)
    with contextlib.suppress(docker.errors.ImageNotFound):
        if client.images.get(tag).labels.get(RECIPE_LABEL) == recipe:
            return None
    print(
        f"peers: building {tag} FROM {base} ({RECIPE_DIR / 'Dockerfile'}: apt python3-venv, "
        f"pip install swe-rex=={version}); 15-40 s",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    log: list[str] = []
    for chunk in client.api.build(
        path=str(RECIPE_DIR),
        tag=tag,
        buildargs={"BASE_IMAGE": base, "SWEREX_VERSION": version},
        labels={RECIPE_LABEL: recipe},
        rm=True,
        forcerm=True,
        decode=True,
    ):
        log.append(str(chunk.get("stream") or chunk.get("status") or "").rstrip())
        if "error" in chunk:
            tail = "\n".join(line for line in log[-20:] if line)
            raise SystemExit(f"peers: building {tag} failed: {chunk['error']}\n{tail}")
    return time.perf_counter() - started


def swerex_tag(version: str) -> str:
    return f"rollout-tax/swerex:{version}"


def recipe_id(base_id: str, version: str) -> str:
    """What the peer's image is built from: its Dockerfile, the base image and the version."""
    digest = hashlib.sha256((RECIPE_DIR / "Dockerfile").read_bytes())
    digest.update(f"\n{base_id}\n{version}\n".encode())
    return digest.hexdigest()[:16]


def check_prerequisites(client: docker.DockerClient, image: str) -> str:
    """SWE-ReX's version; SystemExit saying what to do if anything the run needs is missing."""
    if SWEREX_MISSING is not None:
        raise SystemExit(
            f"peers: SWE-ReX's client cannot be imported ({SWEREX_MISSING}). Install it in this "
            "environment: pip install swe-rex aiohttp"
        )
    if shutil.which("docker") is None:
        raise SystemExit("peers: SWE-ReX's DockerDeployment runs the docker CLI: put it on PATH")
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        raise SystemExit(f"peers: image {image} is missing: run scripts/ensure-docker") from None
    return metadata.version("swe-rex")


# -- figures, ratios and targets ----------------------------------------------------------------


def stats(samples: Sequence[float]) -> dict[str, Any]:
    """n, p50 and p95 in milliseconds, and every sample."""
    ms = [s * 1e3 for s in samples]
    p95 = statistics.quantiles(ms, n=20, method="inclusive")[-1] if len(ms) > 1 else ms[0]
    return {
        "n": len(ms),
        "p50_ms": statistics.median(ms),
        "p95_ms": p95,
        "samples_ms": [round(x, 4) for x in ms],
    }


def summarize(figures: Sequence[Figure]) -> dict[str, dict[str, dict[str, Any]]]:
    """``metrics[metric][path]``: the stats of its samples."""
    grouped: dict[str, dict[str, list[float]]] = {}
    for figure in figures:
        grouped.setdefault(figure.metric, {}).setdefault(figure.path, []).append(figure.seconds)
    return {
        metric: {path: stats(grouped[metric][path]) for path in PATHS if path in grouped[metric]}
        for metric in METRICS
        if metric in grouped
    }


def p50(metrics: Mapping[str, Mapping[str, Any]], metric: str, path: str) -> float:
    return metrics[metric][path]["p50_ms"]


def swerex_fastest(metrics: Mapping[str, Mapping[str, Any]], metric: str) -> str:
    """SWE-ReX's path with the lowest p50 for ``metric`` (of those that ran it)."""
    ran = [path for path in SWEREX if path in metrics[metric]]
    return min(ran, key=lambda path: p50(metrics, metric, path))


def ratios(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """``ratios[metric][ours][reference]``: our p50 over the reference's (< 1: ours is faster)."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for metric in ("noop", *STEPS, "cold_start"):
        references = ["docker-exec", "swerex-fastest"]
        if metric != "cold_start":
            references += FLOORS
        fastest = swerex_fastest(metrics, metric)
        result[metric] = {
            ours: {
                ref: p50(metrics, metric, ours)
                / p50(metrics, metric, fastest if ref == "swerex-fastest" else ref)
                for ref in references
            }
            for ours in OURS
        }
    return result


def target(claim: str, measured: float, relation: str, bound: float) -> dict[str, Any]:
    """One target (issues 11, 29) with what this run measured; ``relation`` is ``<=`` or ``>=``."""
    met = measured <= bound if relation == "<=" else measured >= bound
    return {"claim": claim, "measured": measured, "relation": relation, "bound": bound, "met": met}


def targets(metrics: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The docker ``session`` targets, each a measured ratio (or ms) against its bound."""
    noop, cold = (
        p50(metrics, "noop", "docker-session"),
        p50(metrics, "cold_start", "docker-session"),
    )
    fast_noop, fast_cold = swerex_fastest(metrics, "noop"), swerex_fastest(metrics, "cold_start")
    allowed_cold = 1.1 * p50(metrics, "cold_start", "docker-exec") + p50(
        metrics, "session_phase", "docker-session"
    )
    return [
        target(
            "session no-op p50 / exec's", noop / p50(metrics, "noop", "docker-exec"), "<=", 0.05
        ),
        target("session no-op p50, in ms", noop, "<=", 1.5),
        target(
            "session no-op p50 / bare attached-shell floor's",
            noop / p50(metrics, "noop", "floor-attached-shell"),
            "<=",
            3.0,
        ),
        target(
            f"SWE-ReX's fastest no-op p50 ({fast_noop}) / session's",
            p50(metrics, "noop", fast_noop) / noop,
            ">=",
            5.0,
        ),
        target(
            f"SWE-ReX's fastest cold start p50 ({fast_cold}) / session's",
            p50(metrics, "cold_start", fast_cold) / cold,
            ">=",
            3.0,
        ),
        target("session cold start / (1.1 x exec's + session phase)", cold / allowed_cold, "<=", 1),
        *step_targets(metrics),
    ]


def step_targets(metrics: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Issue 29's, per real step: the session's p50 against the held-shell line's (bound and
    goal), and SWE-ReX ``Command``'s against the session's."""
    found = []
    for step in STEPS:
        session = p50(metrics, step, "docker-session")
        floor = session / p50(metrics, step, "floor-attached-shell")
        found += [
            target(f"{step}: session / held-shell line", floor, "<=", HELD_SHELL_BOUND),
            target(f"{step}: session / held-shell line (goal)", floor, "<=", HELD_SHELL_GOAL),
            target(
                f"{step}: SWE-ReX Command / session",
                p50(metrics, step, "swerex-command") / session,
                ">=",
                SWEREX_LEAD,
            ),
        ]
    return found


# -- output -------------------------------------------------------------------------------------


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def times(value: float) -> str:
    return f"{value:.3f}x" if value < 0.1 else f"{value:.2f}x"


def figures_table(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One row per path: p50 of cold start, no-op (and its p95), 1 MB output and teardown."""
    columns = [
        ("cold start", "cold_start", "p50_ms"),
        ("no-op p50", "noop", "p50_ms"),
        ("no-op p95", "noop", "p95_ms"),
        ("teardown", "teardown", "p50_ms"),
    ]
    header = f"{'path':<22}{'':<41}" + "".join(f"{title:>12}" for title, _, _ in columns)
    lines = [header, "-" * len(header)]
    for path, what in PATHS.items():
        cells = [metrics.get(metric, {}).get(path, {}).get(key) for _, metric, key in columns]
        lines.append(f"{path:<22}{what:<41}" + "".join(f"{ms(c):>12}" for c in cells))
    return lines


def steps_table(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One row per path of :data:`STEP_PATHS`: each real step's p50."""
    header = f"{'path':<22}" + "".join(f"{step:>13}" for step in STEPS)
    lines = [header, "-" * len(header)]
    for path in STEP_PATHS:
        cells = [metrics[step][path]["p50_ms"] for step in STEPS]
        lines.append(f"{path:<22}" + "".join(f"{ms(c):>13}" for c in cells))
    return lines


def ratios_table(table: Mapping[str, Mapping[str, Mapping[str, float]]]) -> list[str]:
    """Our p50s over each reference's: below 1.00x, ours is faster."""
    references = ["docker-exec", "swerex-fastest", *FLOORS]
    header = f"{'ours':<16}{'metric':<12}" + "".join(f"{ref:>22}" for ref in references)
    lines = [header, "-" * len(header)]
    for metric, per_ours in table.items():
        for ours, row in per_ours.items():
            cells = [times(row[ref]) if ref in row else "-" for ref in references]
            lines.append(f"{ours:<16}{metric:<12}" + "".join(f"{c:>22}" for c in cells))
    return lines


def targets_lines(found: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for t in found:
        in_ms = t["claim"].endswith("in ms")
        value = f"{t['measured']:.3f} ms" if in_ms else f"{t['measured']:.3f}x"
        verdict = "met" if t["met"] else "NOT met"
        lines.append(
            f"  [{verdict:>7}] {t['claim']}: {value}, target {t['relation']} {t['bound']:g}"
        )
    return lines


def report(result: Mapping[str, Any]) -> str:
    """The readable report of a result (what ``--json`` writes)."""
    metrics, counts, images = result["metrics"], result["samples"], result["images"]
    built = images["swerex_build_s"]
    fastest = ", ".join(f"{m} {path}" for m, path in result["swerex_fastest"].items())
    return "\n".join(
        [
            f"command: {result['command']}",
            f"date: {result['date']}",
            f"machine: {result['machine']}",
            f"images: {images['base']} for every path; SWE-ReX's {images['swerex']} FROM it, "
            + (f"built in {built:.1f} s" if built is not None else "already built"),
            f"samples per path: cold start {counts['rounds']}, no-op {counts['actions']}, "
            f"each real step {counts['steps']}; paths interleaved, order reversed every other "
            "round",
            "",
            *figures_table(metrics),
            "",
            "real steps, p50 (the same argv on every path; the held shell forks and execs it):",
            *steps_table(metrics),
            "",
            f"ratios of p50s, ours / reference; below 1.00x ours is faster (swerex-fastest: "
            f"{fastest})",
            *ratios_table(result["ratios"]),
            "",
            "targets (issues 11 and 29), stated, not asserted:",
            *targets_lines(result["targets"]),
            "",
            "note: SWE-ReX's containers use the default bridge network and publish a port (its "
            "client speaks HTTP to swerex-remote);",
            "      ours and the floors run with network none, the docker substrate's default.",
        ]
    )


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--rounds", type=int, default=15, metavar="N", help="cold starts per path (default 15)")
    add("--actions", type=int, default=300, metavar="N", help="no-ops per path (default 300)")
    add("--steps", type=int, default=20, metavar="N", help="rounds of real steps (default 20)")
    add("--warmup", type=int, default=2, metavar="N", help="untimed action rounds (default 2)")
    add("--image", default=DEFAULT_IMAGE, help=f"the base image (default {DEFAULT_IMAGE})")
    add("--json", type=Path, metavar="PATH", help="also write the figures to PATH as JSON")
    args = parser.parse_args(argv)
    for name in ("rounds", "actions", "steps"):
        if getattr(args, name) < 2:
            parser.error(f"--{name.replace('_', '-')} must be at least 2")
    return args


def machine(client: docker.DockerClient, swerex_version: str) -> str:
    engine = client.version().get("Version", "?")
    return (
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}; dockerd {engine}; "
        f"docker SDK {docker.__version__}; swe-rex {swerex_version}; "
        f"python {platform.python_version()}"
    )


def run_benchmark(run: Run, args: argparse.Namespace) -> list[Figure]:
    """Every sample of the run: cold starts (after one untimed round), then actions."""
    figures = measure_cold_starts(run, args.rounds, warmup=1)
    figures += measure_actions(run, args.actions, args.steps, args.warmup)
    return figures


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM handler: unwind like Ctrl-C, so every container is removed."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ignore Ctrl-C while the containers are removed."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def close_run(run: Run) -> None:
    """Remove what the run left (nothing, unless it was interrupted) and close the clients."""
    with uninterrupted():
        if left := run.sweep():
            print(f"peers: removed {len(left)} leftover container(s)", file=sys.stderr)
        for substrate in run.substrates.values():
            substrate.close()
        run.loop.close()


def measure(client: docker.DockerClient, args: argparse.Namespace, version: str) -> list[Figure]:
    """Run the benchmark on this engine; every container it starts is gone when it returns."""
    session = f"peers-{new_id()}"
    substrates = {
        name: get_substrate("docker", transport=transport, session_id=session, image=args.image)
        for name, transport in zip(OURS, ("exec", "session"), strict=True)
    }
    run = Run(
        client, asyncio.new_event_loop(), args.image, swerex_tag(version), session, substrates
    )
    try:
        return run_benchmark(run, args)
    finally:
        close_run(run)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)
    client = docker.from_env()
    try:
        version = check_prerequisites(client, args.image)
        build_s = ensure_swerex_image(client, args.image, version)
        result: dict[str, Any] = {
            "command": shlex.join(["python", os.path.relpath(__file__), *argv]),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine(client, version),
            "images": {
                "base": args.image,
                "swerex": swerex_tag(version),
                "swerex_build_s": build_s,
            },
            "samples": {k: getattr(args, k) for k in ("rounds", "actions", "steps")},
            "paths": PATHS,
        }
        metrics = summarize(measure(client, args, version))
    except KeyboardInterrupt:
        print("peers: interrupted; every container it started is removed", file=sys.stderr)
        return 130
    finally:
        client.close()
    result |= {
        "metrics": metrics,
        "swerex_fastest": {m: swerex_fastest(metrics, m) for m in ("cold_start", "noop")},
        "ratios": ratios(metrics),
        "targets": targets(metrics),
    }
    print(report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
