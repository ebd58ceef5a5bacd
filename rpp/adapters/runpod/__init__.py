"""The RunPod adapter: the REST v2 client and everything it reads or classifies.

This package is observe's and act's only door to RunPod. `client` speaks HTTP (httpx,
with tenacity retries from `retrying`), `answers` classifies every answer into a
`CallOutcome` and its typed error, `wire`, `catalog` and `notices` map RunPod's JSON into
plain records, and `call_metrics` counts the calls. Decision code never imports this
package: it sees only the records in `rpp.model.observations`, and act turns what the
client says into `EffectResult`s (rpp/model/results.py).
"""
