"""Run the real nginx (Debian's nginx-light) on 127.0.0.1 for the slots tests.

The static config comes from examples/nginx.yaml verbatim except what a test machine
must change: the include directories, the pid and temp paths, the public port, and the
resolver (the cluster's DNS name does not exist here). The nginx container's own start
command (which puts unwired.conf in place while the slots do not exist) runs too, with
the same paths changed, and unwired.conf's slot port becomes a free one on 127.0.0.1.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

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


def example_objects() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((ROOT / "examples" / "nginx.yaml").read_text()))


def static_files() -> dict[str, str]:
    """The static ConfigMap's data: nginx.conf and unwired.conf."""
    config_map = next(d for d in example_objects() if d["kind"] == "ConfigMap")
    return dict(config_map["data"])


def _changed(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, f"examples/nginx.yaml no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def _directories(workdir: Path) -> dict[str, str]:
    return {name: f"{workdir}/{name}/" for name in ("slots", "fallback", "static")}


def static_config(workdir: Path, *, public_port: int) -> str:
    replacements = {  # in this order: the work dir itself lies under /tmp
        "/tmp/": f"{workdir}/",
        "/etc/nginx/slots/": _directories(workdir)["slots"],
        "/etc/nginx/fallback/": _directories(workdir)["fallback"],
        "listen 80;": f"listen 127.0.0.1:{public_port};",
        "resolver kube-dns.kube-system.svc.cluster.local": "resolver 127.0.0.1",
    }
    return _changed(static_files()["nginx.conf"], replacements)


def start_command() -> str:
    """What the nginx container runs before it execs nginx (examples/nginx.yaml)."""
    deployment = next(d for d in example_objects() if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["sh", "-c"], command
    script: str = command[2]
    before, _, _ = script.partition("exec nginx")
    return before


def write_config(
    workdir: Path,
    slots: dict[str, str],
    *,
    public_port: int,
    fallback_port: int | None = None,
) -> Path:
    """The slots as the kubelet mounts them, the static files, then the container's start
    command; the config file nginx is started with."""
    dirs = _directories(workdir)
    for path in dirs.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    for name, content in slots.items():
        (workdir / "slots" / name).write_text(content)
    port = fallback_port or free_port()
    unwired = _changed(
        static_files()["unwired.conf"],
        {"listen 8081;": f"listen 127.0.0.1:{port};", "127.0.0.1:8081": f"127.0.0.1:{port}"},
    )
    (workdir / "static" / "unwired.conf").write_text(unwired)
    script = _changed(start_command(), {f"/etc/nginx/{k}/": v for k, v in dirs.items()})
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
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
