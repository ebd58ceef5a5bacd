"""runpod-pool-controller: keeps a pool of RunPod GPU pods healthy behind an in-cluster nginx.

The package follows one flow per pool and loop: observe (adapters gather facts) ->
decide (pure functions and the member state machines turn spec, status, observations
and `now` into a new status and a list of effects) -> act (an executor applies the
effects according to the pool's mode). docs/ARCHITECTURE.md maps modules to steps.
"""

__version__ = "0.3.0"
