"""Model: the plain data every layer shares, and nothing that does anything.

Where it sits: below everything. The pool's spec (what the user asked for, validated),
its persisted status (the controller's only memory), one loop's observations (what
observe saw), the effects decide returns and the results act reports back, timestamps,
durations, RunPod's proxy host names and operations, and the metric names. No module here
does I/O or reads the clock; every other layer may import from here, and nothing here
imports them.
"""
