"""The controller's RunPod key rotated while it runs, and a key RunPod refuses.

Every test assembles the process `rpp run` deploys (rpp/controller/assembly.py) from a
`Config`, as `rpp run` reads it, against the simulated world (the fake RunPod accepts only
the keys a test names, answering 401 in RunPod's shape to any other), on virtual time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.redaction import MASK
from rpp.controller.assembly import ControllerCore, assemble
from rpp.controller.config import Config
from rpp.sim.process import API_URL
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import manifest, raised, status, world

OLD = "rpa_OLD_KEY_0001"
NEW = "rpa_NEW_KEY_0002"
POOLS = ("inference", "batch")
T = TypeVar("T")


def virtual(body: Callable[[VirtualClock], Awaitable[T]]) -> T:
    return run_virtual(body)


@asynccontextmanager
async def controller(w: World, *, key_file: Path | None) -> AsyncIterator[ControllerCore]:
    """The process as `rpp run` builds it: the key from the file when one is given (read at
    start, as `load_config` does), else from RUNPOD_API_KEY."""
    config = Config(
        runpod_api_key=OLD if key_file is None else key_file.read_text().strip(),
        runpod_api_key_file=None if key_file is None else str(key_file),
        namespace=w.kube.settings.namespace,
        runpod_api_url=API_URL,
    )
    core = assemble(
        config,
        kube=w.kube,
        clock=w.clock,
        runpod_transport=w.transport,
        pod_client=w.pod_client,
        prometheus_transport=None,
        registry=CollectorRegistry(),
        identity="rotation-test",
    )
    try:
        yield core
    finally:
        await core.close()


async def loop(w: World, core: ControllerCore) -> None:
    w.cloud.tick()
    await core.loop.loop_once()


def not_acting(w: World, pool: str = "inference") -> tuple[str, str, str]:
    cond = status(w, pool).condition("NotActing")
    assert cond is not None
    return cond.status, cond.reason, cond.message


def acting(w: World, pool: str = "inference") -> bool:
    return status(w, pool).members != () and raised(status(w, pool), "NotActing") is None


def everything_written(w: World, *pools: str) -> str:
    """Every pool object and Event as stored: where a leaked key would show."""
    return json.dumps([w.kube.pool(p) for p in pools] + list(w.kube.events), default=str)


def key_file_at(tmp_path: Path, key: str) -> Path:
    path = tmp_path / "RUNPOD_API_KEY"
    path.write_text(key + "\n")
    return path


def test_a_key_file_changed_between_two_loops_is_sent_from_the_next_loop_without_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = key_file_at(tmp_path, OLD)

    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest())
        w.cloud.accepted_keys = frozenset({OLD})
        async with controller(w, key_file=path) as core:
            await loop(w, core)
            assert acting(w)

            path.write_text(NEW + "\n")
            w.cloud.accepted_keys = frozenset({NEW})  # the old key revoked at once
            with caplog.at_level(logging.INFO, logger="rpp.controller"):
                await loop(w, core)

            assert acting(w)
            assert core.redactor.scrub(f"{OLD} {NEW}") == f"{MASK} {MASK}"
        said = [r.getMessage() for r in caplog.records if "changed" in r.getMessage()]
        assert said == [
            f"the RunPod key in RUNPOD_API_KEY_FILE={path} changed: RunPod calls send the new "
            "key from now on, no restart needed"
        ]
        assert w.restarts == 0

    virtual(body)


def test_a_refused_key_from_a_file_stops_every_pool_naming_the_file_and_never_the_key(
    tmp_path: Path,
) -> None:
    path = key_file_at(tmp_path, OLD)

    async def body(clock: VirtualClock) -> None:
        w = world(clock, *(manifest(p) for p in POOLS))
        w.cloud.accepted_keys = frozenset({NEW})
        async with controller(w, key_file=path) as core:
            await loop(w, core)

            for pool in POOLS:
                state, reason, message = not_acting(w, pool)
                assert (state, reason) == ("True", "RunPodKeyRefused")
                assert message.startswith(
                    "RunPod refused the controller's key, from "
                    f"RUNPOD_API_KEY_FILE={path} (401), so its pod list could not be read"
                )
                assert "the file is read again every loop, no restart needed" in message
                stalled = status(w, pool).condition("Stalled")
                assert stalled is not None
                assert (stalled.status, stalled.reason) == ("True", "NotActing")  # at once
            assert OLD not in everything_written(w, *POOLS)

            path.write_text(NEW)  # the operator fixes the Secret
            await loop(w, core)

            assert acting(w)

    virtual(body)


def test_a_refused_key_from_the_environment_says_a_restart_is_needed() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest())
        w.cloud.accepted_keys = frozenset({NEW})
        async with controller(w, key_file=None) as core:
            await loop(w, core)

        state, reason, message = not_acting(w)
        assert (state, reason) == ("True", "RunPodKeyRefused")
        assert "the controller's key, from RUNPOD_API_KEY (401)" in message
        assert "restart the controller" in message
        assert OLD not in everything_written(w, "inference")

    virtual(body)


def test_a_key_file_that_goes_missing_keeps_the_last_good_key_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = key_file_at(tmp_path, OLD)

    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest())
        w.cloud.accepted_keys = frozenset({OLD})
        async with controller(w, key_file=path) as core:
            await loop(w, core)
            path.unlink()
            with caplog.at_level(logging.INFO, logger="rpp.controller"):
                for _ in range(3):
                    await loop(w, core)
                assert acting(w)  # the old key still works

                w.cloud.accepted_keys = frozenset({NEW})  # revoked before the file is back
                await loop(w, core)
                refused = not_acting(w)

                path.write_text(NEW)
                await loop(w, core)

            assert acting(w)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        about_the_file = [m for m in warnings if str(path) in m]
        assert about_the_file == [
            f"RUNPOD_API_KEY_FILE={path}: cannot be read (No such file or directory); mount "
            "the controller's Secret there, or set RUNPOD_API_KEY instead; the controller "
            "keeps sending the key it last read there"
        ]
        assert refused[:2] == ("True", "RunPodKeyRefused")
        assert (
            f"RUNPOD_API_KEY_FILE={path} cannot be used now (cannot be read (No such file or "
            "directory)" in refused[2]
        )
        assert "this is the key last read from it" in refused[2]

    virtual(body)
