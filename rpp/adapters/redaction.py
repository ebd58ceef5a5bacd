"""Secret values cut out of every text the controller writes: logs, status, Events, metrics.

Where it sits: at the controller's way out. A text can carry a secret whatever its
source: RunPod's refusal detail quoting back the env it was sent (issue 15: it put
`METRICS_TOKEN=...` and `HF_TOKEN=...` into the log, status.history, UpdateFailed and an
Event), an exception's message, a probe error. Making every source careful is not
enough, so every sink scrubs, with one `Redactor` the process shares:

- the log: `RedactingFilter` on the process's handler rewrites each record's message,
  traceback and fields before any formatter sees them, and cuts a message past
  LOG_LIMIT characters, saying how much was cut;
- status and Events: rpp/adapters/kube/redacting.py wraps the Kubernetes adapter, so a
  status write scrubs its human texts (messages, details, errors; never the ids,
  names and images the pool's memory needs) and an Event its message;
- /metrics: the controller's HTTP API scrubs the exposition text.

What is secret: the RunPod API key (given at start, and each key rotated in since: the
old ones stay secret, as a log line may still quote one), and every value of each pool's
env Secret (the metrics token is one), remembered per pool by the reconciler each
loop, with the values the pool's pods still carry for those keys (a rotated secret's
old value stays secret). A value shorter than MIN_LENGTH is not scrubbed: "1", "true"
or "8080" would cut every text to pieces and are no secret; nor is a value the pool's
own object already shows (its name, a text of its spec: an image tag, a GPU type), which
`kubectl get rpp` prints anyway. Each value is also found in the forms a text may carry
it in: JSON-escaped (an echoed request body) and URL-encoded (a probe URL).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from rpp.model.documents import clip

MIN_LENGTH = 6
LOG_LIMIT = 8_000  # characters of one log message; more is cut, saying how much
MASK = "[redacted]"
TEXTS_KEPT = 16_384
"""Status texts remembered with their scrubbed form. A pool's status repeats its texts
loop after loop (history, conditions, messages); scrubbing each with the pattern of every
pool's secrets was most of a status write's CPU at 50 pools."""


def _forms(value: str) -> set[str]:
    """The spellings of one secret a text may hold."""
    forms = {value, quote(value, safe=""), quote_plus(value)}
    forms.add(json.dumps(value)[1:-1])
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    return {f for f in forms if f}


class Redactor:
    """The process's secrets and the one pattern that finds any of them in a text."""

    def __init__(self, *, always: Iterable[str] = ()) -> None:
        self._always = tuple(v for v in always if v)
        self._owned: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None
        self._scrubbed: dict[str, str] = {}
        self._rebuild()

    def keep_secret(self, value: str) -> None:
        """One more secret for the life of the process (a rotated RunPod key), beside
        those given at start, which stay secret too."""
        if not value or value in self._always:
            return
        with self._lock:
            self._always = (*self._always, value)
            self._rebuild()

    def remember(self, owner: str, values: Iterable[str], *, public: Iterable[str] = ()) -> None:
        """`owner`'s secrets (a pool's env values) from now on, replacing the last set.

        A value found in one of the `public` texts (the pool's name and spec) is not
        secret: the pool's own object shows it to anyone who may read the pool.
        """
        shown = tuple(public)
        kept = frozenset(
            v
            for v in values
            if isinstance(v, str) and len(v) >= MIN_LENGTH and not any(v in t for t in shown)
        )
        if self._owned.get(owner) == kept:
            return
        with self._lock:
            self._owned[owner] = kept
            self._rebuild()

    def _rebuild(self) -> None:
        secrets = set(self._always)
        for values in self._owned.values():
            secrets |= values
        forms = {form for secret in secrets for form in _forms(secret)}
        # Longest first, so a secret that contains another is cut whole.
        ordered = sorted(forms, key=lambda f: (-len(f), f))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._scrubbed = {}  # scrubbed with the old secrets: a new one may be in them

    def scrub(self, text: str) -> str:
        """`text` with every secret replaced by [redacted]."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(MASK, text)

    def scrub_texts(self, data: Any, *, fields: frozenset[str]) -> Any:
        """A JSON value with the strings under `fields` (at any depth) scrubbed; the
        very objects given wherever nothing was cut, so a status without secrets is
        not copied."""
        if self._pattern is None:
            return data
        return _walk(data, fields=fields, scrub=self._scrub_remembered, inside=False)

    def _scrub_remembered(self, text: str) -> str:
        scrubbed = self._scrubbed.get(text)
        if scrubbed is None:
            scrubbed = self.scrub(text)
            known = self._scrubbed
            if len(known) >= TEXTS_KEPT:
                known.clear()
            known[text] = scrubbed
        return scrubbed


_SCALARS = frozenset({int, float, bool, type(None)})


def _walk(data: Any, *, fields: frozenset[str], scrub: Callable[[str], str], inside: bool) -> Any:
    # Exact types first: the status is plain JSON, and an ABC check per value was half
    # of the walk's cost.
    kind = type(data)
    if kind is str:
        return scrub(data) if inside else data
    if kind in _SCALARS:
        return data
    if kind is dict or (kind is not list and kind is not tuple and isinstance(data, Mapping)):
        changed: dict[Any, Any] | None = None
        for key, value in data.items():
            new = _walk(value, fields=fields, scrub=scrub, inside=inside or key in fields)
            if new is not value:
                if changed is None:
                    changed = dict(data)
                changed[key] = new
        return data if changed is None else changed
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for i, item in enumerate(data):
            new = _walk(item, fields=fields, scrub=scrub, inside=inside)
            if new is not item:
                if items is None:
                    items = list(data)
                items[i] = new
        return data if items is None else items
    if isinstance(data, str):
        return scrub(data) if inside else data
    return data


class RedactingFilter(logging.Filter):
    """Scrubs and bounds each record before any formatter sees it (put it on a handler)."""

    def __init__(self, redactor: Redactor, *, limit: int = LOG_LIMIT) -> None:
        super().__init__()
        self.redactor = redactor
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        scrub = self.redactor.scrub
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the record
            message = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = clip(scrub(message), self.limit), None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = clip(scrub(text), 4 * self.limit), None
        elif record.exc_text:
            record.exc_text = clip(scrub(record.exc_text), 4 * self.limit)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        for key in ("pool", "pod", "effect", "outcome"):
            value = getattr(record, key, None)
            if isinstance(value, str):
                setattr(record, key, scrub(value))
        return True
