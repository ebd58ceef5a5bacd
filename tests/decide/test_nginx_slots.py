"""The slots ConfigMap: deterministic rendering, accepted by the real nginx, and real
traffic through the slots to pods addressed by RunPod's proxy Host header."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from rpp.adapters.nginx import SlotFiles
from rpp.decide.nginx_slots import (
    RenderedSlots,
    SlotsFormatError,
    SlotTarget,
    render_for,
    render_slots,
    slots_effect,
    upstream_name,
    wired_pods,
)
from rpp.model.effects import WriteSlots
from rpp.model.members import MemberRecord, Phase
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN, proxy_host
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_spec
from tests.nginx_runner import (
    RunningNginx,
    free_port,
    free_port_block,
    nginx_test,
    static_config,
    write_config,
)

ROOT = Path(__file__).parents[2]


def pool_spec(**nginx: object) -> RunPodPoolSpec:
    spec, problems = load_spec("inference", {"replicas": {"min": 2, "max": 3}, "nginx": nginx})
    assert problems == []
    assert spec is not None
    return spec


SPEC = pool_spec()
ASSIGNMENTS = {
    "nothing wired": {},
    "one wired": {8082: SlotTarget("abcdefgh123456", "EU-RO-1")},
    "all wired": {
        8081: SlotTarget("aaaaaaaa111111", "EU-RO-1"),
        8082: SlotTarget("bbbbbbbb222222", "EU-SE-1"),
        8083: SlotTarget("cccccccc333333", None),
        8084: SlotTarget("dddddddd444444", "EU-CZ-1"),
    },
}


def test_rendering_is_deterministic_and_changes_only_with_the_slots() -> None:
    one = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS["one wired"])
    again = render_slots(pool="inference", spec=SPEC, slots=dict(ASSIGNMENTS["one wired"]))
    other = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS["all wired"])
    assert one == again
    assert one["servers.conf"] != other["servers.conf"]
    assert one["proxy.conf"] == other["proxy.conf"]


def test_a_wired_slot_proxies_to_its_pod_with_host_sni_and_no_session_reuse() -> None:
    data = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS["one wired"])
    host = proxy_host("abcdefgh123456", 80)
    assert host == "abcdefgh123456-80.proxy.runpod.net"
    assert f'set $rpp_target "https://{host}";' in data["servers.conf"]
    assert f"proxy_set_header Host {host};" in data["servers.conf"]
    assert f"proxy_ssl_name {host};" in data["servers.conf"]
    assert "proxy_ssl_server_name on;" in data["proxy.conf"]
    assert "proxy_ssl_session_reuse off;" in data["proxy.conf"]
    assert "proxy_read_timeout 2m;" in data["proxy.conf"]
    # A lone server is never taken out nor retried on by nginx: no failure settings.
    assert "    server 127.0.0.1:8082;\n" in data["upstream.conf"]
    assert "8081" not in data["upstream.conf"]
    assert "least_conn;" in data["upstream.conf"]
    assert wired_pods(data) == {8082: "abcdefgh123456"}


def test_several_wired_slots_are_taken_out_on_one_failure_and_listed_again_as_backups() -> None:
    data = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS["all wired"])
    upstream = data["upstream.conf"]
    directives = [
        line.strip() for line in upstream.splitlines() if not line.strip().startswith("#")
    ]
    assert directives[:4] == [
        "upstream rpp_inference_slots {",
        "zone rpp_inference_slots 1m;",
        "least_conn;",
        "server 127.0.0.1:8081 max_fails=1 fail_timeout=10s;",
    ]
    for port in (8081, 8082, 8083, 8084):
        assert f"server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;" in directives
        assert f"server 127.0.0.1:{port} backup max_fails=0;" in directives
    # Every directive of the rendered files carries the comment that explains it.
    for name in ("proxy.conf", "upstream.conf"):
        lines = data[name].splitlines()
        for at, line in enumerate(lines):
            if line.strip().startswith(("proxy_", "zone", "least_conn")):
                assert lines[at - 1].strip().startswith("#"), (name, line)


def test_a_wired_slot_turns_its_pods_failures_into_a_dropped_connection() -> None:
    data = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS["one wired"])
    wired = next(b for b in data["servers.conf"].split("server {") if "listen 8082;" in b)
    unwired = next(b for b in data["servers.conf"].split("server {") if "listen 8081;" in b)
    assert "proxy_intercept_errors on;" in wired
    assert "error_page 502 504 524 = @pod_failed;" in wired
    assert "location @pod_failed {\n        return 444;\n    }" in wired
    assert "@pod_failed" not in unwired


def test_unwired_slots_answer_503_and_an_empty_pool_still_has_an_upstream() -> None:
    data = render_slots(pool="inference", spec=SPEC, slots={})
    assert data["servers.conf"].count("return 503;") == 4
    assert f"upstream {upstream_name('inference')}" in data["upstream.conf"]
    assert "server 127.0.0.1:8081" in data["upstream.conf"]
    assert wired_pods(data) == {}


def test_a_slot_outside_the_slot_ports_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the pool's slot ports 8081-8084"):
        render_slots(pool="inference", spec=SPEC, slots={9000: SlotTarget("abcdefgh123456")})


def test_hand_edited_slot_index_is_an_error_not_an_empty_pool() -> None:
    with pytest.raises(SlotsFormatError, match="edited by hand"):
        wired_pods({"slots.json": "[1, 2]"})
    assert wired_pods(None) == {}
    assert wired_pods({}) == {}


def wired(*slots: tuple[int, str]) -> list[MemberRecord]:
    since = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    return [
        MemberRecord(
            pod_id=pod, name=f"rpp-inference-{pod}", phase=Phase.READY, since=since, slot=port
        )
        for port, pod in slots
    ]


def test_a_render_is_reused_only_for_the_same_pool_spec_proxy_and_wired_members() -> None:
    members = wired((8081, "aaaaaaaa111111"), (8082, "bbbbbbbb222222"))
    last = render_for(pool="inference", spec=SPEC, members=members, proxy_url=DEFAULT_URL_PATTERN)

    for spec in (SPEC, pool_spec()):  # the same spec, or an equal one loaded again
        again = render_for(
            pool="inference", spec=spec, members=members, proxy_url=DEFAULT_URL_PATTERN, last=last
        )
        assert again is last
    changes = {
        "a member left": ("inference", SPEC, wired((8081, "aaaaaaaa111111")), DEFAULT_URL_PATTERN),
        "readTimeout": ("inference", pool_spec(readTimeout="300s"), members, DEFAULT_URL_PATTERN),
        "proxy URL": ("inference", SPEC, members, "http://127.0.0.1:9000"),
        "another pool": ("batch", SPEC, members, DEFAULT_URL_PATTERN),
    }
    for what, (pool, spec, now_wired, proxy_url) in changes.items():
        changed = render_for(
            pool=pool, spec=spec, members=now_wired, proxy_url=proxy_url, last=last
        )
        fresh = render_for(pool=pool, spec=spec, members=now_wired, proxy_url=proxy_url)
        assert changed.write == fresh.write, what
        assert changed.write.data != last.write.data, what


def test_the_slots_are_written_only_when_the_configmap_differs_from_the_render() -> None:
    members = wired((8081, "aaaaaaaa111111"))

    def effect(
        observed: dict[str, str] | None, last: RenderedSlots | None = None
    ) -> tuple[WriteSlots | None, RenderedSlots]:
        return slots_effect(
            pool="inference",
            spec=SPEC,
            members=members,
            observed=observed,
            proxy_url=DEFAULT_URL_PATTERN,
            last=last,
        )

    created, rendered = effect(None)
    assert created is not None
    assert created.create, "no ConfigMap yet: it is created"
    unchanged, again = effect(dict(created.data), rendered)
    assert unchanged is None
    assert again is rendered
    stale, _ = effect({"slots.json": "{}\n"}, rendered)
    assert stale is not None
    assert not stale.create
    assert stale.data == rendered.write.data


def test_proxy_url_override_keeps_the_runpod_host_header() -> None:
    data = render_slots(
        pool="inference",
        spec=SPEC,
        slots=ASSIGNMENTS["one wired"],
        proxy_url="http://fake-runpod.runpod.svc:9000",
    )
    assert 'set $rpp_target "http://fake-runpod.runpod.svc:9000";' in data["servers.conf"]
    assert "proxy_set_header Host abcdefgh123456-80.proxy.runpod.net;" in data["servers.conf"]


@pytest.mark.parametrize("case", list(ASSIGNMENTS), ids=list(ASSIGNMENTS))
def test_real_nginx_accepts_the_static_config_with_every_rendering(
    case: str, tmp_path: Path
) -> None:
    slots = render_slots(pool="inference", spec=SPEC, slots=ASSIGNMENTS[case])
    conf = write_config(tmp_path, slots, public_port=free_port())
    result = nginx_test(conf)
    assert result.returncode == 0, result.stderr


def test_a_restart_after_the_controller_wrote_the_slots_serves_them_not_the_placeholders(
    tmp_path: Path,
) -> None:
    """The init container writes placeholders once; the reloader's later write replaces
    them whole, so a restarted nginx finds one upstream, not two that clash."""
    files = SlotFiles(
        root=tmp_path / "slots", upstream=upstream_name("inference"), status_port=free_port()
    )
    files.write_placeholders()  # nginx started before the controller wrote anything
    slots = render_slots(
        pool="inference", spec=SPEC, slots=ASSIGNMENTS["one wired"], listen_host="127.0.0.1"
    )

    files.write("1", slots)  # the controller's first write, as the reloader puts it
    conf = tmp_path / "nginx.conf"
    conf.write_text(static_config(tmp_path, public_port=free_port()))

    assert files.written_version() == "1"
    result = nginx_test(conf)
    assert result.returncode == 0, result.stderr


def test_the_placeholders_are_the_example_pools_upstream_answering_503(tmp_path: Path) -> None:
    pool = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    name = pool["metadata"]["name"]
    files = SlotFiles(root=tmp_path, upstream=upstream_name(name), status_port=free_port())
    files.write_placeholders()
    upstream = (files.current / "upstream.conf").read_text()
    assert f"upstream {upstream_name(name)} {{" in upstream
    assert f"server 127.0.0.1:{files.status_port};" in upstream
    assert "return 503;" in (files.current / "servers.conf").read_text()


def test_nginx_rejects_a_broken_slots_file(tmp_path: Path) -> None:
    """Guards the guard: nginx -t really reads the included files."""
    slots = render_slots(pool="inference", spec=SPEC, slots={})
    slots["servers.conf"] = "server { listen nonsense }"
    result = nginx_test(write_config(tmp_path, slots, public_port=free_port()))
    assert result.returncode != 0


class _Pod(BaseHTTPRequestHandler):
    """RunPod's proxy in miniature: echoes the Host (and a POST's body), and answers 502
    for pods whose id starts with "dead", as RunPod does for a pod whose service died."""

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def _answer(self, sent: bytes) -> None:
        host = self.headers["Host"]
        self.server.hosts.append(host)  # type: ignore[attr-defined]
        status, body = 200, f"{self.server.pod_id} {host}".encode() + sent  # type: ignore[attr-defined]
        if host.startswith("dead"):
            status, body = 502, b"502 Bad Gateway"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_proxy() -> Iterator[tuple[int, list[str]]]:
    """One local 'RunPod proxy' that answers with the Host it was asked for."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pod)
    server.pod_id = "proxy"  # type: ignore[attr-defined]
    hosts: list[str] = []
    server.hosts = hosts  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hosts
    server.shutdown()
    server.server_close()


