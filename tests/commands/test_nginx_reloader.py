"""`rpp nginx-reloader`: the slots ConfigMap reaches a running nginx without a restart.

Real nginx runs the static config of examples/nginx.yaml; the Kubernetes API is kmock
(strict) over HTTP; the reloader's loop runs in-process with the real adapter; the pods
are fake inference pods behind an emulated RunPod proxy. Covered: nginx starts on the
placeholder files and answers 503; a ConfigMap write is served after a graceful reload
(the same master process); the files switch all at once; a config nginx rejects leaves
the running one in place and is reported (log, Event, metric); the sidecar's Role in
examples/nginx.yaml grants exactly what it calls; the init container's mode.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings, Permission, reloader_permissions
from rpp.adapters.kube.real import RealKubeApi
from rpp.adapters.nginx import CURRENT, FILES, NO_SLOTS, NginxMaster, SlotFiles
from rpp.cli import main
from rpp.controller.slots_reload import ReloaderMetrics, SlotsReloader
from rpp.decide.nginx_slots import SlotTarget, render_slots, upstream_name
from rpp.model.durations import parse_duration
from rpp.model.spec import Nginx
from rpp.model.spec_load import load_spec
from rpp.sim.inference import FakeInferencePod, HostRouter
from rpp.sim.localhttp import serve_local
from tests.fixtures_install import example, example_pool_spec, find
from tests.kmock_strict import StrictKubernetesEmulator, rpp_against
from tests.nginx_runner import RunningNginx, free_port, free_port_block, static_config
from tests.reloader_process import running_reloader

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NS = "runpod"
NAME = "inference-nginx-slots"
PODS = ("aaaaaaaa111111", "bbbbbbbb222222")


@dataclass
class Rig:
    """nginx, the reloader's loop, the cluster and two pods, on 127.0.0.1."""

    workdir: Path
    public: int
    base_port: int
    proxy_port: int
    files: SlotFiles
    nginx: RunningNginx
    writer: RealKubeApi
    registry: CollectorRegistry
    http: httpx.AsyncClient

    def slots(self, *pods: str, broken: bool = False) -> dict[str, str]:
        spec, problems = load_spec(
            "inference", {"replicas": {"min": 1, "max": 2}, "nginx": {"basePort": self.base_port}}
        )
        assert spec is not None, problems
        data = render_slots(
            pool="inference",
            spec=spec,
            slots={self.base_port + i: SlotTarget(pod) for i, pod in enumerate(pods)},
            proxy_url=f"http://127.0.0.1:{self.proxy_port}",
            listen_host="127.0.0.1",
        )
        if broken:
            data["servers.conf"] += "server { listen nonsense }\n"
        return data

    async def served_by(self) -> str | None:
        try:
            answer = await self.http.post(f"http://127.0.0.1:{self.public}/generate", json={})
        except httpx.HTTPError:
            return None
        return answer.json()["pod"] if answer.status_code == 200 else str(answer.status_code)

    async def until_sample(self, name: str, value: float, **labels: str) -> None:
        """The reloader counts a reload once it saw nginx serve it: a moment after."""
        async with asyncio.timeout(30):
            while self.sample(name, **labels) != value:
                await asyncio.sleep(0.05)

    async def until_served_by(self, wanted: str) -> None:
        async with asyncio.timeout(30):
            while await self.served_by() != wanted:
                await asyncio.sleep(0.05)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"config_map": NAME, **labels})


@pytest.fixture
async def rig(kmock: StrictKubernetesEmulator, tmp_path: Path) -> AsyncIterator[Rig]:
    pods = {p: FakeInferencePod(pod_id=p, clock=SystemClock()) for p in PODS}
    # The public port, then the slot ports from basePort = public + 1 (`slots` renders
    # nginx.slotPorts' default number of them): all must be free, or a reload cannot bind.
    public = free_port_block(1 + Nginx.model_fields["slot_ports"].default)
    status_port = free_port()
    files = SlotFiles(
        root=tmp_path / "slots", upstream=upstream_name("inference"), status_port=status_port
    )
    files.write_placeholders()
    conf = tmp_path / "nginx.conf"
    conf.write_text(static_config(tmp_path, public_port=public))
    settings = KubeSettings(namespace=NS, request_timeout=5.0)
    registry = CollectorRegistry()
    stop = asyncio.Event()
    async with (
        serve_local(HostRouter(pods)) as proxy_port,
        RealKubeApi.for_host(host=str(kmock.url), settings=settings) as kube,
        RealKubeApi.for_host(host=str(kmock.url), settings=settings) as writer,
        httpx.AsyncClient(timeout=5) as http,
    ):
        nginx = RunningNginx(conf, public_port=public)
        reloader = SlotsReloader(
            kube=kube,
            config_map=NAME,
            files=files,
            nginx=NginxMaster(pid_file=tmp_path / "nginx.pid", status_port=status_port),
            metrics=ReloaderMetrics(registry, config_map=NAME),
            clock=SystemClock(),
            reload_timeout_s=3.0,
            check_every_s=1.0,
        )
        running = asyncio.create_task(reloader.run(stop))
        try:
            yield Rig(
                tmp_path, public, public + 1, proxy_port, files, nginx, writer, registry, http
            )
        finally:
            stop.set()
            await running
            nginx.stop()


