"""Observe (rpp/observe/): the prober, the metrics pages, Prometheus queries, as real
servers on 127.0.0.1 answer them.
"""
