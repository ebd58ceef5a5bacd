"""rpp/decide/ledger/: intents, adoption, rebuilds, unreadable pods, other writers."""
