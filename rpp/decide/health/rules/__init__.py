"""The health rules, one file each, every one a `HealthRule` (rpp/decide/health/rule.py).

Where it sits: decide, in the health concern, above the interface and below the
registry (rpp/decide/health/registry.py), which lists them in the order they are
judged and reported. A file holds one rule's whole logic: its spec section, its limits,
its check and the data it needs; nothing else in decide names a rule's specifics.
"""
