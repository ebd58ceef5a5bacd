"""Reading a file a person names on the command line, never more of it than we would keep.

Where it sits: an adapter (I/O) for the commands that read a user's YAML, `rpp validate`,
`rpp simulate --scenario` and `rpp fake-runpod --scenario`; rpp/model/documents.py turns
the bytes into documents within its limits. Reading stops one byte past the size limit,
so a 10 GB file or /dev/zero costs no more memory than a file just over the limit.
Every failure is `UnreadableFile`, whose message is one line beginning with the name.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

from rpp.model.documents import LIMITS, DocumentError, Limits, parse_documents, too_large

STDIN = "-"


class UnreadableFile(ValueError):
    """A file that could not be read or is not YAML within the limits: `NAME: why`."""


def _read_at_most(stream: BinaryIO, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_bytes(name: str | Path, *, limits: Limits = LIMITS) -> bytes:
    """The file's bytes (stdin for "-"); UnreadableFile when it cannot be read or is too large."""
    if str(name) == STDIN:
        data = _read_at_most(sys.stdin.buffer, limits.max_bytes)
        if len(data) > limits.max_bytes:
            raise UnreadableFile(f"{name}: {too_large(None, limits=limits)}")
        return data
    try:
        with open(name, "rb") as stream:
            info = os.fstat(stream.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limits.max_bytes:
                raise UnreadableFile(f"{name}: {too_large(info.st_size, limits=limits)}")
            data = _read_at_most(stream, limits.max_bytes)
    except OSError as error:
        raise UnreadableFile(f"{name}: cannot read: {error.strerror or error}") from None
    if len(data) > limits.max_bytes:  # a pipe, a device: no size to ask for
        raise UnreadableFile(f"{name}: {too_large(None, limits=limits)}")
    return data


def read_documents(name: str | Path, *, limits: Limits = LIMITS) -> list[Any]:
    """The file's non-empty YAML documents; UnreadableFile with one line otherwise."""
    data = read_bytes(name, limits=limits)
    try:
        return parse_documents(data, limits=limits)
    except DocumentError as error:
        raise UnreadableFile(f"{name}: {error}") from None
