"""A real Prometheus scraping a real Pushgateway, both Debian's, on loopback (test infrastructure).

``scripts/ensure-prometheus`` installs them; each test session starts its own pair on free
ports in a temporary directory, the Prometheus scraping the gateway every second with
``honor_labels`` (as a gateway is scraped in production), and stops both at the end.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .pytest_process import wait_for

SCRAPE_INTERVAL = "1s"


@dataclass(frozen=True)
class Prometheus:
    """The URLs of a running Prometheus and the Pushgateway it scrapes."""

    url: str
    pushgateway: str

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector."""
        query = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for_push_since(self, started: float, timeout: float = 60) -> None:
        """Wait until Prometheus has scraped a push made at or after ``started`` (a Unix time):
        the gateway is shared by the session's tests, so what an earlier test pushed can still
        be the latest scrape."""

        def scraped() -> bool:
            pushed = self.query('max(push_time_seconds{job="rollout_tax"})')
            return bool(pushed) and float(pushed[0]["value"][1]) >= started

        wait_for(scraped, f"a push since {started:.3f} to be scraped", timeout=timeout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def _start(command: list[str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A Prometheus and its Pushgateway, started for the session and stopped after it."""
    for binary in ("prometheus", "prometheus-pushgateway"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not installed: run scripts/ensure-prometheus")
    root = tmp_path_factory.mktemp("prometheus")
    gateway = f"127.0.0.1:{free_port()}"
    server = f"127.0.0.1:{free_port()}"
    config = root / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_INTERVAL}\n"
        "scrape_configs:\n"
        "  - job_name: pushgateway\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['{gateway}']\n",
        encoding="utf-8",
    )
    processes = [
        _start(["prometheus-pushgateway", f"--web.listen-address={gateway}"], root / "gateway.log"),
        _start(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address={server}",
            ],
            root / "prometheus.log",
        ),
    ]
    try:
        for url in (f"http://{gateway}/-/ready", f"http://{server}/-/ready"):
            wait_for(lambda url=url: _ready(url), f"{url} to answer", timeout=60)
        yield Prometheus(url=f"http://{server}", pushgateway=f"http://{gateway}")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
