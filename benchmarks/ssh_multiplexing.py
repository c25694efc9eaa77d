"""What each way of reaching an ec2 sandbox costs per action, over SSH, in one interleaved run.

    python benchmarks/ssh_multiplexing.py [--steps 200] [--warmup 5]

Against a local sshd container (rollout-tax/sshd:bookworm, built from images/sshd when
missing, on the Docker engine scripts/ensure-docker provides), times the no-op action the
ec2 substrate probes (``true``, sent exactly as each transport sends it):

- session: one long-lived ``sh`` on one channel of the sandbox's connection, each step a
  line framed by sentinels (the ``session`` transport);
- one channel per step: a new channel on the sandbox's open SSH connection (the ``exec``
  transport);
- new connection per step: TCP connect, key exchange, host key check and public-key
  authentication, then the same channel, then close (what ``ssh host cmd`` per step costs).

Samples rotate through the modes, in reverse order every other round (ABC CBA), so
machine-load drift hits all alike. The figures are for a container on loopback: a real VM
adds its network round trips to every mode, and to the new-connection mode several times over
(TCP and SSH handshakes).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sampling import interleaved_all
from support.ec2_moto import ensure_sshd_image, generate_key, start_sshd

from pytest_rollout_tax.core.record import PhaseClock
from pytest_rollout_tax.core.shell import ShellTransport
from pytest_rollout_tax.core.stats import Stats
from pytest_rollout_tax.core.transport import NOOP, shell_line
from pytest_rollout_tax.substrates.ec2 import SSHConnection
from pytest_rollout_tax.substrates.ec2.shell import SSHShell

WORKDIR = "/tmp"
SESSION = "session (one channel, one sh)"
CHANNEL = "one channel per step (exec)"
FRESH = "new connection per step"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, metavar="N", help="default 200")
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="default 5")
    args = parser.parse_args(argv)

    client = docker.from_env()
    image = ensure_sshd_image(client)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rollout-tax-bench-") as tmp:
        key = generate_key(Path(tmp))
        target = start_sshd(client, image, key)
        try:
            keys = [paramiko.PKey.from_path(key.private)]
            pinned: dict[str, object] = {}

            def verify(host_key) -> None:  # accept-new, then pinned: as the substrate does
                if pinned.setdefault("key", host_key.asbytes()) != host_key.asbytes():
                    raise RuntimeError("host key changed")

            def connect() -> SSHConnection:
                return SSHConnection.open(
                    target.host, target.port, user=target.user, keys=keys, verify_host_key=verify
                )

            command = shell_line(list(NOOP), env=None, cwd=WORKDIR)  # what exec sends
            shared, held = connect(), connect()
            session = ShellTransport(lambda: SSHShell(held, substrate="ec2"), substrate="ec2")
            session.open(PhaseClock({}))

            def fresh_run() -> int:
                connection = connect()
                try:
                    return connection.run(command, timeout=30).exit_code
                finally:
                    connection.close()

            samplers = {
                SESSION: _timed(
                    lambda: session.run(list(NOOP), timeout=30, env=None, cwd=WORKDIR).exit_code
                ),
                CHANNEL: _timed(lambda: shared.run(command, timeout=30).exit_code),
                FRESH: _timed(fresh_run),
            }
            interleaved_all(args.warmup, samplers)
            samples = interleaved_all(args.steps, samplers)
            session.close()
            shared.close()
            held.close()
            load_after = os.getloadavg()[0]
        finally:
            target.container.remove(force=True)

    print(
        f"ec2 transports over SSH: {args.steps} no-op actions per mode (ABC CBA), "
        f"after {args.warmup} warm-up rounds"
    )
    print(f"target: local sshd container {image} on 127.0.0.1 (docker {_engine(client)})")
    print(
        f"client: python {platform.python_version()} on {platform.machine()}, "
        f"paramiko {paramiko.__version__}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before / {load_after:.1f} after"
    )
    stats = {name: Stats.of(values) for name, values in samples.items()}
    print(f"{'mode':<32}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}")
    for name, row in stats.items():
        assert row is not None
        print(
            f"{name:<32}{_ms(row.p50):>10}{_ms(row.p90):>10}{_ms(row.p99):>10}{_ms(row.mean):>10}"
        )
    base = stats[CHANNEL].p50
    for name in (SESSION, FRESH):
        p50 = stats[name].p50
        print(
            f"{name} / one channel per step, p50: {p50 / base:.2f}x ({_signed_ms(p50 - base)} "
            f"per action; {(p50 - base) * 150e6 / 3600:+,.0f} worker-hours "
            "for 1M x 150-step trajectories)"
        )
    return 0


def _timed(action: Callable[[], int]) -> Callable[[], float]:
    """A sampler: the seconds ``action`` takes; it must report exit code 0."""

    def sample() -> float:
        started = time.perf_counter()
        code = action()
        elapsed = time.perf_counter() - started
        assert code == 0, code
        return elapsed

    return sample


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}ms"


def _signed_ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.2f}ms"


def _engine(client: docker.DockerClient) -> str:
    return client.version().get("Version", "?")


if __name__ == "__main__":
    sys.exit(main())
