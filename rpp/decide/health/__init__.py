"""Health: is a pod degraded, for how long, and is the whole pool degraded at once?

Where it sits: decide, above the loop's state and below everything that acts on a
verdict. From the bottom up: `rule` is what every health rule is (one interface);
`rules/` holds the rules, one file each; `registry` lists them in order (the one
place that does); `pool_wide` applies the active rules to each pod and judges the pool
as a whole (pure functions of the rules, observations and breach starts); `judgement`
feeds them this loop's probes, Prometheus values and RunPod machine notes and raises
the conditions about what they could not see (the `judge` step of rpp/decide/pool.py).
"""
