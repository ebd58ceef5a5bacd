"""RunPod's HTTP proxy names: where a pod's port is reached, and the Host it routes on.

Shared by the prober (observe), the nginx slots (decide) and the proxy emulation (sim),
so all three address a pod the same way. RunPod routes on the host name (Host and SNI),
`{podId}-{port}.proxy.runpod.net`; RUNPOD_PROXY_URL may send the traffic elsewhere (a
local emulation, `rpp fake-runpod`), always with that Host header.
"""

from __future__ import annotations

PROXY_SUFFIX = ".proxy.runpod.net"
DEFAULT_URL_PATTERN = "https://{pod_id}-{port}" + PROXY_SUFFIX


def proxy_host(pod_id: str, port: int) -> str:
    """The host name RunPod's proxy routes on for a pod's HTTP port."""
    return f"{pod_id}-{port}{PROXY_SUFFIX}"
