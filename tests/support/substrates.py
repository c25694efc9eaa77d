"""Every substrate the contract suite runs on, each built from the tests' real components.

``local`` and ``docker`` are real; ``k8s``, ``e2b``, ``daytona``, ``modal``, ``runloop``,
``coreweave``, ``prime`` and ``ec2`` drive the official SDKs against the stand-ins of this
package (their timings are not the services'); the ``-live`` variants run against the real
services when their credentials are set.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_rollout_tax.core.substrate import Substrate

from . import live
from .ec2_moto import stand_in_options, substrate_opt_args, use_dummy_aws

#: Prints the pid of a session's shell from a step: the step helper serving the session
#: (``rtx-step``, exec'd in the shell's place), or the parent of the ``timeout`` wrapper where
#: the shell's relay runs the step.
SESSION_SHELL_PID = (
    'p=$$; while c=$(cat /proc/$p/comm); [ "$c" != rtx-step ] && [ "$c" != timeout ]; do '
    "p=$(cut -d' ' -f4 /proc/$p/stat); done; "
    'if [ "$c" = timeout ]; then cut -d\' \' -f4 /proc/$p/stat; else echo "$p"; fi'
)
#: The platform the ``-runsc`` variants run gVisor on: its default, as hosted providers run it.
GVISOR_PLATFORM = "systrap"
#: Every substrate x transport the stand-ins offer (E2B, Modal and CoreWeave have their SDK's
#: transport only: neither Modal nor CoreWeave's SDK offers a held shell that carries bytes),
#: docker under gVisor (``-runsc``) and k8s's agent-sandbox claims (``k8s-claim``) on both
#: transports.
STAND_INS = (
    "local",
    "local-session",
    "docker",
    "docker-session",
    "docker-runsc",
    "docker-runsc-session",
    "bwrap",
    "bwrap-session",
    "k8s",
    "k8s-session",
    "k8s-claim",
    "k8s-claim-session",
    "e2b",
    "daytona",
    "daytona-session",
    "modal",
    "runloop",
    "runloop-session",
    "coreweave",
    "ec2",
    "ec2-session",
    # prime's SDK is not in the [all] extra (scripts/ensure-prime): without it, not run here
    *(("prime",) if importlib.util.find_spec("prime_sandboxes") else ()),
)
LIVE: dict[str, Callable[[], Any]] = {
    "k8s-live": live.k8s_options,
    "e2b-live": live.e2b_options,
    "daytona-live": live.daytona_options,
    "modal-live": live.modal_options,
    "runloop-live": live.runloop_options,
    "coreweave-live": live.coreweave_options,
    "ec2-live": live.ec2_options,
    "prime-live": live.prime_options,
}


#: What gVisor (runsc 20240729, as scripts/ensure-docker installs it) does differently, found
#: by this suite: the cases that fail on its variants, by test function name (strict xfails: a
#: fixed runsc or a transport that works around it turns them into failures to remove from
#: here). Each is named in docs/substrates/isolation.md with the gVisor issue that tracks it.
EXEC_ONLY = "exec transport: "
RUNSC_GAPS = {
    # runsc starts the command in a cwd that is a regular file instead of failing
    "test_a_cwd_that_is_not_a_directory_is_exit_127_with_the_reason_on_stderr[a-file]": (
        f"{EXEC_ONLY}runsc runs a command whose cwd is a regular file"
    ),
    # gVisor's /tmp is its own tmpfs: the archive API writes the host's, which it never sees
    "test_absolute_paths_and_paths_leaving_the_workdir_are_allowed": (
        f"{EXEC_ONLY}gVisor's /tmp is its own tmpfs; the archive API writes the container's disk"
    ),
    # a FIFO made inside gVisor is not on the disk the archive API reads
    "test_reading_anything_but_a_regular_file_is_one_error_that_never_blocks[fifo]": (
        f"{EXEC_ONLY}a FIFO made inside gVisor is not on the disk docker's archive API reads"
    ),
}


#: What Daytona's toolbox API does differently, by test function name (strict xfails).
DAYTONA_GAPS = {
    # the stand-in runs each session command in a docker exec of its own, so there is no
    # held shell for a step to kill (the real service's session is one)
    "test_a_session_whose_shell_dies_fails_that_step_and_every_later_one_in_one_line": (
        "the daytona stand-in holds no shell per session: a step cannot kill it"
    ),
}


#: Daytona's gaps that only a fast machine hides: known failures, not run (carrying the flood
#: took the stand-in 20-70 s of a CI run's time, and the test failed all the same).
DAYTONA_SLOW = {
    # process.exec and session commands answer with the whole output in one JSON body once
    # the command has ended: a flood is buffered by the toolbox, and the call outlasts the
    # deadline by the time it takes to carry it (under the test's 1.5 s slack on a fast machine)
    "test_a_step_timeout_holds_while_its_output_floods": (
        "Daytona's toolbox returns a step's whole output in one body after it ends"
    ),
}


#: Runloop's gaps, by test function name and variant: known failures, not run (a flood's
#: output is carried whole after the step's deadline).
RUNLOOP_SLOW = {
    # a session's output comes back as server-sent text events the service relays: a flood
    # the helper cut at the deadline is still carried through the events after it
    ("test_a_step_timeout_holds_while_its_output_floods", "runloop-session"): (
        "Runloop's session output is relayed as server-sent events, behind a flood"
    ),
    # an execution's output is read once it has ended: a flood past the answer's last lines
    # comes through the event stream after the deadline (as Daytona's toolbox answers)
    ("test_a_step_timeout_holds_while_its_output_floods", "runloop"): (
        "Runloop answers an execution's output after it ends; a flood is streamed after it"
    ),
}


def runsc_gap(item: pytest.Item) -> None:
    """Mark ``item`` a strict xfail when it is a known gap of a runsc (or daytona) variant."""
    callspec = getattr(item, "callspec", None)
    params = [p for p in (callspec.params.values() if callspec else ()) if isinstance(p, str)]
    name = getattr(item, "originalname", "")
    daytona = any(p.split("-")[0] == "daytona" for p in params)
    if name in DAYTONA_GAPS and daytona:
        item.add_marker(pytest.mark.xfail(reason=DAYTONA_GAPS[name], strict=True))
        return
    if name in DAYTONA_SLOW and daytona:
        item.add_marker(pytest.mark.xfail(reason=DAYTONA_SLOW[name], run=False))
        return
    slow = next((RUNLOOP_SLOW[name, p] for p in params if (name, p) in RUNLOOP_SLOW), None)
    if slow is not None:
        # not run: the in-process stand-in keeps a whole flood (gigabytes) to stream it back
        item.add_marker(pytest.mark.xfail(reason=slow, run=False))
        return
    others = [p for p in params if "-runsc" not in p]
    reason = RUNSC_GAPS.get(name) or RUNSC_GAPS.get(f"{name}[{'-'.join(others)}]")
    exec_only = reason is not None and reason.startswith(EXEC_ONLY)
    if exec_only and any(p.endswith("-runsc-session") for p in params):
        return
    if reason and len(others) < len(params):
        item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


def transport_of(name: str) -> str:
    """The transport of a variant name: ``docker-runsc-session`` -> ``session``."""
    return "session" if "session" in name.split("-") else "exec"


def _split(name: str) -> tuple[str, dict[str, str]]:
    """A variant name as its kind and options: ``docker-runsc-session`` -> docker,
    runtime=runsc, transport=session."""
    kind, *parts = name.split("-")
    options = {}
    if "session" in parts:
        options["transport"] = "session"
    if "runsc" in parts:
        options |= {"runtime": "runsc", "platform": GVISOR_PLATFORM}
    if "claim" in parts:  # the built-in variant k8s-claim, with a warm pool of 1
        kind, options["warm_pool"] = "k8s-claim", "1"
    return kind, options


@dataclass(frozen=True)
class Selection:
    """A stand-in as a pytest run selects it: the substrate's name and the arguments."""

    name: str
    args: list[str]


