"""Decide: pure functions of (spec, persisted status, observations, now). No I/O, no clock."""
