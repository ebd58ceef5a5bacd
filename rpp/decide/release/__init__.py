"""The release of a new image: the canary's bake, then the other pods, in place.

Where it sits: decide, above health (a canary is judged with the health rules' flags)
and beside the ledger. `steps` holds the `bake` and `roll` steps of rpp/decide/pool.py;
`canary` judges the canary's Prometheus values against its peers'; `next_pods` chooses
the canary and the pods that follow it. The release's phase is its machine's
(rpp/machines/release.py); the member-level update and rollback policy is
rpp/machines/rollout.py.
"""
