"""Health: is a pod degraded, for how long, and is the whole pool degraded at once?

Where it sits: decide, above the loop's state and below everything that acts on a
verdict. `rules` holds the health rules and the pool-wide judgement (pure functions of
thresholds, observations and breach starts); `judgement` feeds them this loop's probes,
Prometheus values and RunPod machine notes and raises the conditions about what they
could not see (the `judge` step of rpp/decide/pool.py).
"""
