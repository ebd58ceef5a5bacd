"""Observe: the adapters that gather one loop's facts about pods (probes, metrics pages,
Prometheus queries) and hand them to decide as `rpp.model.observations` records."""
