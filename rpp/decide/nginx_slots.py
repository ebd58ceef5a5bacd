"""The nginx slots: render the slots ConfigMap from the pool's wired members, read it back.

Where it sits: decide, last of the pool steps ("rewrite the nginx slots"), and observe's
reading of what nginx serves. After every machine and pool order of the loop, the
members' slots are rendered (`slots_effect`) and compared with the ConfigMap read during
observe; only a difference produces one WriteSlots effect. Rendering is pure and
deterministic (same slots, same bytes), so an unchanged pool never rewrites the
ConfigMap and never restarts nginx. `wired_pods` reads a stored ConfigMap back, so a
restarted controller sees what nginx really serves.

Why slots: RunPod's HTTP proxy routes on the Host header (and SNI), so pods cannot share
one nginx upstream. Each pod gets a local server block on its own port that proxies to
its proxy host with that Host; the public server balances (least_conn) across the wired
slot ports. The static config (examples/nginx.yaml) includes the three files built here:

- `proxy.conf`: http-level proxy settings shared by every slot (timeouts, TLS to RunPod).
- `upstream.conf`: the `upstream` the public server proxies to: the wired slot ports.
- `servers.conf`: one server block per slot port; unwired slots answer 503.

Failover (no client request fails that was not in flight on the failing pod): a wired
slot turns its pod's failure (RunPod's 502 or 524, its own 504) into a dropped
connection; the public server, which buffers each request and may resend a POST within
a 2 s window (examples/nginx.yaml), retries it on another slot and counts the failure
(`max_fails=1`), so the failing slot gets no new requests for `fail_timeout`. Every
wired slot is listed again as a backup, so a short outage of every pod never turns into
nginx's "no live upstreams". The controller unwires a failing pod itself (quarantine,
rpp/machines/member.py); this only covers the seconds until it does.

A fourth key, `slots.json`, is the same assignment as data (slot port -> pod id), for
people and for tools; nginx does not read it. Nothing here is secret: no token, no env.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rpp.model.durations import format_duration
from rpp.model.effects import WriteSlots
from rpp.model.members import MemberRecord, Phase
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN as DEFAULT_PROXY_URL
from rpp.model.proxy_hosts import proxy_host
from rpp.model.spec import RunPodPoolSpec

INDEX = "slots.json"
# How nginx takes a failing slot out (upstream.conf): one counted failure, for this long.
MAX_FAILS = 1
FAIL_TIMEOUT = "10s"
# 256 slots listed twice (primary and backup) need 512k on nginx 1.22; 1m leaves room.
ZONE_SIZE = "1m"

# The http-level settings every slot shares; {timeout} is spec.nginx.readTimeout.
_PROXY_CONF = (
    "# Longest silence from a pod, per read (not per request): above its longest time to",
    "# first byte. RunPod's CDN answers 524 after 100 s of silence anyway.",
    "proxy_read_timeout {timeout};",
    "# Longest stall while sending a request to a pod.",
    "proxy_send_timeout {timeout};",
    "# Connecting to RunPod's proxy (from a slot) or to a slot (from the public server).",
    "proxy_connect_timeout 10s;",
    "# HTTP/1.1 to upstreams: chunked answers (streams) pass through.",
    "proxy_http_version 1.1;",
    "# RunPod's proxy routes on SNI as well as Host; each slot names its pod.",
    "proxy_ssl_server_name on;",
    "# A reused TLS session can carry one pod's SNI to another pod's host.",
    "proxy_ssl_session_reuse off;",
    "# Pass each chunk on as it comes (streams): nothing is held back.",
    "proxy_buffering off;",
    "# Slots stream the body on to the pod; the public server buffers it for itself,",
    "# because only a buffered POST can be sent to a second slot.",
    "proxy_request_buffering off;",
)

_UNWIRED = """server {{
    listen {listen};
    # unwired
    location / {{
        return 503;
    }}
}}"""

# A wired slot. The pod's failures never reach the public server as an answer: the slot
# drops the connection instead, which nginx counts against the slot (max_fails) even when
# it is too late to retry, whereas a 502 answer counts only when it is retried. An app's
# own 500, 503 or 404 passes through with its body.
_WIRED = """server {{
    listen {listen};
    # pod {pod} in {datacenter}
    # Resolved per request (the static config's resolver): a pod not yet in DNS cannot
    # keep nginx from starting, as a literal host would.
    set $rpp_target "{url}";
    location / {{
        proxy_pass $rpp_target;
        proxy_set_header Host {host};
        proxy_ssl_name {host};
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        # The pod's failure answers are handled below, never passed on.
        proxy_intercept_errors on;
        # 502 pod unreachable or cut off, 504 read timeout, 524 RunPod's CDN timeout.
        error_page 502 504 524 = @pod_failed;
    }}
    # Close unanswered: the public server counts it against this slot, retries elsewhere.
    location @pod_failed {{
        return 444;
    }}
}}"""


@dataclass(frozen=True)
class SlotTarget:
    """What one wired slot points at."""

    pod_id: str
    datacenter: str | None = None


def slot_ports(spec: RunPodPoolSpec) -> list[int]:
    """Every slot port nginx has, in order: basePort up, slotPorts of them."""
    return [spec.nginx.base_port + i for i in range(spec.nginx.slot_ports)]


def upstream_name(pool: str) -> str:
    """nginx identifiers allow no '-': pool names do, so map them."""
    return "rpp_" + pool.replace("-", "_") + "_slots"


def target_url(pod_id: str, port: int, proxy_url: str = DEFAULT_PROXY_URL) -> str:
    """Where a slot sends traffic: the pod's proxy host, or RUNPOD_PROXY_URL when set."""
    return proxy_url.format(pod_id=pod_id, port=port)


