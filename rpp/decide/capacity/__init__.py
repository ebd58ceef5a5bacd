"""Capacity: how many pods the pool wants, which one to create where, which to shrink.

Where it sits: decide, above health and the loop's state, below the ledger and the
release. The `size`, `create` and `shrink` steps of rpp/decide/pool.py come here:
`autoscale` (the size), `sizing` (the create a loop wants, the pod a shrink removes),
`surge_first` (a replacement asked, waited for and drained), `safeguards` (the caps and
the create backoff), `placement` and `prices` (where a pod may go and what it bills),
and `unconfirmed` (a create answered 201 that RunPod does not list yet).
"""
