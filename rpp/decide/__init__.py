"""Decide: pure functions of (spec, persisted status, observations, now).

Where it sits: between observe and act. `pool.decide` takes what observe gathered and
returns the new status and an ordered list of effects; the executor (rpp/act) carries the
effects out. Nothing here does I/O, reads the clock or the environment (ruff's banned-api
and an import-linter contract in pyproject.toml forbid it, tests/architecture/test_purity.py
catches the calls they cannot see), so DryRun is the same code as Manage and every rule is
testable without mocks.
"""
