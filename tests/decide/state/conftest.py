"""The loop's working state (rpp/decide/state/) tested on its own: the status one decide
call builds (WorkingStatus), the conditions written through it and the Events their
changes make (Conditions), and the LoopState the pool steps share. The fixtures give a
stored status as a loop finds it (two members, one condition already raised an hour
ago) and the WorkingStatus and Conditions a loop wraps around it at NOW.
"""

from __future__ import annotations

import pytest

from rpp.decide.state.conditions import Cond, Conditions
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.members import Phase
from rpp.model.status import PoolStatus
from tests.decide.builders import HOUR, NOW, member, pool_status, wired


@pytest.fixture
def stored() -> PoolStatus:
    """The status the cluster stored: a (Ready, wired), b (Warming), and CreateBlocked
    raised an hour before NOW, at generation 1."""
    status = pool_status(
        wired("a", 8081), member("b", Phase.WARMING), observed_generation=1, desired=2
    )
    return status.with_condition(
        type=Cond.CREATE_BLOCKED.value,
        status="True",
        reason="MaxPodsReached",
        message="the pool has 4 pod(s) and limits.maxPods is 4",
        now=NOW - HOUR,
    )


@pytest.fixture
def working(stored: PoolStatus) -> WorkingStatus:
    """This loop's WorkingStatus over the stored status."""
    return WorkingStatus(stored)


@pytest.fixture
def conds(working: WorkingStatus) -> Conditions:
    """This loop's Conditions at NOW, generation 2, writing through `working`."""
    return Conditions(working, now=NOW, generation=2)
