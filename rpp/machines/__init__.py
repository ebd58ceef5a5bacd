"""Machines: the lifecycle of one pool member and the phases of a release, decided with
python-statemachine.

Where it sits: decide, below the pool steps (rpp/decide/) and above the model. `member`
is the member's state machine, `member_step` drives it for one loop, `member_view` and
`signals` are what it reads and writes, and `rollout` is the image update and rollback
policy its update guards follow. `release` is the release's machine (Canary, Baking,
Rolling, RolledBack, Done), which rpp/decide/release/ drives once a loop. Pure: no I/O,
no clock.
"""
