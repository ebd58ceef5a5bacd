"""The RunPod adapter (rpp/adapters/runpod/): REST v2 as the vendored OpenAPI document says
it answers, and the odd answers it really gives.
"""