async def test_nginx_starts_on_the_placeholders_and_answers_503(rig: Rig) -> None:
    assert rig.files.written_version() == NO_SLOTS
    assert (rig.workdir / "slots" / CURRENT).is_symlink()
    assert await rig.served_by() == "503"


async def test_a_configmap_write_is_served_after_a_graceful_reload_not_a_restart(
    rig: Rig,
) -> None:
    master = rig.nginx.proc.pid
    created = await rig.writer.create_config_map(NAME, data=rig.slots(PODS[0]), labels={})
    await rig.until_served_by(PODS[0])
    assert rig.files.written_version() == created.resource_version
    await rig.writer.replace_config_map(created, data=rig.slots(PODS[1]))
    await rig.until_served_by(PODS[1])
    assert rig.nginx.proc.poll() is None
    assert int((rig.workdir / "nginx.pid").read_text()) == master, "reloaded in place"
    await rig.until_sample("runpod_pool_nginx_reloads_total", 2, outcome="ok")
    assert rig.sample("runpod_pool_nginx_config_rejected") == 0
    assert rig.sample("runpod_pool_nginx_reload_seconds_count") == 2
    # Every file of one version, under one name nginx includes: never a mix of two.
    current = rig.workdir / "slots" / CURRENT
    assert PODS[1] in (current / "servers.conf").read_text()
    assert (
        PODS[0]
        not in (current / "upstream.conf").read_text() + (current / "servers.conf").read_text()
    )


