"""rpp/decide/ledger/: intents, adoption, rebuilds, unreadable pods, other writers.

The ledger's inputs are built with tests/decide/builders.py (the pool "web", its pods
and members at NOW); the few builders below are the ledger's own: the intents a loop
writes down before acting, and this loop's conditions over a status, read back.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.state.conditions import Conditions
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.records import Intent
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, PREFIX

IMAGE = "img:1"  # what tests/decide/builders.py's pods run
NEW_IMAGE = "img:2"  # the image a release asks for


def create_intent(
    name: str, *, at: dt.datetime = NOW, replacement_for: str | None = None
) -> Intent:
    """A create a loop wrote down before acting and never folded."""
    return Intent(action="create", time=at, name=name, replacement_for=replacement_for)


def terminate_intent(pod_id: str) -> Intent:
    """A terminate of the pool's pod `pod_id` written down at NOW."""
    return Intent(action="terminate", time=NOW, name=PREFIX + pod_id, pod=pod_id)


def update_intent(pod_id: str, *, rollback: bool = False) -> Intent:
    """An update to NEW_IMAGE (or a rollback) written down a minute before NOW."""
    return Intent(
        action="update",
        time=NOW - dt.timedelta(minutes=1),
        name=PREFIX + pod_id,
        pod=pod_id,
        image=NEW_IMAGE,
        rollback=rollback,
    )


def conditions(status: PoolStatus | None = None) -> Conditions:
    """This loop's conditions over `status` (an empty one by default)."""
    return Conditions(WorkingStatus(status or PoolStatus()), now=NOW, generation=1)


def condition_of(conds: Conditions, kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of one condition the loop set, or None."""
    found = conds.working.current.condition(kind)
    return None if found is None else (found.status, found.reason, found.message)
