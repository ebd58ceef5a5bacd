"""Decide (rpp/decide/), unit by unit: pure functions of spec, status, observations and
`now`; no fakes needed, no I/O.

The inputs are built by tests/decide/builders.py (plain functions, importable as
tests.decide.builders); the fixtures below are the ones most tests start from: the
default pool's spec, the fixed moment every test decides at, and an empty LoopState.
"""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.decide.state.loop_state import LoopState
from rpp.model.spec import RunPodPoolSpec
from tests.decide import builders


@pytest.fixture
def spec() -> RunPodPoolSpec:
    """The default pool "web" in Manage (tests/decide/builders.py says its numbers)."""
    return builders.pool_spec()


@pytest.fixture
def now() -> dt.datetime:
    """The moment every decide unit test decides at."""
    return builders.NOW


@pytest.fixture
def loop() -> LoopState:
    """A LoopState of the default pool with an empty status, nothing listed."""
    return builders.loop_state()
