"""Adapters: the only code that talks to the outside world on decide's behalf.

Where it sits: below observe and act, beside decide and never imported by it. `runpod`
speaks RunPod's REST v2 and GraphQL, `kube` the Kubernetes API (pools, status,
ConfigMaps, Secrets, Events, Leases), and `clock` is the one place that reads time.
Observe and act call them; decide sees only the records they return (rpp.model).
"""
