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
    proxy = header + "".join(
        f"{line}\n"
        for line in (
            f"proxy_read_timeout {timeout};",
            f"proxy_send_timeout {timeout};",
            "proxy_connect_timeout 10s;",
            "proxy_http_version 1.1;",
            # RunPod's proxy routes on SNI as well as Host; each slot names its pod.
            "proxy_ssl_server_name on;",
            # A reused TLS session can carry one pod's SNI to another pod's host.
            "proxy_ssl_session_reuse off;",
            "proxy_buffering off;",
            "proxy_request_buffering off;",
        )
    )
    wired = [port for port in ports if port in slots]
    upstream_lines = [f"upstream {upstream_name(pool)} {{", "    least_conn;"]
    # max_fails=0: a slot is a local nginx server; pod health is the controller's job.
    if wired:
        upstream_lines += [f"    server 127.0.0.1:{port} max_fails=0;" for port in wired]
    else:
        # nginx refuses an empty upstream; the first slot is unwired and answers 503.
        upstream_lines.append(f"    server 127.0.0.1:{ports[0]} max_fails=0;  # no pod wired")
    upstream_lines.append("}")
    upstream = header + "\n".join(upstream_lines) + "\n"
    blocks = []
    for port in ports:
        target = slots.get(port)
        # Slot ports listen on every interface: Prometheus scrapes each pod through its
        # slot (the /sd/<pool> targets are <service>:<slot port>).
        listen = f"{listen_host}:{port}" if listen_host else str(port)
        lines = ["server {", f"    listen {listen};"]
        if target is None:
            lines += ["    # unwired", "    location / {", "        return 503;", "    }"]
        else:
            host = proxy_host(target.pod_id, spec.port)
            lines += [
                f"    # pod {target.pod_id} in {target.datacenter or 'unknown datacenter'}",
                # Through a variable, so nginx resolves the host per request with the
                # `resolver` of the static config; a literal would be resolved once at
                # start-up, and a pod not yet in DNS would keep nginx from starting.
                f'    set $rpp_target "{target_url(target.pod_id, spec.port, proxy_url)}";',
                "    location / {",
                "        proxy_pass $rpp_target;",
                f"        proxy_set_header Host {host};",
                f"        proxy_ssl_name {host};",
                "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
                "    }",
            ]
        lines.append("}")
        blocks.append("\n".join(lines))
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


def render_for(
    *, pool: str, spec: RunPodPoolSpec, members: Sequence[MemberRecord], proxy_url: str
) -> WriteSlots:
    targets = slot_targets(spec, members)
    data = render_slots(pool=pool, spec=spec, slots=targets, proxy_url=proxy_url)
    return WriteSlots(
        slots=tuple(sorted((port, t.pod_id) for port, t in targets.items())),
        data=tuple(sorted(data.items())),
    )


def slots_effect(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    members: Sequence[MemberRecord],
    observed: Mapping[str, str] | None,
    proxy_url: str,
) -> WriteSlots | None:
    """The write that makes the ConfigMap match the members, or None when it does."""
    write = render_for(pool=pool, spec=spec, members=members, proxy_url=proxy_url)
    if observed is not None and dict(observed) == dict(write.data):
        return None
    if observed is None:
        return WriteSlots(slots=write.slots, data=write.data, create=True)
    return write
