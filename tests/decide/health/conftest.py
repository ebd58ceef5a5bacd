"""rpp/decide/health/: the health rules and the pool-wide judgement, one loop's
observations at a time.
"""
