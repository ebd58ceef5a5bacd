"""The RunPod adapter: REST v2 client, outcome classification and candidate creation.

This package is observe's and act's only door to RunPod. `client` speaks HTTP (httpx,
tenacity), `outcomes` turns every answer into a typed outcome, `wire`, `catalog` and
`notices` map RunPod's JSON into plain records, and `placement` picks the GPU type and
datacenter a new pod is created on. Decision code never imports this package; it sees
only the records in `rpp.model.observations` and the `PlacementResult` the executor hands back.
"""
