"""The bwrap substrate: what it isolates (checked from inside a real sandbox), its options,
its labels and reap scope, and one line saying which and what to do where the kernel lacks
what it needs (then the substrate is unavailable, never silently unisolated)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from pytest_rollout_tax.core.substrate import SESSION_LABEL, new_id
from pytest_rollout_tax.errors import ConfigError, SubstrateUnavailable
from pytest_rollout_tax.substrates.bwrap import BwrapSubstrate
from pytest_rollout_tax.substrates.bwrap.lifecycle import check_kernel
from pytest_rollout_tax.substrates.docker.lifecycle import OWNER_LABEL, USER_LABEL


@pytest.fixture(scope="module")
def bwrap(bwrap_ready, tmp_path_factory):
    """A substrate with a cache of its own: reaping any session sees only this module's."""
    cache = tmp_path_factory.mktemp("bwrap-cache")
    substrate = BwrapSubstrate(image=bwrap_ready, memory="1g", cache=str(cache))
    yield substrate
    substrate.reap(substrate.session_id)
    substrate.close()


def test_a_sandbox_has_its_own_namespaces_root_and_no_network(bwrap, tmp_path):
    (tmp_path / "host-secret").write_text("host")
    with bwrap.start(timeout=60) as sandbox:
        seen = sandbox.exec(
            "hostname; cat /etc/debian_version >/dev/null && echo debian; "
            "ls /proc | grep -c '^[0-9]'; cat /proc/net/dev | tail -n +3 | cut -d: -f1; "
            f"ls {tmp_path} 2>&1 >/dev/null | grep -c 'No such'; id -u; ulimit -v"
        )
        hostname, debian, processes, interfaces, hidden, uid, memory = seen.stdout.split()
        assert hostname == "rollout-tax" != socket.gethostname()  # UTS
        assert debian == "debian"  # the image's root, not the host's
        assert int(processes) < 10  # its own PID namespace: none of the host's processes
        assert interfaces == "lo"  # its own network namespace, no network
        assert hidden == "1"  # the host's files are not there
        assert uid == "0"  # root in its own user namespace: this user outside
        assert int(memory) == 1 << 20  # memory=1g: RLIMIT_AS, in KiB
        labels = json.loads((bwrap.sandboxes / sandbox.id / "labels.json").read_text())
        assert labels[SESSION_LABEL] == bwrap.session_id
        assert labels[OWNER_LABEL] == f"{socket.gethostname()}:{os.getpid()}"
        assert labels[USER_LABEL] == bwrap.user
    assert not (bwrap.sandboxes / sandbox.id).exists()


def test_reaping_any_session_spares_a_live_one(bwrap):
    with bwrap.start(timeout=60) as sandbox:
        assert bwrap.reap(None) == 0  # its session, this process, is alive
        assert sandbox.exec("true").ok
        other = BwrapSubstrate(cache=bwrap.options.cache, session_id=new_id())
        assert other.reap(other.session_id) == 0  # another session's scope: not this one
        assert bwrap.reap(bwrap.session_id) == 1
        assert not (bwrap.sandboxes / sandbox.id).exists()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"network": "bridge"}, "bwrap.network='bridge'"),
        ({"memory": "lots"}, "bwrap.memory='lots': expected a size like 512m or 2g"),
        ({"workdir": "work"}, "bwrap.workdir='work': expected an absolute path"),
        ({"cache": "cache"}, "bwrap.cache='cache': expected an absolute path"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(options, message):
    with pytest.raises(ConfigError) as caught:
        BwrapSubstrate(**options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def fake_tools(bin_dir: Path, unshare: str) -> None:
    """``bwrap`` that runs, and ``unshare`` that behaves as ``unshare`` (a shell body)."""
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("bwrap", "exit 0"), ("unshare", unshare)):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


@pytest.mark.parametrize(
    "unshare, which",
    [
        (
            "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1",
            "bwrap: user namespaces are not available to this user here; allow them",
        ),
        (
            "echo 'mount: /m: permission denied.' >&2; exit 125",
            "bwrap: overlayfs cannot be mounted in a user namespace here (Linux 5.11",
        ),
    ],
    ids=["no-user-namespaces", "no-overlay"],
)
def test_a_kernel_without_what_it_needs_makes_it_unavailable_in_one_line(
    tmp_path, monkeypatch, unshare, which
):
    fake_tools(tmp_path / "bin", unshare)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(SubstrateUnavailable) as caught:
        check_kernel("bwrap", tmp_path / "sandboxes")
    assert str(caught.value).startswith(which) and "\n" not in str(caught.value)
    substrate = BwrapSubstrate(cache=str(tmp_path / "cache"))
    with pytest.raises(SubstrateUnavailable, match="^" + which.replace("(", r"\(")):
        substrate.start()  # no sandbox at all, never one without its namespaces


def test_without_bwrap_it_says_to_run_ensure_bwrap(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SubstrateUnavailable, match=r"bwrap is not installed: run scripts/ensure"):
        check_kernel("bwrap", tmp_path / "sandboxes")
