"""What does multiplexing buy the ec2 substrate? One SSH connection per sandbox vs one per step.

    python benchmarks/ssh_multiplexing.py [--steps 200] [--warmup 5]

Against a local sshd container (rollout-tax/sshd:bookworm, built from images/sshd when
missing, on the Docker engine scripts/ensure-docker provides), times the no-op action the
ec2 substrate probes (``true`` wrapped exactly as ``EC2Sandbox._run`` wraps a command):

- one connection: every step is a new channel on the sandbox's open SSH connection
  (what the substrate does);
- new connection per step: TCP connect, key exchange, host key check and public-key
  authentication, then the same channel, then close (what ``ssh host cmd`` per step costs).

Samples alternate between the two modes (ABBA order) so machine-load drift hits both equally.
The figures are for a container on loopback: a real VM adds its network round trips to both
sides, and to the new-connection side several times over (TCP and SSH handshakes).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import docker
import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sampling import interleaved
from support.ec2_moto import ensure_sshd_image, generate_key, start_sshd

from pytest_rollout_tax.sandbox import NOOP, shell_command
from pytest_rollout_tax.stats import Stats
from pytest_rollout_tax.substrates.ec2 import SSHConnection

WORKDIR = "/tmp"


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
            keys = [_load(key.private)]
            pinned: dict[str, object] = {}

            def verify(host_key) -> None:  # accept-new, then pinned: as the substrate does
                if pinned.setdefault("key", host_key.asbytes()) != host_key.asbytes():
                    raise RuntimeError("host key changed")

            def connect() -> SSHConnection:
                return SSHConnection.open(
                    target.host, target.port, user=target.user, keys=keys, verify_host_key=verify
                )

            command = shell_command(list(NOOP), env=None, cwd=WORKDIR)[-1]  # what ec2 sends
            shared = connect()

            def multiplexed() -> float:
                started = time.perf_counter()
                result = shared.run(command, timeout=30)
                elapsed = time.perf_counter() - started
                assert result.exit_code == 0, result
                return elapsed

            def fresh() -> float:
                started = time.perf_counter()
                connection = connect()
                try:
                    result = connection.run(command, timeout=30)
                finally:
                    connection.close()
                elapsed = time.perf_counter() - started
                assert result.exit_code == 0, result
                return elapsed

            interleaved(args.warmup, multiplexed, fresh)
            one, new = interleaved(args.steps, multiplexed, fresh)
            shared.close()
            load_after = os.getloadavg()[0]
        finally:
            target.container.remove(force=True)

    print(f"ssh multiplexing: {args.steps} no-op actions per mode (ABBA), after {args.warmup}")
    print(f"target: local sshd container {image} on 127.0.0.1 (docker {_engine(client)})")
    print(
        f"client: python {platform.python_version()} on {platform.machine()}, "
        f"paramiko {paramiko.__version__}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before / {load_after:.1f} after"
    )
    rows = [
        ("one connection (channels)", Stats.of(one)),
        ("new connection per step", Stats.of(new)),
    ]
    print(f"{'mode':<28}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}")
    for name, stats in rows:
        assert stats is not None
        print(
            f"{name:<28}{_ms(stats.p50):>10}{_ms(stats.p90):>10}{_ms(stats.p99):>10}"
            f"{_ms(stats.mean):>10}"
        )
    one_stats, new_stats = rows[0][1], rows[1][1]
    assert one_stats is not None and new_stats is not None
    print(
        f"new connection per step / one connection, p50: {new_stats.p50 / one_stats.p50:.1f}x "
        f"(+{_ms(new_stats.p50 - one_stats.p50)} per action; "
        f"{(new_stats.p50 - one_stats.p50) * 150e6 / 3600:,.0f} worker-hours more "
        "for 1M x 150-step trajectories)"
    )
    return 0


def _load(path: Path) -> paramiko.PKey:
    return paramiko.PKey.from_path(path)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}ms"


def _engine(client: docker.DockerClient) -> str:
    return client.version().get("Version", "?")


if __name__ == "__main__":
    sys.exit(main())
