"""The forms a text may carry a secret in, for the tests that look for leaks.

A secret can reach a log, a status or an Event as is, JSON-escaped (with or without
ASCII escapes) or URL-encoded; a leak test must look for every one of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote, quote_plus


def spellings(secret: str) -> set[str]:
    """Every form a text may carry `secret` in: as is, JSON-escaped, URL-encoded."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
    }


def leaks(text: str, secrets: Iterable[str]) -> list[str]:
    """The forms of `secrets` that `text` carries (empty: no leak)."""
    return [form for secret in secrets for form in spellings(secret) if form in text]
