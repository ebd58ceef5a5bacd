"""The one error a bad environment variable raises, shared by the configuration's modules.

Where it sits: before observe -> decide -> act, with rpp/controller/config.py, which
re-exports it, and rpp/controller/namespaces.py, which config.py imports (so the error
cannot live in config.py without an import cycle).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """One bad environment variable; the message is one line, starting with its name."""