@pytest.fixture(params=STAND_INS)
def selected_substrate(request: pytest.FixtureRequest) -> Selection:
    """One substrate x transport of :data:`STAND_INS`, as command-line arguments for a pytest
    run (``pytester``), its stand-in set up."""
    name, options = _split(request.param)
    args = [f"--substrate={name}"]
    args += [f"--substrate-opt={name}.{key}={value}" for key, value in options.items()]
    if name in ("docker", "bwrap"):
        request.getfixturevalue("bwrap_ready" if name == "bwrap" else "sandbox_image")
        if "runtime" in options:
            request.getfixturevalue("runsc_runtime")
    elif name == "k8s":
        kubeconfig = request.getfixturevalue("k8s_kubeconfig")
        args.append(f"--substrate-opt=k8s.kubeconfig={kubeconfig}")
    elif name == "k8s-claim":
        kubeconfig = request.getfixturevalue("claims_kubeconfig")
        args.append(f"--substrate-opt=k8s-claim.kubeconfig={kubeconfig}")
    elif name == "e2b":
        request.getfixturevalue("e2b_env")
    elif name == "daytona":
        request.getfixturevalue("daytona_env")
    elif name == "modal":
        request.getfixturevalue("modal_env")
    elif name == "runloop":
        request.getfixturevalue("runloop_env")
    elif name == "coreweave":
        request.getfixturevalue("coreweave_env")
    elif name == "prime":
        request.getfixturevalue("prime_env")
    elif name == "ec2":
        args += substrate_opt_args(request.getfixturevalue("ec2_opts"))
    return Selection(name, args)