def test_traffic_flows_through_wired_slots_and_unwired_slots_answer_503(
    tmp_path: Path, fake_proxy: tuple[int, list[str]]
) -> None:
    proxy_port, _ = fake_proxy
    public = free_port_block(5)
    spec = pool_spec(basePort=public + 1)
    ports = [spec.nginx.base_port + i for i in range(4)]
    slots = {
        ports[0]: SlotTarget("aaaaaaaa111111", "EU-RO-1"),
        ports[2]: SlotTarget("cccccccc333333", "EU-SE-1"),
    }
    data = render_slots(
        pool="inference",
        spec=spec,
        slots=slots,
        proxy_url=f"http://127.0.0.1:{proxy_port}",
        listen_host="127.0.0.1",
    )
    nginx = RunningNginx(write_config(tmp_path, data, public_port=public), public_port=public)
    try:
        seen = Counter(
            httpx.get(f"http://127.0.0.1:{public}/generate", timeout=5).text for _ in range(20)
        )
        assert set(seen) == {
            "proxy aaaaaaaa111111-80.proxy.runpod.net",
            "proxy cccccccc333333-80.proxy.runpod.net",
        }
        assert min(seen.values()) >= 5  # least_conn spreads sequential requests
        assert httpx.get(f"http://127.0.0.1:{ports[1]}/", timeout=5).status_code == 503
        direct = httpx.get(f"http://127.0.0.1:{ports[2]}/metrics", timeout=5)
        assert direct.text == "proxy cccccccc333333-80.proxy.runpod.net"
    finally:
        nginx.stop()


