"""Controller: the process that runs observe -> decide -> act for every pool, every loop.

Where it sits: above act and observe, below the commands. `loop` schedules the pools,
`reconcile` runs one pool's observe -> decide -> act -> write, `leader` holds the Lease,
`http_api` serves /healthz, /metrics and /sd, `metrics` keeps the runpod_pool_* series,
and `config` reads the process's environment.
"""
