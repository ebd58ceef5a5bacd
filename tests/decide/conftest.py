"""Decide (rpp/decide/), unit by unit: pure functions of spec, status, observations and
`now`; no fakes needed, no I/O.
"""