def render_slots(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    slots: Mapping[int, SlotTarget],
    proxy_url: str = DEFAULT_PROXY_URL,
    listen_host: str | None = None,
) -> dict[str, str]:
    """The ConfigMap data for this slot assignment (slot port -> target).

    `listen_host` binds the slot ports to one address (tests use 127.0.0.1); by default
    they listen on every interface of the nginx pod.
    """
    ports = slot_ports(spec)
    unknown = sorted(set(slots) - set(ports))
    if unknown:
        raise ValueError(
            f"slots {unknown} are outside the pool's slot ports {ports[0]}-{ports[-1]}"
        )
    timeout = format_duration(spec.nginx.read_timeout)
    header = f"# Written by runpod-pool-controller for pool {pool}. Do not edit by hand.\n"
    wired = [port for port in ports if port in slots]
    proxy = header + "\n".join(_PROXY_CONF).format(timeout=timeout) + "\n"
    upstream = header + _upstream(upstream_name(pool), wired=wired, first=ports[0]) + "\n"
    blocks = []
    for port in ports:
        # Slot ports listen on every interface: Prometheus scrapes each pod through its
        # slot (the /sd/<pool> targets are <service>:<slot port>).
        listen = f"{listen_host}:{port}" if listen_host else str(port)
        target = slots.get(port)
        if target is None:
            blocks.append(_UNWIRED.format(listen=listen))
        else:
            blocks.append(
                _WIRED.format(
                    listen=listen,
                    pod=target.pod_id,
                    datacenter=target.datacenter or "unknown datacenter",
                    url=target_url(target.pod_id, spec.port, proxy_url),
                    host=proxy_host(target.pod_id, spec.port),
                )
            )
    servers = header + "\n".join(blocks) + "\n"
    index = {str(port): slots[port].pod_id for port in wired}
    return {
        "proxy.conf": proxy,
        "upstream.conf": upstream,
        "servers.conf": servers,
        INDEX: json.dumps(index, sort_keys=True) + "\n",
    }


class SlotsFormatError(ValueError):
    """The slots ConfigMap holds something the controller did not write."""


def wired_pods(data: Mapping[str, str] | None) -> dict[int, str]:
    """The slot assignment a slots ConfigMap holds (slot port -> pod id); {} when empty.

    Used during observe so a restarted controller sees what nginx really serves, even if
    the status write after the last ConfigMap write was lost. An empty ConfigMap (the
    0.2.x chart's) means nothing is wired; content that is not ours is an error the pool
    reports, never silently treated as empty.
    """
    if not data or INDEX not in data:
        return {}
    try:
        raw = json.loads(data[INDEX])
        if not isinstance(raw, dict):
            raise TypeError("not an object")
        return {int(port): str(pod) for port, pod in raw.items()}
    except (ValueError, TypeError) as err:
        raise SlotsFormatError(
            f"{INDEX} in the slots ConfigMap is not a slot index ({err}); it was edited "
            "by hand: delete the key and the controller rewrites it"
        ) from err


