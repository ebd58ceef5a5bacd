"""The release of a new image: the canary's bake, then the other pods, in place.

Where it sits: decide, above health (a canary is judged with the health rules' flags)
and beside the ledger. `steps` holds the `bake` and `roll` steps of rpp/decide/pool.py;
`canary` judges the canary's Prometheus values against its peers'. The member-level
update and rollback policy is the machines' (rpp/machines/rollout.py).
"""
