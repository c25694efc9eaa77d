"""The ``k8s`` substrate against the local stand-in API server (tests/support/k8s_api.py).

What every substrate does (exec, files, timeouts) is proved by tests/contract/, on the stand-in
and live. :class:`KubernetesContract` holds what is particular to Kubernetes and must be true on
any cluster (phases, the pod spec, labels, options, reaping); test_kubernetes_live.py runs it
against a real one when KUBECONFIG is set. Everything else here needs the stand-in: its fault
injection, its extra users and its docker containers.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from support.k8s_api import CONTEXT, POD_LABEL, SIMULATE_KEY, V4, KubeAPIStandIn
from support.substrates import SESSION_SHELL_PID

from pytest_rollout_tax.core.record import Rollout
from pytest_rollout_tax.core.sandbox import Sandbox
from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL
from pytest_rollout_tax.core.transport import NOOP
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.kubernetes import (
    KubernetesSubstrate,
    PodExec,
    PodHandle,
    events,
    exec_ws,
    go_duration_seconds,
    toleration,
)

PHASES = ["created", "scheduled", "initialized", "containers_ready", "ready", "first_exec"]
#: With the session transport, the shell is opened between Ready and the first no-op.
SESSION_PHASES = [*PHASES[:-1], "session", "first_exec"]
#: The stand-in's count of exec websockets (one per connection, whatever it carries).
EXECS = "GET /api/v1/namespaces/{namespace}/pods/{name}/exec"


def pod_exists(core: k8s_client.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except k8s_client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def session_pods(core: k8s_client.CoreV1Api, substrate: KubernetesSubstrate) -> list[str]:
    selector = f"{SESSION_LABEL}={substrate.session_id}"
    pods = core.list_namespaced_pod(substrate.namespace, label_selector=selector).items
    return [p.metadata.name for p in pods]


class KubernetesContract:
    """What is particular to k8s and holds on any cluster (the generic contract is
    tests/contract/'s). A subclass provides a class-scoped ``k8s_options`` fixture."""

    @pytest.fixture(scope="class")
    @classmethod
    def k8s(cls, k8s_options: dict[str, Any]) -> Iterator[KubernetesSubstrate]:
        substrate = KubernetesSubstrate(**k8s_options)
        yield substrate
        substrate.reap(substrate.session_id)
        substrate.close()

    @pytest.fixture(scope="class")
    @classmethod
    def pod(cls, k8s: KubernetesSubstrate) -> Iterator[Sandbox]:
        """One sandbox shared by the tests that only look at it or run commands in it."""
        with k8s.start() as sandbox:
            yield sandbox

    @pytest.fixture(scope="class")
    @classmethod
    def core(cls, k8s_options: dict[str, Any]) -> Iterator[k8s_client.CoreV1Api]:
        """The official typed client on the same cluster, to look at what the substrate made."""
        api = k8s_config.new_client_from_config(
            config_file=k8s_options.get("kubeconfig") or os.environ.get("KUBECONFIG"),
            context=k8s_options.get("context"),
        )
        yield k8s_client.CoreV1Api(api)
        api.close()

    # -- cold start and teardown -----------------------------------------------------------

    def test_cold_start_phases_in_order_and_teardown_waits_until_gone(self, k8s, core):
        with k8s.start() as sandbox:
            rollout = sandbox.rollout
            # The image pull time is looked up once the cold start is measured, not counted in it.
            assert list(rollout.phases) == [*PHASES, "image_pull"]
            assert rollout.phases["image_pull"] >= 0
            cold = sum(rollout.phases[phase] for phase in PHASES)
            assert rollout.cold_start_s == pytest.approx(cold)
            assert pod_exists(core, sandbox.id, k8s.namespace)
        assert not pod_exists(core, sandbox.id, k8s.namespace)
        assert rollout.teardown_s is not None and rollout.teardown_s > 0
        assert rollout.trajectory_s >= rollout.cold_start_s + rollout.teardown_s

    def test_pod_is_hardened_and_labelled(self, k8s, core, pod):
        spec = core.read_namespaced_pod(pod.id, k8s.namespace)
        assert spec.spec.automount_service_account_token is False
        assert spec.spec.restart_policy == "Never"
        assert spec.spec.termination_grace_period_seconds == 0
        container = spec.spec.containers[0]
        assert container.security_context.allow_privilege_escalation is False
        assert container.security_context.capabilities.drop == ["ALL"]
        assert spec.metadata.labels[SESSION_LABEL] == k8s.session_id
        assert pod.id == f"rollout-tax-{spec.metadata.labels[ROLLOUT_LABEL]}"
        status = pod.exec("grep -E '^(CapEff|NoNewPrivs):' /proc/self/status").stdout.split()
        assert status == ["CapEff:", "0000000000000000", "NoNewPrivs:", "1"]

    def test_the_session_transport_opens_its_shell_as_a_phase_of_the_cold_start(self, k8s_options):
        session = KubernetesSubstrate(**k8s_options, transport="session")
        try:
            with session.start() as sandbox:
                result = sandbox.exec("echo out; echo err >&2; exit 3")
                assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
        finally:
            session.close()
        rollout = sandbox.rollout
        assert (rollout.kind, rollout.transport) == ("k8s", "session")
        assert list(rollout.phases) == [*SESSION_PHASES, "image_pull"]
        assert rollout.cold_start_s == pytest.approx(sum(rollout.phases[p] for p in SESSION_PHASES))

    # -- timeouts --------------------------------------------------------------------------

    def test_a_timeout_is_one_reason_that_never_shows_the_command(self, pod):
        # The message names no command (it may carry a secret): one reason for every such step.
        with pytest.raises(StepTimeout, match=r"^k8s: step ran past its 1 s timeout; killed$"):
            pod.exec("sleep 3600 & sleep 3601; echo never # secret-token", timeout=1)
        assert pod.rollout.steps[-1].exit_code is None

    # -- options, reaping, concurrency -----------------------------------------------------

    def test_options_appear_in_the_pod(self, k8s_options, core):
        substrate = KubernetesSubstrate(
            **k8s_options,
            cpu="100m",
            memory="64Mi",
            labels={"team": "rl", "tier": "bench"},
            annotations={"example.com/note": "hello"},
            workdir="/tmp/work",
            image_pull_policy="IfNotPresent",
            ready_timeout=120,
        )
        try:
            with substrate.start() as sandbox:
                spec = core.read_namespaced_pod(sandbox.id, substrate.namespace)
                assert sandbox.exec("pwd").stdout == "/tmp/work\n"
        finally:
            substrate.close()
        container = spec.spec.containers[0]
        assert container.resources.requests == {"cpu": "100m", "memory": "64Mi"}
        assert container.resources.limits == {"cpu": "100m", "memory": "64Mi"}
        assert container.working_dir == "/tmp/work"
        assert container.image_pull_policy == "IfNotPresent"
        assert {"team": "rl", "tier": "bench"}.items() <= spec.metadata.labels.items()
        assert spec.metadata.annotations["example.com/note"] == "hello"
        assert spec.metadata.labels[SESSION_LABEL] == substrate.session_id

    def test_reap_removes_the_pods_of_one_session(self, k8s_options, k8s, core, pod):
        crashed = KubernetesSubstrate(**k8s_options)
        try:
            abandoned = crashed.start()  # never closed: what a killed run leaves behind
            assert session_pods(core, crashed) == [abandoned.id]
            assert crashed.reap(crashed.session_id) == 1
            assert session_pods(core, crashed) == []
            assert not pod_exists(core, abandoned.id, crashed.namespace)
            assert pod_exists(core, pod.id, k8s.namespace)  # another session's pod stays
            assert crashed.reap(crashed.session_id) == 0
            with pytest.raises(SandboxError, match=r"^k8s: pods/exec '.*' not found .*\(404\)"):
                abandoned.exec("true")
            abandoned.close()  # closing a reaped sandbox is harmless
        finally:
            crashed.close()

    def test_concurrent_starts_on_one_substrate(self, k8s, core):
        sandboxes: list[Sandbox] = []
        errors: list[BaseException] = []

        def start() -> None:
            try:
                sandboxes.append(k8s.start())
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            assert not errors
            assert len({s.id for s in sandboxes}) == 4
            for sandbox in sandboxes:
                assert sandbox.exec(["cat", "/etc/hostname"]).exit_code == 0
        finally:
            for sandbox in sandboxes:
                sandbox.close()
        assert not {s.id for s in sandboxes} & set(session_pods(core, k8s))


# -- the contract against the stand-in ---------------------------------------------------------


class TestStandIn(KubernetesContract):
    @pytest.fixture(scope="class")
    @classmethod
    def k8s_options(cls, k8s_kubeconfig: Path) -> dict[str, Any]:
        return {"kubeconfig": str(k8s_kubeconfig)}

    def test_v4_subprotocol(self, k8s_api: KubeAPIStandIn, pod):
        k8s_api.exec_protocols = (V4,)
        try:
            result = pod.exec("echo v4; echo e >&2; exit 5")
            assert (result.exit_code, result.stdout, result.stderr) == (5, "v4\n", "e\n")
            pod.write_file("v4.bin", bytes(range(256)))  # no stdin close in v4: head -c N ends it
            assert pod.read_file("v4.bin", binary=True) == bytes(range(256))
        finally:
            k8s_api.exec_protocols = ("v5.channel.k8s.io", V4)

    def test_a_session_over_v4(self, k8s_api: KubeAPIStandIn, session):
        k8s_api.exec_protocols = (V4,)  # no stdin close: the shell ends with its websocket
        try:
            with session.start() as sandbox:
                result = sandbox.exec("echo v4; echo e >&2; exit 5")
                assert (result.exit_code, result.stdout, result.stderr) == (5, "v4\n", "e\n")
                sandbox.write_file("v4.bin", bytes(range(256)))
                assert sandbox.read_file("v4.bin", binary=True) == bytes(range(256))
        finally:
            k8s_api.exec_protocols = ("v5.channel.k8s.io", V4)

    @pytest.fixture
    def session(self, k8s_options: dict[str, Any]) -> Iterator[KubernetesSubstrate]:
        substrate = KubernetesSubstrate(**k8s_options, transport="session")
        yield substrate
        substrate.reap(substrate.session_id)
        substrate.close()

    def test_a_session_is_one_exec_websocket_for_every_step(self, k8s_api, k8s, session):
        before = k8s_api.requests[EXECS]
        with session.start() as sandbox:
            opened = k8s_api.requests[EXECS]
            sandbox.probe(5)
            for i in range(5):
                sandbox.write_file(f"d/f{i}", bytes([i]) * 1000)
                assert sandbox.read_file(f"d/f{i}", binary=True) == bytes([i]) * 1000
                assert sandbox.exec("echo $I", cwd="d", env={"I": str(i)}).stdout == f"{i}\n"
            with pytest.raises(
                StepTimeout, match=r"^k8s: step ran past its 0.5 s timeout; killed$"
            ):
                sandbox.exec("sleep 60", timeout=0.5)
            assert sandbox.exec("echo alive").stdout == "alive\n"
            after = k8s_api.requests[EXECS]
        assert (opened - before, after - opened) == (1, 0)
        with k8s.start() as sandbox:  # the exec transport: one websocket per step
            opened = k8s_api.requests[EXECS]
            sandbox.probe(5)
            assert k8s_api.requests[EXECS] - opened == 5

    def test_a_session_whose_shell_dies_fails_the_next_step_in_one_line(
        self, docker_client, session
    ):
        with session.start() as sandbox:
            shell = sandbox.exec(SESSION_SHELL_PID).stdout.strip()
            (container,) = docker_client.containers.list(
                filters={"label": f"{POD_LABEL}=default/{sandbox.id}"}
            )
            assert container.exec_run(["kill", "-KILL", shell]).exit_code == 0
            with pytest.raises(SandboxError, match=r"^k8s: session lost: the shell ended$"):
                within(30, lambda: sandbox.exec("true"))
            with pytest.raises(SandboxError, match=r"^k8s: the session is closed$"):
                within(30, lambda: sandbox.read_file("f"))

    def test_a_session_the_api_server_drops_fails_the_next_step_in_one_line(
        self, k8s_api, core, session
    ):
        with session.start() as sandbox:
            assert sandbox.exec("echo up").stdout == "up\n"
            assert k8s_api.drop_execs(sandbox.id) == 1
            with pytest.raises(SandboxError, match=r"^k8s: session lost: the shell ended$"):
                within(30, lambda: sandbox.write_file("f", "x"))
        assert not pod_exists(core, sandbox.id, session.namespace)

    def test_the_container_is_isolated(self, docker_client, pod):
        (container,) = docker_client.containers.list(
            filters={"label": f"{POD_LABEL}=default/{pod.id}"}
        )
        host = container.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert pod.exec("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '").stdout == "lo\n"

    def test_cold_start_survives_an_expired_watch(self, k8s_api, k8s):
        k8s_api.expire_watches = 1  # the readiness watch gets 410 Gone: read, then watch again
        with k8s.start() as sandbox:
            assert k8s_api.expire_watches == 0
            assert list(sandbox.rollout.phases) == [*PHASES, "image_pull"]

    def test_teardown_survives_an_expired_watch(self, k8s_api, k8s, core):
        sandbox = k8s.start()
        k8s_api.compact()  # the version teardown watches from is now too old: 410 Gone
        sandbox.close()
        assert not pod_exists(core, sandbox.id, k8s.namespace)
        assert sandbox.rollout.teardown_s is not None


def substrate(kubeconfig: Path, **options: Any) -> KubernetesSubstrate:
    return KubernetesSubstrate(kubeconfig=str(kubeconfig), **options)


def all_tokens(server: KubeAPIStandIn) -> list[str]:
    config = yaml.safe_load(server.kubeconfig_path.read_text())
    return [u["user"]["token"] for u in config["users"]]


def assert_one_clear_line(message: str, server: KubeAPIStandIn) -> None:
    assert "\n" not in message and "Traceback" not in message
    for token in all_tokens(server):
        assert token not in message


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` in a thread; fail, rather than hang the run, if it runs past ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.fixture
def exec_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands the ``exec`` transport runs from now on, in order (through the module seam
    ``exec_ws.run``)."""
    commands: list[list[str]] = []
    real = exec_ws.run

    def run(api: Any, pod: str, container: str, command: list[str], **kwargs: Any) -> Any:
        commands.append(command)
        return real(api, pod, container, command, **kwargs)

    monkeypatch.setattr(exec_ws, "run", run)
    return commands


# -- error paths -------------------------------------------------------------------------------


def test_unreachable_api_server_names_url_and_context(k8s_api, k8s_kubeconfig):
    with pytest.raises(SubstrateUnavailable) as info:
        substrate(k8s_kubeconfig, context=f"{CONTEXT}-unreachable")
    message = str(info.value)
    config = yaml.safe_load(k8s_kubeconfig.read_text())
    url = next(
        c["cluster"]["server"] for c in config["clusters"] if c["name"].endswith("unreachable")
    )
    assert message.startswith(f"k8s: API server {url} unreachable")
    assert f"kubeconfig context '{CONTEXT}-unreachable'" in message
    assert "Connection refused" in message
    assert_one_clear_line(message, k8s_api)


def test_wrong_token_is_unauthorized(k8s_api, k8s_kubeconfig):
    with pytest.raises(SubstrateUnavailable) as info:
        substrate(k8s_kubeconfig, context=f"{CONTEXT}-bad-token")
    message = str(info.value)
    assert "unauthorized" in message and "(401 Unauthorized)" in message
    assert f"context '{CONTEXT}-bad-token'" in message and "list pods" in message
    assert_one_clear_line(message, k8s_api)


def test_forbidden_create_names_verb_and_resource(k8s_api, k8s_kubeconfig):
    readonly = substrate(k8s_kubeconfig, context=f"{CONTEXT}-readonly")
    try:
        with pytest.raises(SandboxStartError) as info:
            readonly.start()
    finally:
        readonly.close()
    message = str(info.value)
    assert message.startswith("k8s: forbidden: the API server refused to create pods")
    assert "(403 Forbidden)" in message and 'User "readonly" cannot create' in message
    assert_one_clear_line(message, k8s_api)


def test_forbidden_exec_names_verb_and_resource_and_deletes_the_pod(k8s_api, k8s_kubeconfig):
    no_exec = substrate(k8s_kubeconfig, context=f"{CONTEXT}-no-exec")
    admin = substrate(k8s_kubeconfig)
    try:
        with pytest.raises(RolloutTaxError) as info:
            no_exec.start()
        assert admin.reap(no_exec.session_id) == 0  # the pod was deleted
    finally:
        no_exec.close()
        admin.close()
    message = str(info.value)
    assert "forbidden: the API server refused to create pods/exec 'rollout-tax-" in message
    assert_one_clear_line(message, k8s_api)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"annotations": {SIMULATE_KEY: "unschedulable"}}, "1 Insufficient cpu"),
        ({"cpu": "64"}, "1 Insufficient cpu"),
        (
            {"node_selector": {"disktype": "ssd"}},
            "1 node(s) didn't match Pod's node affinity/selector",
        ),
    ],
    ids=["simulated", "too-much-cpu", "node-selector"],
)
def test_pending_pod_reports_the_scheduler_reason_and_is_deleted(
    k8s_api, k8s_kubeconfig, options, reason
):
    pending = substrate(k8s_kubeconfig, ready_timeout=0.5, **options)
    try:
        with pytest.raises(SandboxStartError) as info:
            pending.start()
        assert pending.reap(pending.session_id) == 0
    finally:
        pending.close()
    message = str(info.value)
    assert "not ready after 0.5 s (k8s.ready_timeout): still Pending, not scheduled: " in message
    assert "Unschedulable: 0/1 nodes are available: " + reason in message
    assert "last events: [Warning] FailedScheduling: 0/1 nodes are available" in message
    assert message.endswith("; the pod was deleted")
    assert_one_clear_line(message, k8s_api)


@pytest.mark.parametrize(
    ("options", "reason", "image"),
    [
        ({"labels": {SIMULATE_KEY: "image-pull-failure"}}, "ErrImagePull", None),
        ({"image": "rollout-tax/no-such-image:1"}, "ErrImagePull", "rollout-tax/no-such-image:1"),
        ({"image": "rollout-tax/no-such-image:1", "image_pull_policy": "Never"},
         "ErrImageNeverPull", "rollout-tax/no-such-image:1"),
    ],
    ids=["simulated", "missing-image", "never-pull"],
)  # fmt: skip
def test_image_pull_failure_is_named_with_the_image(
    k8s_api, k8s_kubeconfig, sandbox_image, options, reason, image
):
    # A long ready_timeout: the failure must be reported as soon as the kubelet reports it.
    failing = substrate(k8s_kubeconfig, ready_timeout=300, **options)
    try:
        with pytest.raises(SandboxStartError) as info:
            failing.start()
        assert failing.reap(failing.session_id) == 0
    finally:
        failing.close()
    message = str(info.value)
    assert f"k8s: image pull failed ({reason}) for image '{image or sandbox_image}'" in message
    assert message.endswith("; the pod was deleted")
    assert_one_clear_line(message, k8s_api)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"namespace": "no-such-namespace"},
         "k8s: namespace 'no-such-namespace' not found (when asked to create pods)"),
        ({"runtime_class": "gvisor"}, 'pod rejected: RuntimeClass "gvisor" not found'),
        ({"cpu": "lots"}, "create pods in namespace 'default': 422 Invalid: Pod \"rollout-tax-"),
    ],
    ids=["namespace", "runtime-class", "invalid-quantity"],
)  # fmt: skip
def test_refused_pods(k8s_api, k8s_kubeconfig, options, expected):
    refused = substrate(k8s_kubeconfig, **options)
    try:
        with pytest.raises(SandboxStartError, match=r"^k8s: ") as info:
            refused.start()
    finally:
        refused.close()
    assert expected in str(info.value)
    assert_one_clear_line(str(info.value), k8s_api)


def test_a_lost_create_response_deletes_the_pod(k8s_api, k8s_kubeconfig):
    # The pod is created but the connection is reset before the answer: its name is known.
    lost = substrate(k8s_kubeconfig, labels={SIMULATE_KEY: "lost-create-response"})
    try:
        with pytest.raises(SandboxStartError) as info:
            lost.start()
        assert lost.reap(lost.session_id) == 0  # the pod was deleted
    finally:
        lost.close()
    message = str(info.value)
    assert message.startswith(f"k8s: API server {k8s_api.url} unreachable")
    assert message.endswith("; the pod was deleted")
    assert_one_clear_line(message, k8s_api)


def test_a_refused_teardown_is_one_sandbox_error(k8s_api, k8s_kubeconfig):
    admin = substrate(k8s_kubeconfig)
    readonly = substrate(k8s_kubeconfig, context=f"{CONTEXT}-readonly", session_id=admin.session_id)
    try:
        sandbox = admin.start()
        with pytest.raises(SandboxError) as info:
            readonly.reap(admin.session_id)
        sandbox.close()
    finally:
        readonly.close()
        admin.close()
    message = str(info.value)
    assert message.startswith(
        f"k8s: forbidden: the API server refused to delete pods '{sandbox.id}' in namespace "
        "'default' (403 Forbidden): "
    )
    assert_one_clear_line(message, k8s_api)


@pytest.mark.parametrize(
    "status",
    [
        b'{"status": "Failure", "reason": "NonZeroExitCode", '
        b'"details": {"causes": [{"reason": "ExitCode", "message": "not a number"}]}}',
        b'{"status": "Failure", "reason": "NonZeroExitCode", '
        b'"details": {"causes": [{"reason": "ExitCode", "message": null}]}}',
        b"[0]",
        b"{not json",
    ],
    ids=["text", "null", "not-an-object", "not-json"],
)
def test_an_unreadable_exit_status_is_a_sandbox_error(k8s_kubeconfig, status):
    with pytest.raises(SandboxError, match=r"^k8s: exec in pod p: unreadable exit status$"):
        exec_ws.exit_code("p", status, b"", b"", scrub=str)


# -- deadlines -----------------------------------------------------------------------------------


def test_the_exec_handshake_is_bounded(k8s_kubeconfig, monkeypatch):
    # An API server that accepts the connection and never answers the websocket upgrade.
    silent = socket.create_server(("127.0.0.1", 0))
    url = f"ws://127.0.0.1:{silent.getsockname()[1]}/exec"
    monkeypatch.setattr(exec_ws.ws_client, "get_websocket_url", lambda *_: url)
    k8s = substrate(k8s_kubeconfig)
    k8s.api.timeout = (0.5, 0.5)
    handle = PodHandle(id="p", workdir="/workspace", container="sandbox", resource_version="")
    transport = PodExec(k8s.api, handle, substrate="k8s", grace=0.2)
    sandbox = Sandbox(
        substrate=k8s, handle=handle, transport=transport, rollout=Rollout(substrate="k8s")
    )
    try:
        with pytest.raises(SandboxError, match=r"unreachable .*: no answer \(timed out\)$"):
            within(30, lambda: sandbox.exec("true"))  # no step timeout: the API's connect timeout
        with pytest.raises(
            StepTimeout,
            match=r"^k8s: step ran past its 0.1 s timeout; 0.2 s later its exit status had not "
            r"arrived$",
        ):
            within(30, lambda: sandbox.exec("true", timeout=0.1))  # the step's deadline
    finally:
        silent.close()
        k8s.close()
    assert [step.exit_code for step in sandbox.rollout.steps] == [None, None]


def test_file_steps_have_a_deadline(k8s_kubeconfig):
    fifos = substrate(k8s_kubeconfig)
    try:
        with fifos.start() as sandbox:
            sandbox.exec("mkfifo to-write")
            fifos.api.timeout = (10.0, 0.5)
            # head -c 1 > to-write waits for a reader: no data within the API's read timeout
            no_data = r"^k8s: a file step got no data for 0.5 s; its stream was closed$"
            with pytest.raises(SandboxError, match=no_data):
                within(30, lambda: sandbox.write_file("to-write", "x"))
            fifos.api.timeout = (10.0, 60.0)
            assert [s.kind for s in sandbox.rollout.steps[-1:]] == ["write_file"]
            assert sandbox.exec("echo alive").stdout == "alive\n"
        with fifos.start(timeout=0.5) as sandbox:  # a step timeout bounds file steps too
            sandbox.exec("mkfifo to-write")
            past = r"^k8s: step ran past its 0.5 s timeout; it may still be running$"
            with pytest.raises(StepTimeout, match=past):
                within(30, lambda: sandbox.write_file("to-write", "x"))
            assert sandbox.exec("echo alive").stdout == "alive\n"
    finally:
        fifos.close()


def test_the_no_op_is_wrapped_in_timeout_as_every_step(k8s_kubeconfig, exec_commands):
    # Like docker: the action tax is what carrying a step costs, the in-pod `timeout` wrapper
    # included (issue 29).
    timed = substrate(k8s_kubeconfig)
    try:
        with timed.start(timeout=30) as sandbox:
            sandbox.probe(2)
            assert sandbox.exec(["echo", "hi"]).stdout == "hi\n"
    finally:
        timed.close()
    wrapped = ["timeout", "-s", "KILL", "30.000"]
    ready = ["timeout", "-s", "KILL", "300.000"]  # the first no-op: k8s.ready_timeout, no step's
    assert exec_commands[:3] == [[*ready, *NOOP]] + [[*wrapped, *NOOP]] * 2  # first exec, probes
    assert exec_commands[3] == [*wrapped, "echo", "hi"]


# -- configuration -----------------------------------------------------------------------------


def test_no_kubeconfig_at_all_is_missing_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CredentialsMissing, match=r"no kubeconfig .* set KUBECONFIG"):
        KubernetesSubstrate()


def test_kubeconfig_from_the_environment(monkeypatch, k8s_kubeconfig, tmp_path):
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/absent:{k8s_kubeconfig}")
    from_env = KubernetesSubstrate(context=f"{CONTEXT}-readonly", namespace="rollout-tax")
    from_env.close()
    assert (from_env.context, from_env.namespace) == (f"{CONTEXT}-readonly", "rollout-tax")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/absent")
    with pytest.raises(ConfigError, match="absent does not exist"):
        KubernetesSubstrate()


def test_unknown_context_lists_the_contexts(k8s_kubeconfig):
    with pytest.raises(ConfigError, match=rf"no context 'nope' \(contexts: {CONTEXT}, {CONTEXT}-"):
        substrate(k8s_kubeconfig, context="nope")


def test_broken_kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nclusters: [\n")
    with pytest.raises(ConfigError, match=f"k8s: kubeconfig {path}: "):
        substrate(path)


def test_options_from_strings(k8s_kubeconfig):
    parsed = substrate(
        k8s_kubeconfig,
        tolerations="gpu=true:NoSchedule,spot:NoExecute,dedicated",
        labels="a=b,c=d",
        node_selector='{"kubernetes.io/os": "linux"}',
        ready_timeout="12.5",
    )
    parsed.close()
    spec = parsed.pod_manifest("x", {})["spec"]
    assert spec["tolerations"] == [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
        {"key": "dedicated", "operator": "Exists"},
    ]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert parsed.options.ready_timeout == 12.5
    assert toleration({"key": "k", "operator": "Exists", "tolerationSeconds": "30"}) == {
        "key": "k", "operator": "Exists", "tolerationSeconds": 30,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="toleration 'a=b:Sometimes': expected key"):
        substrate(k8s_kubeconfig, tolerations="a=b:Sometimes")
    with pytest.raises(ConfigError, match="workdir='relative': must be an absolute path"):
        substrate(k8s_kubeconfig, workdir="relative")


def test_pod_template_fills_what_options_do_not_cover(k8s_api, k8s_kubeconfig, tmp_path, core_api):
    template = tmp_path / "pod.yaml"
    template.write_text(
        yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "ignored", "labels": {"from": "template", SESSION_LABEL: "x"},
                         "annotations": {"note": "template"}},
            "spec": {
                "activeDeadlineSeconds": 3600,
                "containers": [{"name": "sandbox", "image": "overridden-by-option",
                                "env": [{"name": "FROM_TEMPLATE", "value": "yes"}]}],
            },
        })
    )  # fmt: skip
    templated = substrate(
        k8s_kubeconfig, pod_template=str(template), image="rollout-tax/sandbox:bookworm",
        runtime_class="runc", service_account="default",
        node_selector={"kubernetes.io/os": "linux"}, tolerations=["dedicated=rl:NoSchedule"],
    )  # fmt: skip
    try:
        with templated.start() as sandbox:
            pod = core_api.read_namespaced_pod(sandbox.id, "default")
            assert sandbox.exec("echo $FROM_TEMPLATE").stdout == "yes\n"
    finally:
        templated.close()
    assert pod.metadata.name == sandbox.id
    assert pod.metadata.labels["from"] == "template"
    assert pod.metadata.labels[SESSION_LABEL] == templated.session_id
    assert pod.metadata.annotations["note"] == "template"
    assert pod.spec.active_deadline_seconds == 3600
    assert pod.spec.runtime_class_name == "runc"
    assert pod.spec.service_account_name == "default"
    assert pod.spec.node_selector == {"kubernetes.io/os": "linux"}
    assert ("dedicated", "Equal", "rl", "NoSchedule") in [
        (t.key, t.operator, t.value, t.effect) for t in pod.spec.tolerations
    ]
    container = pod.spec.containers[0]
    assert container.image == "rollout-tax/sandbox:bookworm"
    assert container.security_context.capabilities.drop == ["ALL"]  # defaults stay under it
    assert container.command == ["sleep", "infinity"]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("- a list\n", "expected a Pod manifest"),
        ("kind: Deployment\n", "expected kind Pod, got 'Deployment'"),
        ("spec: {containers: {a: 1}}\n", "spec.containers must be a list of mappings"),
        ("spec: [\n", "not valid YAML"),
    ],
)
def test_bad_pod_template(k8s_kubeconfig, tmp_path, content, error):
    template = tmp_path / "pod.yaml"
    template.write_text(content)
    with pytest.raises(ConfigError, match=f"k8s.pod_template={template}: {error}"):
        substrate(k8s_kubeconfig, pod_template=str(template))
    with pytest.raises(ConfigError, match="No such file"):
        substrate(k8s_kubeconfig, pod_template=str(tmp_path / "absent.yaml"))


def test_a_bare_pod_spec_is_a_template(k8s_kubeconfig, tmp_path):
    template = tmp_path / "spec.yaml"
    template.write_text("containers: [{name: sandbox, workingDir: /srv/}]\nhostname: box\n")
    templated = substrate(k8s_kubeconfig, pod_template=str(template))
    templated.close()
    assert templated.workdir == "/srv"
    assert templated.pod_manifest("x", {})["spec"]["hostname"] == "box"


# -- image pull time ---------------------------------------------------------------------------


def test_image_pull_is_read_once_after_the_first_exec_not_in_teardown(
    k8s_api, k8s_kubeconfig, monkeypatch
):
    looker = substrate(k8s_kubeconfig)
    calls: list[tuple[str, int]] = []
    execs = k8s_api.requests[EXECS]
    real_lookup = events.image_pull_seconds

    def lookup(api: Any, name: str) -> float | None:
        calls.append(
            (f"lookup after {k8s_api.requests[EXECS] - execs} exec(s)", threading.get_ident())
        )
        return real_lookup(api, name)

    monkeypatch.setattr(events, "image_pull_seconds", lookup)
    listed = "GET /api/v1/namespaces/{namespace}/events"
    try:
        sandbox = looker.start()
        # In this thread, once the first no-op exec is done: it never overlaps the cold start.
        assert calls == [("lookup after 1 exec(s)", threading.get_ident())]
        assert sandbox.rollout.phases["image_pull"] >= 0  # known before the teardown
        before = k8s_api.requests[listed]
        sandbox.close()
        assert k8s_api.requests[listed] == before  # the teardown does not wait for it
    finally:
        looker.close()
    assert len(calls) == 1


def test_image_pull_time_from_the_pulled_event(k8s_kubeconfig):
    always = substrate(k8s_kubeconfig, image_pull_policy="Always")
    try:
        with always.start() as sandbox:
            pass
    finally:
        always.close()
    phases = sandbox.rollout.phases
    assert 0 < phases["image_pull"] < sandbox.rollout.cold_start_s
    assert list(phases) == [*PHASES, "image_pull"]


def test_image_pull_time_falls_back_to_the_gap_without_events(k8s_kubeconfig):
    no_events = substrate(k8s_kubeconfig, context=f"{CONTEXT}-no-events")
    try:
        with no_events.start() as sandbox:
            pass
    finally:
        no_events.close()
    phases = sandbox.rollout.phases
    assert phases["image_pull"] == phases["initialized"] + phases["containers_ready"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1.5s", 1.5), ("850ms", 0.85), ("1m2.5s", 62.5), ("12.5µs", 12.5e-6), ("2h", 7200.0),
     ("", None), ("1.5", None), ("fast", None)],
)  # fmt: skip
def test_go_durations(text, seconds):
    assert go_duration_seconds(text) == (pytest.approx(seconds) if seconds else None)


# -- through pytest --------------------------------------------------------------------------

WORKLOAD = """
import pytest

@pytest.mark.trajectory(steps=150)
def test_bugfix_loop(sandbox, rollout):
    sandbox.write_file("calc.py", "def add(a, b):\\n    return a - b\\n")
    r = sandbox.exec("python3 -B -c 'import calc; print(calc.add(2, 2))'")
    assert r.exit_code == 0 and r.stdout.strip() == "0"
    sandbox.write_file("calc.py", "def add(a, b):\\n    return a + b\\n")
    r = sandbox.exec(["python3", "-B", "-c", "import calc; print(calc.add(2, 2))"])
    assert r.stdout == "4\\n"
    assert list(rollout.phases)[:2] == ["created", "scheduled"]
"""


@pytest.fixture
def core_api(k8s_kubeconfig) -> Iterator[k8s_client.CoreV1Api]:
    api = k8s_config.new_client_from_config(config_file=str(k8s_kubeconfig))
    yield k8s_client.CoreV1Api(api)
    api.close()


def test_plugin_runs_a_workload_and_never_shows_a_token(pytester, k8s_api, k8s_kubeconfig):
    pytester.makepyfile(test_workload=WORKLOAD)
    pytester.makepyprojecttoml(f"""
        [tool.rollout-tax.substrates.k8s]
        kubeconfig = "{k8s_kubeconfig}"
        [tool.rollout-tax.substrates.k8s-session]
        kind = "k8s"
        transport = "session"
        kubeconfig = "{k8s_kubeconfig}"
        [tool.rollout-tax.substrates.k8s-no-exec]
        kind = "k8s"
        kubeconfig = "{k8s_kubeconfig}"
        context = "{CONTEXT}-no-exec"
        [tool.rollout-tax.substrates.k8s-bad-token]
        kind = "kubernetes"
        kubeconfig = "{k8s_kubeconfig}"
        context = "{CONTEXT}-bad-token"
    """)
    report = pytester.path / "report.json"
    result = pytester.runpytest(
        "--substrate=k8s,k8s-session,k8s-no-exec,k8s-bad-token", f"--rollout-json={report}",
        "--rollout-probes=2", "-l", "-vv", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(passed=2, errors=2)
    output = result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        "*test_bugfix_loop?k8s-1? PASSED*",
        "*test_bugfix_loop?k8s-session-1? PASSED*",
        "k8s: forbidden: the API server refused to create pods/exec 'rollout-tax-*",
        "k8s: unauthorized: the API server http://127.0.0.1:* rejected the credentials of "
        f"kubeconfig context '{CONTEXT}-bad-token' (401 Unauthorized) when asked to list pods*",
    ])  # fmt: skip
    assert "Traceback" not in output and "site-packages" not in output
    data = json.loads(report.read_text())
    k8s = data["substrates"]["k8s"]
    assert k8s["rollouts"] == 1 and k8s["failures"] == 0
    assert set(PHASES) | {"image_pull"} <= set(k8s["phases"])
    assert set(SESSION_PHASES) <= set(data["substrates"]["k8s-session"]["phases"])
    assert data["substrates"]["k8s-no-exec"]["infra_failed"]["rollouts"] == 1
    for token in all_tokens(k8s_api):
        assert token not in output
        assert token not in report.read_text()


def test_one_cause_counts_once_though_every_pod_has_its_own_name(pytester, k8s_kubeconfig):
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest(
        "--substrate=k8s", f"--substrate-opt=k8s.kubeconfig={k8s_kubeconfig}",
        f"--substrate-opt=k8s.context={CONTEXT}-no-exec", "--rollout-rounds=3",
        "--rollout-json=report.json", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(errors=3)
    failures = json.loads((pytester.path / "report.json").read_text())["substrates"]["k8s"]
    [(reason, count)] = failures["infra_failed"]["reasons"].items()
    assert count == 3 and "pods/exec 'rollout-tax-<id>'" in reason, reason
    result.stdout.fnmatch_lines(["k8s: no valid result (3 of 3 failed: ApiError: k8s: *"])


def test_rollout_reap_removes_labelled_pods(pytester, k8s_kubeconfig, core_api):
    crashed = substrate(k8s_kubeconfig, namespace="rollout-tax")
    try:
        abandoned = crashed.start()
        result = pytester.runpytest(
            "--rollout-reap", "--substrate=k8s", f"--substrate-opt=k8s.kubeconfig={k8s_kubeconfig}",
            "--substrate-opt=k8s.namespace=rollout-tax", "-p", "no:cacheprovider",
        )  # fmt: skip
        assert result.ret == 0
        result.stdout.fnmatch_lines(["rollout-tax: k8s: removed 1 leftover sandbox(es)"])
        assert not pod_exists(core_api, abandoned.id, "rollout-tax")
    finally:
        crashed.close()
