"""rpp/decide/state/: the working status, the loop's state, the conditions."""
