"""A real Prometheus (Debian's package) on 127.0.0.1, for tests that run real PromQL.

`scripts/bootstrap.sh` (run by `scripts/test`) installs the package when it is missing;
a test run without it fails with a message that says so, it never skips. Each server
gets its own port, a temporary TSDB and a config the test writes, and scrapes every
second so rate() has data within a few seconds.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

PROMETHEUS_PATHS = ("/usr/bin/prometheus",)
START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class ScrapeTarget:
    """One fake pod for Prometheus to scrape, with the labels /sd/<pool> would set."""

    address: str  # host:port
    labels: Mapping[str, str]


@dataclass(frozen=True)
class RunningPrometheus:
    url: str
    workdir: Path


def prometheus_path() -> str:
    found = shutil.which("prometheus") or next(
        (p for p in PROMETHEUS_PATHS if Path(p).is_file()), None
    )
    if found is None:
        pytest.fail(
            "prometheus is not installed; these tests run the real server. Run "
            "scripts/bootstrap.sh (it installs the Debian package `prometheus`) and retry.",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    return prometheus_path()


def scrape_config(
    *,
    job: str,
    targets: Sequence[ScrapeTarget],
    params: Mapping[str, str] | None = None,
    interval: str = "1s",
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": job,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "static_configs": [
                    {"targets": [t.address], "labels": dict(t.labels)} for t in targets
                ],
            }
        ],
    }
    if params:
        config["scrape_configs"][0]["params"] = {k: [v] for k, v in params.items()}
    return config


@contextmanager
def running_prometheus(
    *, binary: str, workdir: Path, config: Mapping[str, Any]
) -> Iterator[RunningPrometheus]:
    """Start Prometheus with `config`, wait until it is ready, stop it afterwards."""
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(dict(config)))
    log_file = workdir / "prometheus.log"
    for _attempt in range(3):  # the free port can be taken between probe and bind
        port = _free_port()
        with log_file.open("wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            if _wait_ready(url, process):
                yield RunningPrometheus(url=url, workdir=workdir)
                return
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    log_tail = log_file.read_text(errors="replace")[-2000:]
    pytest.fail(f"prometheus did not become ready; its log:\n{log_tail}", pytrace=False)


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(check: Any, *, timeout_s: float, what: str) -> Any:
    """Poll `check()` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}", pytrace=False)
        time.sleep(0.25)
