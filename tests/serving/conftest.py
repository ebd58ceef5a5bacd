"""The serving path through a real nginx: clients keep being served while pods die, hang or
roll.
"""
