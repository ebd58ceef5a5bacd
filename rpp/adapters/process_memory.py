"""What `rpp run` does to its own memory: smaller read buffers, a collector that runs less
often and skips the start-up objects, free pages given back.

Where it sits: outside observe -> decide -> act. `rpp run` calls `trim_tls_buffers`,
`trim_socket_buffers`, `collect_less_often` and `freeze_startup_objects` once at start
and `release_free_heap` after each loop (rpp/controller/loop.py's `after_loop`); nothing
else does, so the simulator and the tests keep asyncio, the collector and the allocator
as they are.

The collector: a full collection walks every object that can hold references, and the
process's start (the Kubernetes client, pydantic's models, every module and class) is
many of them. Those live as long as the process, so `gc.freeze()` moves them where
collections do not look. At 1,000 members collections stayed near a fifth of a loop's
CPU after it, mostly young ones walking a loop's objects just before their reference
counts freed them, so `collect_less_often` raises the thresholds.

Why: a loop is a burst. At 1,000 members it holds a RunPod listing of 1,000 pods, 2,000
answers from pods, every pool's status being read and written, all at once; then almost
all of it is garbage. glibc's malloc gives freed pages back only from the top of its
heap, so pages freed below a block still in use stay resident; `malloc_trim(0)` hands
every whole free page back (madvise), wherever it is, in a few milliseconds. It does not
reach Python's small objects, which live in pymalloc's 1 MiB arenas: an arena goes back
only when all of it is free (docs/install.md, "What the goals cost").

Where glibc is not the C library (musl, macOS), there is no `malloc_trim` and this does
nothing.
"""

from __future__ import annotations

import asyncio.selector_events
import asyncio.sslproto
import ctypes
import ctypes.util
import gc
import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

TLS_READ_BUFFER = 4 * 1024
"""Bytes asyncio's TLS protocol reads from the socket at once. See `trim_tls_buffers`."""
SOCKET_READ_BUFFER = 16 * 1024
"""Bytes asyncio's plain sockets ask `recv` for at once. See `trim_socket_buffers`."""


COLLECT_AFTER = (50_000, 50, 100)
"""The collector's thresholds in `rpp run` (CPython's: 700, 10, 10). See `collect_less_often`."""


def collect_less_often(thresholds: tuple[int, int, int] = COLLECT_AFTER) -> None:
    """Run the cyclic garbage collector after 50,000 new container objects, not 700.

    A loop at 1,000 members makes hundreds of thousands of container objects (2,000 pod
    answers, their requests and tasks, 50 statuses read and written) and almost all of
    them are freed by their reference counts before the loop ends. At CPython's 700 the
    collector ran hundreds of times a loop and twice walked everything the process holds,
    mostly objects about to be freed anyway: a fifth of the loop's CPU. With these
    thresholds the same fleet took a quarter less CPU per loop and less resident memory
    (benchmarks/results/fleet.json; docs/install.md, "What the goals cost"). Cycles are
    still collected: at most 50,000 allocations later.
    """
    gc.set_threshold(*thresholds)


def freeze_startup_objects() -> None:
    """Collect the start's garbage, then keep what is left out of future collections."""
    gc.collect()
    gc.freeze()


def release_free_heap() -> bool:
    """Return the C heap's free pages to the kernel; False where that is not possible."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        log.debug("no malloc_trim in %s: free heap pages stay with the process", name)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def trim_tls_buffers(size: int = TLS_READ_BUFFER) -> bool:
    """Make asyncio's TLS connections allocate `size` bytes for reads instead of 256 KiB.

    asyncio's `SSLProtocol` (CPython 3.11+) allocates `max_size` bytes, zero-filled, per TLS
    connection, for the encrypted bytes of one read from the socket. The prober keeps two
    TLS connections per pod alive, so at 1,000 pods that is 2,000 x 256 KiB, about half a
    GiB of resident memory doing nothing. A pod's answers are a few KiB, so 4 KiB serves
    them in a read or two; a bigger answer (RunPod's listing) takes more reads of the
    same socket, each a few microseconds, and every TLS record still arrives whole. The
    attribute is private and process-wide, so this is called once, by `rpp run` only, and
    does nothing (returns False) on a Python where it is missing or not the size this
    was written against; tests/adapters/test_pod_http.py pins it on the Python the project runs.
    """
    current = getattr(asyncio.sslproto.SSLProtocol, "max_size", None)
    if not isinstance(current, int) or current < size:
        return False
    asyncio.sslproto.SSLProtocol.max_size = size
    return True


def trim_socket_buffers(size: int = SOCKET_READ_BUFFER) -> bool:
    """Make asyncio's plain TCP connections read `size` bytes at a time, not 256 KiB.

    For a protocol that is not a buffered one (aiohttp's client), asyncio's socket
    transport calls `sock.recv(max_size)`: CPython allocates `max_size` bytes, then
    shrinks the bytes object to what arrived. A pod's answer is a few hundred bytes, so
    each of a sweep's 2,000 reads carves 256 KiB from malloc's heap and gives back all
    but a sliver, which stays where it was cut; at 1,000 members the heap held tens of
    MiB free but resident (benchmarks/results/fleet_memory.json; 13 MiB less resident with
    16 KiB). Bigger answers take more reads. Private and process-wide, like the TLS one:
    `rpp run` only, nothing (False) where the attribute is missing or already smaller.
    """
    transport: Any = getattr(asyncio.selector_events, "_SelectorTransport", None)
    current = getattr(transport, "max_size", None)
    if not isinstance(current, int) or current < size:
        return False
    transport.max_size = size
    return True
