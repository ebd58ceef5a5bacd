"""A throwaway CA for the tests that probe pods over TLS, verification on.

Behind RunPod's proxy every pod is its own host name, served over TLS. The tests keep that
shape on 127.0.0.1 (rpp/sim/localhttp.py resolves the names); `Certificates` makes a CA
(trustme, a dev dependency, hence here and not in rpp/sim) and a certificate for
`*.proxy.test`, so the prober verifies what it would verify in production.
"""

from __future__ import annotations

import ssl

import trustme

from rpp.sim.localhttp import POD_DOMAIN


class Certificates:
    """A throwaway CA, a server context for `*.proxy.test` and a client context trusting it."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(f"*.{POD_DOMAIN}").configure_cert(self.server)
        self.client = ssl.create_default_context()
        self.ca.configure_trust(self.client)
