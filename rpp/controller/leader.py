"""Leader election on a coordination.k8s.io Lease, so two replicas can run safely.

Where it sits: around the loop, not in it. `rpp run` starts a `LeaderElector`; the
controller loop (rpp/controller/loop.py) acts only while `is_leader`, and cancels what it
is doing the moment leadership is lost. The standby replica keeps serving /healthz and
/metrics and tries to acquire the Lease every retry period.

The protocol is client-go's (k8s.io/client-go/tools/leaderelection), on the KubeApi
Lease calls:

- The holder writes `holderIdentity` and a fresh `renewTime` every RETRY_PERIOD. Every
  write carries the resourceVersion it read, so two replicas can never both win: the
  loser gets 409 and stays standby.
- A standby never trusts the holder's clock. It notes when it *observed* the Lease
  record change (on its own monotonic clock) and takes over only after the record has
  not changed for the Lease's `leaseDurationSeconds`.
- A holder that cannot renew within RENEW_DEADLINE of its last successful renew
  (counted from when that renew was *sent*) steps down. RENEW_DEADLINE is shorter than
  LEASE_DURATION, so a holder partitioned from the API server stops acting at least
  LEASE_DURATION - RENEW_DEADLINE (5 s) before any standby may start.
- On shutdown the holder releases the Lease (empty holder, 1 s duration), so the
  standby takes over at its next retry instead of waiting out the Lease.

Time: deadlines run on the event loop's clock (virtual in the simulator and in fast
tests); the wall clock (an injected `Clock`) is only written into the Lease for humans.
"""

from __future__ import annotations

import asyncio
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rpp.adapters.clock import UTC, Clock
from rpp.adapters.kube.api import AlreadyExists, Conflict, KubeApi, KubeError
from rpp.adapters.logs import layer_logger

log = layer_logger("rpp.controller")

LEASE_NAME = "runpod-pool-controller"
LEASE_DURATION_S = 15.0
"""How long a standby waits, after the Lease record last changed, before taking over."""
RENEW_DEADLINE_S = 10.0
"""How long a holder keeps acting without a successful renew; must be < LEASE_DURATION_S."""
RETRY_PERIOD_S = 2.0
"""How often the holder renews and a standby tries to acquire."""


@dataclass(frozen=True)
class LeaseTiming:
    """The three client-go durations, checked so a holder always stops before a take-over."""

    lease_duration: float = LEASE_DURATION_S
    renew_deadline: float = RENEW_DEADLINE_S
    retry_period: float = RETRY_PERIOD_S

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "lease timing needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period:g}s, {self.renew_deadline:g}s, {self.lease_duration:g}s"
            )


class _Attempt(enum.Enum):
    HELD = "held"  # we hold the Lease now
    TAKEN = "taken"  # another replica holds it
    FAILED = "failed"  # the API did not answer or refused: try again


