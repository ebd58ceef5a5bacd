"""The serving rig: every real component of the serving path, each its own process.

All on 127.0.0.1, started in this order:

- `rpp fake-runpod`: RunPod's API, its proxy and the pods (adopted when the pool starts,
  booting in a second), with a scaled CDN limit (`--proxy-limit`);
- rpp/sim/kube_standin.py: the Kubernetes API (a stand-in holding objects only, so it
  does not slow down over a run as kmock's request history does), seeded with the pool,
  its env Secret and an empty slots ConfigMap;
- `rpp nginx-reloader --init-only` (the init container), then nginx running
  examples/nginx.yaml's static config (tests/nginx_runner.py's replacements), then
  `rpp nginx-reloader` as its sidecar, slot ports bound to 127.0.0.1 (`--bind`);
- `rpp run`, reconciling every second, pointed at the fake and the stand-in.

`Rig.start` returns when every member is Ready and nginx serves the slots the controller
wrote. The verbs (`service`, `terminate`, `note`, `patch_spec`) change the world as a
scenario says; `work()` is the fake pods' log of the work they started.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from rpp.adapters.nginx import VERSION_PATH
from tests.nginx_runner import NGINX, RunningNginx, free_port, free_port_block, static_config

ROOT = Path(__file__).parents[2]
NS = "runpod"
POOL = "inference"
GROUP = "runpodpool.ownego.com"
GPU = "NVIDIA GeForce RTX 4090"
IMAGE = "ghcr.io/example/inference:1.4.2"
TOKEN = "serving-metrics-token"
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1"]


@dataclass(frozen=True)
class PoolShape:
    """The pool's timing, scaled to the run (a benchmark runs longer than a test)."""

    pods: int = 3
    drain_s: float = 40.0  # above the longest stream: a drained pod finishes its work
    unreachable_s: float = 20.0
    cdn_limit_s: float = 30.0  # RunPod's 100 s, scaled
    interval_s: float = 1.0

    def spec(self, base_port: int) -> dict[str, Any]:
        obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
        spec: dict[str, Any] = obj["spec"]
        spec.update(
            dryRun=False,
            templateId="tpl-serving",
            image=IMAGE,
            gpuTypes=[GPU],
            replicas={"min": self.pods, "max": self.pods + 1},
            maxPerDatacenter=self.pods + 2,
            datacenters={"allow": DATACENTERS, "deny": []},
            limits={
                "maxPods": 2 * self.pods + 2,
                "maxHourlyCostUsd": 100.0,
                "maxCreatesPerHour": 20,
                "estimatedPodCostUsd": 0.7,
            },
            drain={"period": f"{self.drain_s:g}s"},
        )
        spec["nginx"].update(basePort=base_port, slotPorts=self.pods + 3)
        spec["health"]["warmupTimeout"] = "2m"
        spec["health"]["replaceWhen"]["unreachable"]["duration"] = f"{self.unreachable_s:g}s"
        spec["rollout"] = {"canary": {"enabled": False}, "maxParallel": 1}
        spec["probe"].pop("requireMetric", None)
        obj["spec"] = spec
        return dict(obj)


