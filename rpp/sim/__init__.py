"""The simulator: everything fake, so the real controller can run without a cloud.

Where it sits: beside the flow, not in it. The fake RunPod cloud (REST v2, GraphQL notices,
the pod proxy), fake inference pods, a fake Prometheus, an in-memory Kubernetes and a
virtual-time event loop stand in for the outside world; `world.py` wires the real
observe -> decide -> act code to them with only the transports swapped. `rpp simulate`,
`rpp fake-runpod` and the tests use it; no production module imports it (the import-linter
contracts in pyproject.toml enforce that).
"""
