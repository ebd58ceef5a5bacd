"""rpp/decide/release/: the canary's bake and the rolling of a new image."""
