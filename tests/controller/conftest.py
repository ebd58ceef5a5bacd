"""The controller process (rpp/controller/): the loop, one pool's reconcile, the Lease, the
HTTP API, config, and what decide hands it.
"""
