"""Act: the only code that carries effects out (RunPod, Kubernetes).

Where it sits: after decide. The executor applies decide's effects by mode (Manage acts,
DryRun plans, Observe drops), re-reads a pod before it deletes or updates it, and reports
each effect's result back for decide/fold.py to write into the status. It decides
nothing and imports nothing from decide (an import-linter contract in pyproject.toml):
what it needs of a rule decide also applies is in the model (rpp/model/pod_ownership.py,
rpp/model/candidates.py).
"""