class Child:
    """A child process; its output goes to a file (an unread pipe would stall it)."""

    def __init__(self, name: str, args: list[str], *, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def first_port(self, *, timeout_s: float = 30.0) -> int:
        """The port a child names in its first line ("... listening on http://h:PORT")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if "listening on" in line:
                    return int(line.rstrip("/").rsplit(":", 1)[-1].split()[-1])
            if self.popen.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} named no port: {self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class Rig:
    """The running serving path; `start` it, then drive a scenario, then `stop`."""

    workdir: Path
    shape: PoolShape
    children: list[Child] = field(default_factory=list)
    nginx: RunningNginx | None = None
    public: int = 0
    status_port: int = 0
    fake: str = ""
    api: str = ""
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10))

    # -- start and stop -------------------------------------------------------------------

    def start(self, *, timeout_s: float = 120.0, controller: bool = True) -> None:
        """Every component, then wait until every pod serves; without the controller,
        only until nginx answers (on the placeholder slots: 503)."""
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
        self.public = free_port_block(self.shape.pods + 4)
        self.status_port = free_port()
        (self.workdir / "cloud.yaml").write_text(yaml.safe_dump(self._cloud()))
        fake = self._child(
            "fake-runpod",
            [
                *_rpp("fake-runpod"),
                "--port",
                "0",
                "--scenario",
                str(self.workdir / "cloud.yaml"),
                "--proxy-limit",
                f"{self.shape.cdn_limit_s:g}",
            ],
            env,
        )
        kube = self._child(
            "kube-standin",
            [sys.executable, "-m", "rpp.sim.kube_standin", "--port", "0"],
            env,
        )
        self.fake = f"http://127.0.0.1:{fake.first_port()}"
        self.api = f"http://127.0.0.1:{kube.first_port()}"
        self._seed()
        env["KUBECONFIG"] = str(self._kubeconfig())
        env["NAMESPACE"] = NS
        reloader = [
            *_rpp("nginx-reloader"),
            "--pool", POOL, "--dir", str(self.workdir / "slots"),
            "--pid-file", str(self.workdir / "nginx.pid"),
            "--status-port", str(self.status_port), "--bind", "127.0.0.1",
        ]  # fmt: skip
        subprocess.run([*reloader, "--init-only"], cwd=ROOT, env=env, check=True, timeout=60)
        conf = self.workdir / "nginx.conf"
        conf.write_text(static_config(self.workdir, public_port=self.public))
        self.nginx = RunningNginx(conf, public_port=self.public)
        self._child("nginx-reloader", [*reloader, "--listen", f"127.0.0.1:{free_port()}"], env)
        if not controller:
            return
        self._child(
            "rpp-run",
            _rpp("run"),
            env
            | {
                "RUNPOD_API_KEY": "serving-key",
                "RECONCILE_INTERVAL": f"{self.shape.interval_s:g}",
                "LISTEN_ADDRESS": f"127.0.0.1:{free_port()}",
                "RUNPOD_API_URL": self.fake,
                "RUNPOD_PROXY_URL": self.fake,
                "POD_NAME": "rpp-serving",
                "LOG_FORMAT": "json",
            },
        )
        self.until(self.serving, timeout_s=timeout_s, what="every pod Ready and served")

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        if self.nginx is not None:
            self.nginx.stop()
        self.http.close()

    def _child(self, name: str, args: list[str], env: dict[str, str]) -> Child:
        child = Child(name, args, env=env, log=self.workdir / f"{name}.log")
        self.children.append(child)
        return child

    def _cloud(self) -> dict[str, Any]:
        existing = [
            {
                "name": f"rpp-inference-p{i}",
                "gpuType": GPU,
                "datacenter": DATACENTERS[i % len(DATACENTERS)],
                "image": IMAGE,
                "env": {"METRICS_TOKEN": TOKEN},
            }
            for i in range(self.shape.pods)
        ]
        stock = [{"datacenter": d, "gpuType": GPU, "count": 10} for d in DATACENTERS]
        template = {"id": "tpl-serving", "image": IMAGE, "env": {"METRICS_TOKEN": TOKEN}}
        return {
            "cloud": {
                "seed": 13,
                "bootTime": "1s",
                "templates": [template],
                "stock": stock,
                "existing": existing,
            }
        }

    def _seed(self) -> None:
        core = f"{self.api}/api/v1/namespaces/{NS}"
        token = base64.b64encode(TOKEN.encode()).decode()
        secret = {"metadata": {"name": "inference-env"}, "data": {"METRICS_TOKEN": token}}
        self.http.post(f"{core}/secrets", json=secret).raise_for_status()
        empty = {"metadata": {"name": "inference-nginx-slots"}, "data": {}}
        self.http.post(f"{core}/configmaps", json=empty).raise_for_status()
        pool = self.shape.spec(self.public + 1)
        pool["metadata"] = {"name": POOL, "namespace": NS}
        self.http.post(self._pools(), json=pool).raise_for_status()

    def _kubeconfig(self) -> Path:
        path = self.workdir / "kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": self.api}}],
            "users": [{"name": "u", "user": {"token": "serving"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def _pools(self) -> str:
        return f"{self.api}/apis/{GROUP}/v1alpha1/namespaces/{NS}/runpodpools"

    # -- what the rig sees ----------------------------------------------------------------

    def pool(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.http.get(f"{self._pools()}/{POOL}").json()
        return answer

    def members(self) -> list[dict[str, Any]]:
        return list((self.pool().get("status") or {}).get("members") or [])

    def wired(self) -> list[str]:
        """Pod ids in nginx slots now, by slot."""
        ready = [m for m in self.members() if m.get("slot") is not None]
        return [m["podId"] for m in sorted(ready, key=lambda m: int(m["slot"]))]

    def slots_version(self) -> str:
        answer = self.http.get(f"{self.api}/api/v1/namespaces/{NS}/configmaps/{POOL}-nginx-slots")
        return str(answer.json()["metadata"]["resourceVersion"])

    def loaded_version(self) -> str | None:
        try:
            answer = self.http.get(f"http://127.0.0.1:{self.status_port}{VERSION_PATH}")
        except httpx.HTTPError:
            return None
        return answer.text.strip() if answer.status_code == 200 else None

    def serving(self) -> bool:
        """Every pod Ready and wired, and nginx serves the slots the controller wrote."""
        status = self.pool().get("status") or {}
        if status.get("ready") != self.shape.pods or len(self.wired()) != self.shape.pods:
            return False
        return self.loaded_version() == self.slots_version()

    def until(self, check: Any, *, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return
            for child in self.children:
                if child.popen.poll() is not None:
                    raise RuntimeError(f"{child.name} stopped: {child.tail()}")
            time.sleep(0.2)
        logs = "\n".join(f"--- {c.name}:\n{c.tail()}" for c in self.children)
        raise RuntimeError(
            f"not reached in {timeout_s:g}s: {what}; pool: {self.members()}\n{logs}"
        )

    def pod_ids(self) -> list[str]:
        """The fake's pods, as RunPod lists them."""
        listed = self.http.get(
            f"{self.fake}/v2/pods", headers={"Authorization": "Bearer serving-key"}
        ).json()
        return sorted(str(p["id"]) for p in listed["pods"])

    def replace_slots(self, data: dict[str, str]) -> str:
        """Write the slots ConfigMap as the controller does (PUT); its new version."""
        url = f"{self.api}/api/v1/namespaces/{NS}/configmaps/{POOL}-nginx-slots"
        current = self.http.get(url).json()
        current["data"] = data
        written = self.http.put(url, json=current)
        written.raise_for_status()
        return str(written.json()["metadata"]["resourceVersion"])

    def work(self) -> list[dict[str, Any]]:
        answer = self.http.get(f"{self.fake}/_fake/work", timeout=60)
        return list(answer.json()["work"])

    # -- what a scenario does to the world ------------------------------------------------

    def service(self, pod: str, mode: str, *, after: float | None = None) -> None:
        body: dict[str, Any] = {"mode": mode}
        if after is not None:
            body["after"] = after
        self.http.post(f"{self.fake}/_fake/pods/{pod}/service", json=body).raise_for_status()

    def terminate(self, pod: str) -> None:
        """Terminated in RunPod's console: gone from the listing, the proxy says 404."""
        self.http.delete(f"{self.fake}/_fake/pods/{pod}").raise_for_status()

    def note(self, pod: str, text: str) -> None:
        self.http.post(
            f"{self.fake}/_fake/pods/{pod}/note", json={"note": text}
        ).raise_for_status()

    def patch_spec(self, **changes: Any) -> None:
        """`kubectl patch rpp inference --type merge` of spec fields."""
        self.http.patch(
            f"{self._pools()}/{POOL}",
            json={"spec": changes},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()


def _rpp(command: str) -> list[str]:
    return [sys.executable, "-m", "rpp", command]


def nginx_version() -> str:
    done = subprocess.run([NGINX, "-v"], capture_output=True, text=True, check=False)
    return done.stderr.strip()