async def test_a_config_nginx_rejects_leaves_the_running_one_and_is_reported(
    rig: Rig, kmock: StrictKubernetesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    created = await rig.writer.create_config_map(NAME, data=rig.slots(PODS[0]), labels={})
    await rig.until_served_by(PODS[0])
    with caplog.at_level(logging.WARNING, logger="rpp.controller"):
        broken = await rig.writer.replace_config_map(created, data=rig.slots(PODS[1], broken=True))
        await rig.until_sample("runpod_pool_nginx_config_rejected", 1)
    assert await rig.served_by() == PODS[0], "nginx keeps serving what it ran"
    assert rig.files.written_version() == created.resource_version, "files put back"
    assert rig.sample("runpod_pool_nginx_reloads_total", outcome="ok") == 1
    assert rig.sample("runpod_pool_nginx_reloads_total", outcome="rejected") == 1
    [line] = [r.getMessage() for r in caplog.records if "did not load" in r.getMessage()]
    assert f"version {broken.resource_version}" in line
    assert f"keeps serving version {created.resource_version}" in line
    # The reloader sets the gauge last (SlotsReloader._rejected), after the Event's write
    # returned: whoever sees the gauge at 1, an alert or this test, finds the Event.
    [event] = rejected_events(kmock)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "ConfigMap"
    assert event["involvedObject"]["name"] == NAME
    assert event["message"] == line
    # The next good version loads and clears the gauge.
    await rig.writer.replace_config_map(broken, data=rig.slots(PODS[1]))
    await rig.until_sample("runpod_pool_nginx_config_rejected", 0)
    assert await rig.served_by() == PODS[1]


async def test_a_configmap_without_the_three_files_is_served_as_the_placeholders(
    rig: Rig,
) -> None:
    created = await rig.writer.create_config_map(NAME, data=rig.slots(PODS[0]), labels={})
    await rig.until_served_by(PODS[0])
    partial = {"upstream.conf": rig.slots(PODS[1])["upstream.conf"]}  # two files missing
    emptied = await rig.writer.replace_config_map(created, data=partial)
    await rig.until_served_by("503")
    assert rig.files.written_version() == emptied.resource_version
    upstream = (rig.workdir / "slots" / CURRENT / "upstream.conf").read_text()
    assert upstream.startswith("# No slots yet")
    assert PODS[1] not in upstream


def test_the_slot_files_refuse_a_version_without_the_three_files(tmp_path: Path) -> None:
    files = SlotFiles(root=tmp_path, upstream=upstream_name("inference"), status_port=8079)
    with pytest.raises(ValueError, match=r"version 7 lacks proxy.conf, servers.conf"):
        files.write("7", {"upstream.conf": ""})
    assert files.written_version() is None, "nothing written"


def rejected_events(kmock: StrictKubernetesEmulator) -> list[dict[str, Any]]:
    events = [o.raw for o in kmock.objects.values() if o.raw.get("kind") == "Event"]
    return [e for e in events if e["reason"] == "NginxConfigRejected"]


async def test_a_sidecar_whose_slot_writes_fail_logs_why_and_exits_1_to_be_restarted(
    kmock: StrictKubernetesEmulator, tmp_path: Path
) -> None:
    """`rpp nginx-reloader` as a process: the slots volume goes bad under it, so writing
    the next version raises inside its loop. The process must say so and exit 1 (the
    kubelet restarts the container), not run on serving /healthz while nothing applies
    the slots any more."""
    settings = KubeSettings(namespace=NS, request_timeout=5.0)
    async with running_reloader(server=str(kmock.url), namespace=NS, workdir=tmp_path) as started:
        process, root = started.process, started.files.root
        async with httpx.AsyncClient(timeout=5) as http, asyncio.timeout(30):
            while not await answers(http, f"http://127.0.0.1:{started.listen}/healthz"):
                await asyncio.sleep(0.1)
        # Placeholders are written before /healthz answers; now the volume is no directory.
        shutil.rmtree(root)
        root.write_text("not a directory any more\n")
        async with RealKubeApi.for_host(host=str(kmock.url), settings=settings) as writer:
            await writer.create_config_map(NAME, data=dict.fromkeys(FILES, ""), labels={})
        _, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 1
    lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
    [died] = [line for line in lines if line["level"] == "ERROR"]
    assert "the slots writer stopped" in died["message"]
    assert f"FileExistsError: [Errno 17] File exists: '{root}'" in died["message"]
    assert "exiting so Kubernetes restarts the sidecar" in died["message"]
    assert "FileExistsError" in died["exception"]


async def answers(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_sidecars_role_grants_exactly_what_the_reloader_calls() -> None:
    role = find(example("examples/nginx.yaml"), "Role", "inference-nginx-reloader")
    granted = {
        Permission(verb, group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == reloader_permissions()
    [config_maps] = [r for r in role["rules"] if r["resources"] == ["configmaps"]]
    assert config_maps["resourceNames"] == [NAME], "its one ConfigMap, nothing else"


def test_bind_makes_every_slot_port_listen_on_that_address_only(tmp_path: Path) -> None:
    spec, problems = load_spec("inference", {"replicas": {"min": 1, "max": 2}})
    assert spec is not None, problems
    data = render_slots(pool="inference", spec=spec, slots={8081: SlotTarget(PODS[0])})
    files = SlotFiles(
        root=tmp_path, upstream=upstream_name("inference"), status_port=8079, bind="127.0.0.1"
    )
    files.write("7", data)
    servers = (files.current / "servers.conf").read_text()
    listens = [line.strip() for line in servers.splitlines() if "listen " in line]
    ports = [8081, 8082, 8083, 8084]
    assert listens == [f"listen 127.0.0.1:{port};" for port in [*ports, 8079]]


@pytest.fixture
def kept_logging() -> Iterator[None]:
    """`rpp nginx-reloader` configures the process's logging, as a command should; put
    it back, or later tests lose httpx's log lines (the secrets test reads them)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    noisy = {
        name: logging.getLogger(name).level
        for name in ("httpx", "httpcore", "kubernetes", "aiohttp", "uvicorn.error")
    }
    yield
    root.handlers = handlers
    root.setLevel(level)
    for name, was in noisy.items():
        logging.getLogger(name).setLevel(was)


@pytest.mark.usefixtures("kept_logging")
def test_the_init_container_mode_writes_placeholders_once(tmp_path: Path) -> None:
    args = ["nginx-reloader", "--pool", "inference", "--dir", str(tmp_path), "--init-only"]
    assert main(args) == 0
    first = (tmp_path / CURRENT).resolve()
    assert "return 503;" in (tmp_path / CURRENT / "servers.conf").read_text()
    assert main(args) == 0
    assert (tmp_path / CURRENT).resolve() == first, "files already there are kept"


def test_a_bad_flag_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nginx-reloader", "--pool", "p", "--listen", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "rpp nginx-reloader: --listen: 'nowhere' has no host:port; set host:port, e.g. "
        "0.0.0.0:8080 or 127.0.0.1:9090"
    ]


async def test_a_bad_namespace_is_one_line_naming_it_and_exit_2_before_any_call(
    kmock: StrictKubernetesEmulator, tmp_path: Path
) -> None:
    code, err = await rpp_against(
        kmock,
        tmp_path,
        "nginx-reloader",
        "--pool",
        "inference",
        "--dir",
        str(tmp_path / "slots"),
        "--listen",
        f"127.0.0.1:{free_port()}",
        env={"NAMESPACE": "Runpod"},
    )
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith("rpp nginx-reloader: NAMESPACE: 'Runpod' is not a namespace name (")
    assert list(kmock) == [], "nothing was asked of the cluster"


def test_the_example_static_config_includes_the_files_the_reloader_writes() -> None:
    docs = example("examples/nginx.yaml")
    static = find(docs, "ConfigMap", "inference-nginx-config")["data"]["nginx.conf"]
    for name in ("proxy.conf", "upstream.conf", "servers.conf"):
        assert f"include /etc/nginx/slots/{CURRENT}/{name};" in static
    deployment = find(docs, "Deployment", "inference-nginx")["spec"]["template"]["spec"]
    assert deployment["shareProcessNamespace"] is True
    [nginx] = [c for c in deployment["containers"] if c["name"] == "nginx"]
    sleep, pause = nginx["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep == "sleep"
    # The preStop pause and the longest request both fit in the grace period.
    read_timeout = parse_duration(example_pool_spec()["nginx"]["readTimeout"])
    assert deployment["terminationGracePeriodSeconds"] > float(pause) + read_timeout