def test_a_post_whose_pod_failed_goes_to_another_slot_which_then_gets_the_traffic(
    tmp_path: Path, fake_proxy: tuple[int, list[str]]
) -> None:
    proxy_port, hosts = fake_proxy
    public = free_port_block(5)
    spec = pool_spec(basePort=public + 1)
    slots = {
        public + 1: SlotTarget("aaaaaaaa111111", "EU-RO-1"),
        public + 2: SlotTarget("deadbeef222222", "EU-RO-1"),
    }
    data = render_slots(
        pool="inference",
        spec=spec,
        slots=slots,
        proxy_url=f"http://127.0.0.1:{proxy_port}",
        listen_host="127.0.0.1",
    )
    nginx = RunningNginx(write_config(tmp_path, data, public_port=public), public_port=public)
    try:
        answers = [
            httpx.post(f"http://127.0.0.1:{public}/generate", content=f"prompt {i}", timeout=5)
            for i in range(20)
        ]
    finally:
        nginx.stop()
    assert [a.status_code for a in answers] == [200] * 20
    # Each POST reached a healthy pod with its body, after at most one try on the dead one.
    good = "proxy aaaaaaaa111111-80.proxy.runpod.net"
    assert [a.text for a in answers] == [f"{good}prompt {i}" for i in range(20)]
    # One failure takes the dead slot out (for 10 s): least_conn no longer favours it.
    assert sum(h.startswith("dead") for h in hosts) < 5
