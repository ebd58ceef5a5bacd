"""Where `rpp run`'s memory is: bench_fleet.py --memory's census, taken inside the process.

Not a test. bench_fleet.py starts `rpp run` with this module on its path and a census
file to write; at the steady loops' start (SIGUSR1) tracemalloc begins tracing, and at
their end (SIGUSR2) `write_census` records:

- malloc's heap (glibc's mallinfo2: C allocations, and Python objects over 512 bytes);
- pymalloc's arenas (Python's small objects, mmapped outside malloc's figures), from
  `sys._debugmallocstats`;
- the resident memory per kind of mapping (/proc/self/smaps: files, heap, anonymous);
- what the steady loops allocated and still hold, by source line (tracemalloc, one frame
  unless RPP_BENCH_FRAMES says more);
- the objects the garbage collector tracks, by type, with their shallow size.

`print_census` prints it for people. Tracing slows the process several times over, so
a run with --memory writes no results.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import sys
import tracemalloc
from pathlib import Path
from typing import Any

MIB = 2**20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def start_tracing() -> None:
    tracemalloc.start(int(os.environ.get("RPP_BENCH_FRAMES", "1")))


def write_census(path: str) -> None:
    """Take the census and write it to `path` (whole, or not at all)."""
    body = {
        "kept_since_steady": _traced(),
        "pymalloc": _pymalloc(path + ".pymalloc"),
        "rss_by_mapping": _mappings(),
        "malloc": _malloc(),
        "python_blocks": sys.getallocatedblocks(),
        **_objects(),
    }
    Path(path + ".part").write_text(json.dumps(body))
    os.replace(path + ".part", path)


def _traced() -> list[list[Any]]:
    if not tracemalloc.is_tracing():
        return []
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return [
        [
            " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in stat.traceback),
            stat.count,
            stat.size,
        ]
        for stat in snapshot.statistics("traceback")[:60]
    ]


def _pymalloc(report: str) -> dict[str, int]:
    # Python prints its allocator's figures to file descriptor 2 only.
    saved = os.dup(2)
    with open(report, "w") as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    figures: dict[str, int] = {}
    for line in Path(report).read_text().splitlines():
        key, _, value = line.partition("=")
        value = value.strip().replace(",", "")
        if value.isdigit():
            figures.setdefault(key.strip().lstrip("#").strip(), int(value))
    return figures


def _mappings() -> dict[str, int]:
    resident: collections.Counter[str] = collections.Counter()
    kind = "?"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head) >= 5:
            kind = head[5] if len(head) > 5 else "[anonymous]"
            kind = kind if kind.startswith("[") else "files"
        elif head[0] == "Rss:":
            resident[kind] += int(head[1]) * 1024
    return dict(resident)


def _malloc() -> dict[str, int]:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {name: int(getattr(info, name)) for name, _ in _MallInfo2._fields_}


def _objects() -> dict[str, Any]:
    counts: collections.Counter[str] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        counts[name] += 1
        try:
            sizes[name] += sys.getsizeof(obj)
            attrs = object.__getattribute__(obj, "__dict__")
            sizes[name] += sys.getsizeof(attrs) if type(attrs) is dict else 0
        except Exception:  # an object without a size or a __dict__: counted, not sized
            pass
    return {
        "gc_objects": sum(counts.values()),
        "types": [[n, counts[n], sizes[n]] for n, _ in sizes.most_common(60)],
    }


def print_census(path: str) -> None:
    body = json.loads(Path(path).read_text())
    m = body["malloc"]
    print(
        f"malloc: heap {m['arena'] / MIB:.1f} MiB ({m['uordblks'] / MIB:.1f} in use, "
        f"{m['fordblks'] / MIB:.1f} free), mmapped {m['hblkhd'] / MIB:.1f} MiB; "
        f"{body['python_blocks']:,} Python blocks; {body['gc_objects']:,} tracked objects"
    )
    print(
        "resident by mapping: "
        + ", ".join(f"{k} {v / MIB:.1f} MiB" for k, v in body["rss_by_mapping"].items() if v)
    )
    for key, value in body["pymalloc"].items():
        if "arena" in key.lower() or key.lower().startswith("bytes") or "total" in key.lower():
            print(f"  pymalloc {key}: {value:,}")
    print("allocated during the steady loops and still held, by where (tracemalloc):")
    for where, count, size in body["kept_since_steady"][:40]:
        print(f"  {size / MIB:7.2f} MiB {count:9,d}  {where}")
    print("tracked objects by type (shallow size, with their __dict__):")
    for name, count, size in body["types"][:40]:
        print(f"  {size / MIB:7.2f} MiB {count:9,d}  {name}")
