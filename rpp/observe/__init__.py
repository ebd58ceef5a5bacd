"""Observe: the first step of each loop, everything decide is given as data.

Where it sits: observe -> decide -> act. Once per loop for every pool, RunPod's pod
listing and machine notices (shared.py); per pool, its observation (pool.py): the slots
ConfigMap, the env Secret (pool_secret.py), probes of its pods (prober.py, metrics
pages parsed by metrics_text.py) and its Prometheus queries (prometheus.py). A read that
fails is data, never an exception; decide says what it means for the pool. The result
is a `rpp.model.observations.PoolObservation`.
"""
