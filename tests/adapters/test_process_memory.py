"""`rpp run` gives the memory a loop freed back to the kernel (rpp/adapters/process_memory.py)."""

from __future__ import annotations

import gc
from pathlib import Path

from rpp.adapters.process_memory import (
    COLLECT_AFTER,
    collect_less_often,
    freeze_startup_objects,
    release_free_heap,
)

MIB = 1024 * 1024


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_heap_pages_freed_between_live_blocks_go_back_to_the_kernel() -> None:
    # 100 MiB of blocks small enough for malloc's heap, then all freed but one in 64:
    # the live ones pin the heap, so free() alone gives nothing back.
    blocks = [bytearray(64 * 1024) for _ in range(1600)]
    kept = blocks[::64]
    del blocks
    before = resident_mib()
    assert release_free_heap()
    after = resident_mib()
    assert before - after > 50, f"resident {before:.0f} MiB -> {after:.0f} MiB"
    assert len(kept) == 25


def test_start_up_objects_are_kept_out_of_later_collections() -> None:
    class Startup:
        pass

    made = [Startup() for _ in range(100)]
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= len(made)
        assert not any(obj is made for gen in range(3) for obj in gc.get_objects(gen))
    finally:
        gc.unfreeze()


def test_the_collector_runs_less_often_but_still_frees_cycles() -> None:
    before = gc.get_threshold()
    runs = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        collect_less_often()
        assert gc.get_threshold() == COLLECT_AFTER

        class Node:
            other: Node | None = None

        for _ in range(3 * COLLECT_AFTER[0]):  # garbage only the collector can free
            a, b = Node(), Node()
            a.other, b.other = b, a
        collected = len(runs)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*before)
    # About one young collection per 50,000 new objects (two per pair): not thousands.
    assert 3 <= collected <= 20
