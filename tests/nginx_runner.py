"""Run the real nginx (Debian's nginx-light) on 127.0.0.1 for the slots tests.

The static config comes from examples/nginx.yaml verbatim except what a test machine
must change: the include directory, the pid and temp paths, the public port, and the
resolver (the cluster's DNS name does not exist here).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).parents[1]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port_block(count: int) -> int:
    """The first of `count` consecutive ports that are all free on 127.0.0.1 right now."""
    import random

    for _ in range(200):
        base = random.randint(20000, 60000)
        sockets = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no block of {count} free ports found")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def static_config(workdir: Path, *, public_port: int) -> str:
    docs = list(yaml.safe_load_all((ROOT / "examples" / "nginx.yaml").read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    text: str = config_map["data"]["nginx.conf"]
    replacements = {  # in this order: the work dir itself lies under /tmp
        "/tmp/": f"{workdir}/",
        "/etc/nginx/slots/": f"{workdir}/slots/",
        "listen 8080;": f"listen 127.0.0.1:{public_port};",
        "resolver kube-dns.kube-system.svc.cluster.local": "resolver 127.0.0.1",
    }
    for old, new in replacements.items():
        assert old in text, f"examples/nginx.yaml no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def write_config(workdir: Path, slots: dict[str, str], *, public_port: int) -> Path:
    """The static config, and `slots` where the reloader sidecar would put them."""
    (workdir / "slots" / "current").mkdir(parents=True, exist_ok=True)
    for name, content in slots.items():
        (workdir / "slots" / "current" / name).write_text(content)
    conf = workdir / "nginx.conf"
    conf.write_text(static_config(workdir, public_port=public_port))
    return conf


def nginx_test(conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NGINX, "-t", "-q", "-e", "stderr", "-p", str(conf.parent), "-c", str(conf)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


class RunningNginx:
    def __init__(self, conf: Path, *, public_port: int) -> None:
        self.conf = conf
        self.public_port = public_port
        # nginx's own log goes to a file, not a pipe: an unread pipe fills up and stalls
        # nginx, and an open one outlives the test (ResourceWarning).
        self.log = conf.parent / "nginx-stderr.log"
        with self.log.open("wb") as log:
            command = [NGINX, "-e", "stderr", "-p", str(conf.parent), "-c", str(conf)]
            self.proc = subprocess.Popen(
                [*command, "-g", "daemon off;"],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.log.read_text(errors='replace')}")
            try:
                # Ready when the public server answers, not merely when its port accepts.
                health = httpx.get(f"http://127.0.0.1:{public_port}/nginx-health", timeout=1)
                if health.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
