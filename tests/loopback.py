"""Pod host names that lead to this machine: a resolver and a throwaway CA for the tests.

Behind RunPod's proxy every pod is its own host name (`{podId}-{port}.proxy.runpod.net`),
served over TLS. The tests keep that shape on 127.0.0.1: `Loopback` resolves every name
to 127.0.0.1 for the prober's transport (aiohttp's resolver interface), and `Certificates`
makes a CA (trustme) and a certificate for `*.proxy.test`, so verification stays on.
"""

from __future__ import annotations

import socket
import ssl

import trustme
from aiohttp.abc import AbstractResolver, ResolveResult

POD_DOMAIN = "proxy.test"


class Loopback(AbstractResolver):
    """Every name resolves to 127.0.0.1, as if each pod's proxy host pointed here."""

    def __init__(self) -> None:
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass


class Certificates:
    """A throwaway CA, a server context for `*.proxy.test` and a client context trusting it."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(f"*.{POD_DOMAIN}").configure_cert(self.server)
        self.client = ssl.create_default_context()
        self.ca.configure_trust(self.client)


def pod_pattern(scheme: str, port: int) -> str:
    """The prober's URL pattern: each pod its own host name, all on `port` here."""
    return f"{scheme}://{{pod_id}}-{{port}}.{POD_DOMAIN}:{port}"
