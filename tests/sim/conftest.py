"""The simulator (rpp/sim/): the fake RunPod cloud, its pods, the in-memory Kubernetes, the
invariant checker and the soak.
"""
