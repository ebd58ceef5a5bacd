"""Machines: the lifecycle of one pool member, decided with python-statemachine.

Where it sits: decide, below the pool steps (rpp/decide/) and above the model. `member`
is the state machine, `member_step` drives it for one loop, `member_view` and `signals`
are what it reads and writes, and `rollout` is the image update and rollback policy its
update guards follow. Pure: no I/O, no clock.
"""
