"""Controller: the process that runs observe -> decide -> act for every pool, every loop.

Where it sits: above act and observe, below the commands. `loop` schedules the pools
(with `watch` for spec changes, `reconcile_failed` for a pool whose reconcile broke and
`health` for /healthz), `reconcile` runs one pool's observe -> decide -> act -> write,
`status_write` is every status write, `leader` holds the Lease, `http_api` serves
/healthz, /metrics and /sd, `pool_metrics` keeps the runpod_pool_* series, and `config` reads
the process's environment.
"""