# --- the pool step: one write when what nginx serves should change ----------------


def slot_targets(spec: RunPodPoolSpec, members: Sequence[MemberRecord]) -> dict[int, SlotTarget]:
    """Slot port -> pod for every member in a slot that nginx still has."""
    ports = set(slot_ports(spec))
    return {
        m.slot: SlotTarget(m.pod_id, m.datacenter)
        for m in members
        if m.slot is not None and m.slot in ports and m.phase != Phase.GONE
    }


@dataclass(frozen=True)
class RenderedSlots:
    """One render of a pool's slots and what it was rendered from.

    Every loop renders the slots to compare them with the ConfigMap, and they rarely
    change, so the caller (rpp/controller/reconcile.py, per pool) keeps the last one and
    passes it back: a render for the same pool from an equal spec, proxy URL and wired
    members is the render, and is reused. Decide keeps nothing between calls.
    """

    spec: RunPodPoolSpec
    key: tuple[object, ...]  # the pool, proxy URL and wired members, as plain tuples
    write: WriteSlots


def render_for(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    members: Sequence[MemberRecord],
    proxy_url: str,
    last: RenderedSlots | None = None,
) -> RenderedSlots:
    """The slots the members give, reusing `last` when it was rendered from the same."""
    key = (
        pool,
        proxy_url,
        *(
            (m.slot, m.pod_id, m.datacenter)
            for m in members
            if m.slot is not None and m.phase != Phase.GONE
        ),
    )
    # The key first: it is cheap, and a changed member is the common miss.
    if last is not None and last.key == key and last.spec == spec:
        return last
    targets = slot_targets(spec, members)
    data = render_slots(pool=pool, spec=spec, slots=targets, proxy_url=proxy_url)
    write = WriteSlots(
        slots=tuple(sorted((port, t.pod_id) for port, t in targets.items())),
        data=tuple(sorted(data.items())),
    )
    return RenderedSlots(spec, key, write)


def slots_effect(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    members: Sequence[MemberRecord],
    observed: Mapping[str, str] | None,
    proxy_url: str,
    last: RenderedSlots | None = None,
) -> tuple[WriteSlots | None, RenderedSlots]:
    """The write that makes the ConfigMap match the members (None when it does), and
    the render, for the caller to pass back as `last` next loop."""
    rendered = render_for(pool=pool, spec=spec, members=members, proxy_url=proxy_url, last=last)
    write = rendered.write
    if observed is not None and dict(observed) == dict(write.data):
        return None, rendered
    if observed is None:
        return WriteSlots(slots=write.slots, data=write.data, create=True), rendered
    return write, rendered


def _upstream(name: str, *, wired: Sequence[int], first: int) -> str:
    """upstream.conf: the wired slot ports the public server balances over."""
    lines = [
        f"upstream {name} {{",
        "    # Failure marks and connection counts shared by every worker process.",
        f"    zone {name} {ZONE_SIZE};",
        "    # The fewest active requests first: a hung pod holds its requests open, so it",
        "    # is sent few new ones.",
        "    least_conn;",
    ]
    if not wired:
        # nginx refuses an empty upstream; the first slot is unwired and answers 503.
        lines += [
            "    # No pod is wired: the first slot answers 503.",
            f"    server 127.0.0.1:{first};",
        ]
    elif len(wired) == 1:
        lines += [
            "    # One slot: nginx never takes a lone server out, nor retries on it.",
            f"    server 127.0.0.1:{wired[0]};",
        ]
    else:
        lines.append(
            f"    # One counted failure takes a slot out for {FAIL_TIMEOUT}; then one request"
            " tries it again."
        )
        lines += [
            f"    server 127.0.0.1:{port} max_fails={MAX_FAILS} fail_timeout={FAIL_TIMEOUT};"
            for port in wired
        ]
        lines.append(
            "    # When every slot is out, try them anyway rather than answer 502"
            ' "no live upstreams".'
        )
        lines += [f"    server 127.0.0.1:{port} backup max_fails=0;" for port in wired]
    lines.append("}")
    return "\n".join(lines)
