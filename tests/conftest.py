"""Shared pytest fixtures. Keep this file small: fixtures live in tests/fixtures_*.py
and are only imported here so every test module can use them."""

from tests.fixtures_kube import kube, standin, stopwatch
from tests.fixtures_prometheus import prometheus_binary
from tests.fixtures_rehearsal import rehearsal

__all__ = ["kube", "prometheus_binary", "rehearsal", "standin", "stopwatch"]
