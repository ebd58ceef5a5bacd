"""The loop's working state: what every step of a decision reads and writes.

Where it sits: decide, the floor under every concern. `WorkingStatus` owns the status a
loop builds, `Conditions` writes the pool's conditions through it and turns their
changes into Events, and `LoopState` carries both with the loop's inputs (spec,
observations, `now`) and what the steps add (effects, log lines, transitions). Nothing
here decides anything; it only keeps what the steps above decided.
"""
