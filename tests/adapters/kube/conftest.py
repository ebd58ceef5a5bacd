"""The Kubernetes adapter (rpp/adapters/kube/) against the stand-in and a real API server's
rules.
"""
