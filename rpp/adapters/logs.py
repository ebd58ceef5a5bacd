"""Structured logs: one logger per layer, and the pool, pod, effect and outcome as fields.

Where it sits: beside the other adapters, as the process's way out to its log. The
layers that do I/O log through `layer_logger` (rpp.controller, rpp.act, rpp.observe,
rpp.adapters.runpod, rpp.commands); decide and the machines never log, they return
their notes as values. `rpp run` installs one of the two formatters here
(LOG_FORMAT, rpp/controller/config.py).

The fields are LogRecord attributes, never text in the message, so a search by pool or
pod is a query, not a grep:
- `pool`: the controller binds it for the whole of one pool's reconcile
  (`pool_context`), so every record made inside it carries the pool, down to the RunPod
  client's retries and the prober, without passing the name through every call;
- `pod`, `effect` (the action: create, terminate, update, ...) and `outcome` (how an
  effect or a RunPod call ended) are given where they are known: `extra=fields(...)`.

In JSON (one object per line) they are keys beside time, level, logger and message; in
text they follow the message as `key=value`. Values are names, ids and enum values:
never a secret (the RunPod key, the metrics token and pod env never reach a log), and
the process's handler scrubs every record anyway (`configure_logging`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from rpp.adapters.redaction import RedactingFilter, Redactor

FIELDS = ("pool", "pod", "effect", "outcome")
"""The structured fields, in the order the formatters write them."""

_pool: ContextVar[str | None] = ContextVar("rpp_log_pool", default=None)


@contextlib.contextmanager
def pool_context(pool: str) -> Iterator[None]:
    """Every record made inside (in this task and the tasks it starts) carries `pool`."""
    token = _pool.set(pool)
    try:
        yield
    finally:
        _pool.reset(token)


def fields(
    *,
    pool: str | None = None,
    pod: str | None = None,
    effect: str | None = None,
    outcome: str | None = None,
) -> dict[str, str]:
    """`extra=` for a log call: the fields that are known, and only those."""
    given = {"pool": pool, "pod": pod, "effect": effect, "outcome": outcome}
    return {key: str(value) for key, value in given.items() if value is not None}


class _PoolFromContext(logging.Filter):
    """Stamps the bound pool on records that do not name one themselves."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "pool", None) is None:
            pool = _pool.get()
            if pool is not None:
                record.pool = pool
        return True


_FROM_CONTEXT = _PoolFromContext()


def layer_logger(name: str) -> logging.Logger:
    """The logger of one layer (`rpp.controller`, `rpp.act`...), stamping the bound pool.

    The filter sits on the logger, not on a handler, so every handler sees the field:
    the process's own and a test's capture alike.
    """
    logger = logging.getLogger(name)
    if _FROM_CONTEXT not in logger.filters:
        logger.addFilter(_FROM_CONTEXT)
    return logger


def _values(record: logging.LogRecord) -> Iterator[tuple[str, str]]:
    for key in FIELDS:
        value = getattr(record, key, None)
        if value is not None:
            yield key, str(value)


class JsonFormatter(logging.Formatter):
    """LOG_FORMAT=json: one JSON object per line (time, level, logger, message, fields)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_values(record))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:  # set, already scrubbed, by the RedactingFilter
            entry["exception"] = record.exc_text
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    """LOG_FORMAT=text: `time LEVEL logger: message key=value ...`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        pairs = " ".join(f"{key}={_quoted(value)}" for key, value in _values(record))
        return f"{line} {pairs}" if pairs else line


def _quoted(value: str) -> str:
    return (
        json.dumps(value) if (not value or any(c.isspace() or c in '"=' for c in value)) else value
    )


def configure_logging(level: str, fmt: str, *, redactor: Redactor | None = None) -> None:
    """The process's one handler: stderr, in the format LOG_FORMAT names, with every
    record scrubbed of the process's secrets and cut short (rpp/adapters/redaction.py)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RedactingFilter(redactor or Redactor()))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    # One line per probe request is noise, even at INFO.
    for noisy in ("httpx", "httpcore", "kubernetes", "aiohttp", "uvicorn.error"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