def micro_time(clock: Clock) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, UTC."""
    return clock.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires, renews and releases one Lease for one replica."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        identity: str,
        clock: Clock,
        timing: LeaseTiming | None = None,
        name: str = LEASE_NAME,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        if not identity:
            raise ValueError("a leader identity must not be empty")
        self.kube = kube
        self.identity = identity
        self.clock = clock
        self.timing = timing or LeaseTiming()
        self.name = name
        self._on_change = on_change
        self._leading = asyncio.Event()
        self._standby = asyncio.Event()
        self._standby.set()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        if on_change is not None:
            on_change(False)

    def __repr__(self) -> str:
        return f"LeaderElector(identity={self.identity!r}, leading={self.is_leader})"

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    async def wait_leading(self) -> None:
        await self._leading.wait()

    async def wait_lost(self) -> None:
        await self._standby.wait()

    async def run(self) -> None:
        """Acquire, lead until a renew deadline passes, then try again; until cancelled."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                while (await self._try()) is not _Attempt.HELD:
                    await asyncio.sleep(self.timing.retry_period)
                log.info("acquired the leader Lease %s as %s", self.name, self.identity)
                self._set(True)
                renewed_at = loop.time()
                while True:
                    await asyncio.sleep(self.timing.retry_period)
                    sent = await self._renew(renewed_at)
                    if sent is None:
                        break
                    renewed_at = sent
                self._set(False)
        finally:
            self._set(False)

    async def _renew(self, renewed_at: float) -> float | None:
        """Renew before the deadline; the send time of the successful renew, or None."""
        loop = asyncio.get_running_loop()
        deadline = renewed_at + self.timing.renew_deadline
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    sent = loop.time()
                    attempt = await self._try()
                    if attempt is _Attempt.HELD:
                        return sent
                    if attempt is _Attempt.TAKEN:
                        log.warning("the leader Lease %s was taken over; stepping down", self.name)
                        return None
                    await asyncio.sleep(self.timing.retry_period)
        except TimeoutError:
            log.error(
                "could not renew the leader Lease %s within %gs; stepping down so that no two "
                "replicas act at once",
                self.name,
                self.timing.renew_deadline,
            )
            return None

    async def release(self) -> None:
        """Give the Lease up (on shutdown, after `run` stopped), so a standby takes over at once.

        Only a Lease this replica holds is touched; the read-and-replace over its
        resourceVersion never clears a holder that took over in between.
        """
        self._set(False)
        try:
            lease = await self.kube.get_lease(self.name)
            if lease is None or _spec(lease).get("holderIdentity") != self.identity:
                return
            spec = {
                **_spec(lease),
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(self.clock),
            }
            await self.kube.replace_lease(self.name, spec=spec, resource_version=_version(lease))
            log.info("released the leader Lease %s", self.name)
        except KubeError as err:
            log.warning("could not release the leader Lease %s: %s", self.name, err)

    async def _try(self) -> _Attempt:
        """One acquire-or-renew: read the Lease, and write it if it is ours or expired."""
        loop = asyncio.get_running_loop()
        now = micro_time(self.clock)
        try:
            lease = await self.kube.get_lease(self.name)
            if lease is None:
                await self.kube.create_lease(self.name, spec=self._record(None, now))
                return _Attempt.HELD
            spec = _spec(lease)
            seen = (
                spec.get("holderIdentity"),
                spec.get("renewTime"),
                spec.get("leaseDurationSeconds"),
                _version(lease),
            )
            if seen != self._observed:
                self._observed, self._observed_at = seen, loop.time()
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration)
            if holder and holder != self.identity and loop.time() < self._observed_at + duration:
                return _Attempt.TAKEN
            await self.kube.replace_lease(
                self.name, spec=self._record(spec, now), resource_version=_version(lease)
            )
            return _Attempt.HELD
        except (AlreadyExists, Conflict):
            return _Attempt.FAILED  # someone wrote first; the next read says who holds it
        except KubeError as err:
            log.warning("leader Lease %s: %s", self.name, err)
            return _Attempt.FAILED

    def _record(self, old: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
        ours = old is not None and old.get("holderIdentity") == self.identity
        transitions = int((old or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            # Whole seconds in the API; rounded up, so a standby never waits less.
            "leaseDurationSeconds": math.ceil(self.timing.lease_duration),
            "acquireTime": (old or {}).get("acquireTime") if ours else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours or old is None else transitions + 1,
        }

    def _set(self, leading: bool) -> None:
        if leading == self.is_leader:
            return
        if leading:
            self._standby.clear()
            self._leading.set()
        else:
            self._leading.clear()
            self._standby.set()
        if self._on_change is not None:
            self._on_change(leading)


def _spec(lease: Mapping[str, Any]) -> dict[str, Any]:
    return dict(lease.get("spec") or {})


def _version(lease: Mapping[str, Any]) -> str:
    return str((lease.get("metadata") or {}).get("resourceVersion", ""))
