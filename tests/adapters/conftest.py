"""The adapters (rpp/adapters/): the only I/O; logs, redaction, the clock, pod HTTP."""
