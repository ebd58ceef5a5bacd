"""The member state machine (rpp/machines/): transitions, guards and the update policy, one
member at a time.
"""