def live_skip_reason(name: str) -> str | None:
    """Why live variant ``name`` cannot run here, or None when its credentials are set."""
    found = LIVE[name]()
    return found if isinstance(found, str) else None


@contextlib.contextmanager
def open_substrate(name: str, request: pytest.FixtureRequest) -> Iterator[Substrate]:
    """Substrate ``name`` (a stand-in or a live variant), reaped and closed afterwards."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        substrate = _build(name, request, monkeypatch)
        try:
            yield substrate
        finally:
            with contextlib.suppress(Exception):
                substrate.reap(substrate.session_id)
            substrate.close()


def _build(name: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Substrate:
    """``name`` is KIND, KIND-session, KIND-live or k8s-claim[-session]."""
    fixture = request.getfixturevalue
    if name.startswith("k8s-claim"):
        from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate

        session = {"transport": "session"} if transport_of(name) == "session" else {}
        kubeconfig = str(fixture("claims_kubeconfig"))
        return KubernetesSubstrate(
            "k8s-claim", kubeconfig=kubeconfig, api="claim", warm_pool=1, **session
        )
    name, _, variant = name.partition("-")
    if variant == "live":
        name = f"{name}-live"
    session = {"transport": "session"} if transport_of(variant) == "session" else {}
    if name == "local":
        from pytest_rollout_tax.substrates.local import LocalSubstrate

        return LocalSubstrate(root=str(fixture("tmp_path_factory").mktemp("local")), **session)
    if name == "docker":
        from pytest_rollout_tax.substrates.docker import DockerSubstrate

        runtime = {}
        if "runsc" in variant:
            runtime = {"runtime": fixture("runsc_runtime"), "platform": GVISOR_PLATFORM}
        return DockerSubstrate(image=fixture("sandbox_image"), **session, **runtime)
    if name == "bwrap":
        from pytest_rollout_tax.substrates.bwrap import BwrapSubstrate

        return BwrapSubstrate(image=fixture("bwrap_ready"), **session)
    if name in ("k8s", "k8s-live"):
        from pytest_rollout_tax.substrates.kubernetes import KubernetesSubstrate

        if name == "k8s":
            return KubernetesSubstrate(kubeconfig=str(fixture("k8s_kubeconfig")), **session)
        return KubernetesSubstrate(**live.k8s_options())
    if name in ("e2b", "e2b-live"):
        from pytest_rollout_tax.substrates.e2b import E2BSubstrate

        if name == "e2b-live":
            return E2BSubstrate(**live.e2b_options())
        for variable in ("E2B_DEBUG", "E2B_DOMAIN", "E2B_ACCESS_TOKEN"):
            monkeypatch.delenv(variable, raising=False)
        for variable, value in fixture("e2b_server").env().items():
            monkeypatch.setenv(variable, value)
        # a contract module shares one sandbox: on a loaded machine it outlives the default
        # 300 s lifetime, which the stand-in enforces as E2B does
        return E2BSubstrate(timeout=3600)
    if name in ("daytona", "daytona-live"):
        from pytest_rollout_tax.substrates.daytona import DaytonaSubstrate

        if name == "daytona-live":
            return DaytonaSubstrate(**live.daytona_options())
        for variable in ("DAYTONA_TARGET", "DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID"):
            monkeypatch.delenv(variable, raising=False)
        for variable, value in fixture("daytona_server").env().items():
            monkeypatch.setenv(variable, value)
        return DaytonaSubstrate(**session)

    if name in ("modal", "modal-live"):
        from pytest_rollout_tax.substrates.modal import ModalSubstrate

        if name == "modal-live":
            return ModalSubstrate(**live.modal_options())
        for variable in ("MODAL_PROFILE", "MODAL_ENVIRONMENT", "MODAL_CONFIG_PATH"):
            monkeypatch.delenv(variable, raising=False)
        for variable, value in fixture("modal_server").env().items():
            monkeypatch.setenv(variable, value)
        return ModalSubstrate()
    if name in ("runloop", "runloop-live"):
        from pytest_rollout_tax.substrates.runloop import RunloopSubstrate

        if name == "runloop-live":
            return RunloopSubstrate(**live.runloop_options())
        monkeypatch.delenv("RUNLOOP_CUSTOM_HEADERS", raising=False)
        for variable, value in fixture("runloop_server").env().items():
            monkeypatch.setenv(variable, value)
        return RunloopSubstrate(**session)
    if name in ("coreweave", "coreweave-live"):
        from pytest_rollout_tax.substrates.coreweave import CoreWeaveSubstrate

        if name == "coreweave-live":
            return CoreWeaveSubstrate(**live.coreweave_options())
        for variable, value in fixture("coreweave_server").env().items():
            monkeypatch.setenv(variable, value)
        return CoreWeaveSubstrate()
    if name in ("prime", "prime-live"):
        from pytest_rollout_tax.substrates.prime import PrimeSubstrate

        if name == "prime-live":
            return PrimeSubstrate(**live.prime_options())
        for variable in ("PRIME_CONTEXT", "PRIME_TEAM_ID", "PRIME_USER_ID", "PRIME_BASE_URL"):
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setenv("HOME", str(fixture("tmp_path_factory").mktemp("prime-home")))
        for variable, value in fixture("prime_server").env().items():
            monkeypatch.setenv(variable, value)
        return PrimeSubstrate(poll_interval=0.05)
    if name in ("ec2", "ec2-live"):
        from pytest_rollout_tax.substrates.ec2 import EC2Substrate

        if name == "ec2-live":
            return EC2Substrate(**live.ec2_options(), tags={"purpose": "rollout-tax-live-test"})
        use_dummy_aws(monkeypatch, fixture("tmp_path_factory").mktemp("aws"))
        world, target = fixture("ec2_world"), fixture("sshd_target")
        return EC2Substrate(**stand_in_options(fixture("ec2_proxy"), world, target), **session)
    raise ValueError(f"no test substrate named {name!r}")
