"""The work a fake inference pod does for its clients, and the log of every piece of it.

Where it sits: outside observe -> decide -> act, in the fake world the controller and
nginx serve. rpp/sim/inference.py is the pod's HTTP service (health, metrics, knobs);
this module is what its app paths do, shaped like inference traffic:

- `POST /generate` (or GET, and `/`): a JSON body is read whole, the answer comes after
  the request's own `seconds` (the body's field; else the pod's latency) as one JSON
  object naming the pod, the request id and the prompt's size, so a client can check
  that its body arrived whole, even when nginx sent it to a second pod;
- `POST /stream`: the headers at once (as Starlette's streaming answers do), then one
  server-sent event every `chunk_seconds` (0.5 s) for `seconds` (20 s), then
  `data: [DONE]`, chunked.

How work fails, when the pod's service mode says so (`ServiceMode`, turned by the pod's
knobs): before the answer's headers a failure raises `WorkFailed` and the pod answers
502, as RunPod's proxy does when a service breaks; after them (a stream) `StreamCut`
ends the chunks and the connection is cut before the stream's end. A hang stalls the
work until a knob turns again; the proxy's CDN limit ends it (524, or a cut stream).
A mode change reaches the work in flight at once, as a crashing process takes its
requests with it.

`WorkLog` records each request that reached an app path (work started) with its
`X-Request-Id`, pod, start and end (epoch seconds, from the injected clock) and outcome:
a serving harness joins it with what clients saw, to count work started twice.
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass

from rpp.adapters.clock import Clock
from rpp.sim.asgi_io import Reply, Request, StreamCut

STREAM_PATH = "/stream"
CHUNK_S = 0.5
STREAM_S = 20.0
WORK_LOG_SIZE = 200_000  # records kept; ~60 minutes of a 50 req/s serving benchmark
MAX_WORK_S = 3600.0  # a request's own `seconds` is capped: the fake never works longer


class ServiceMode(enum.Enum):
    """How the pod's service treats requests (new ones and those in flight)."""

    HEALTHY = "healthy"
    DIES = "dies"  # nothing answers: the proxy says 502 at once
    FAILS = "fails"  # each request fails `fail_after_s` into it
    HANGS = "hangs"  # nothing answers until the mode changes


class WorkFailed(Exception):
    """The pod's service failed before answering: RunPod's proxy answers 502."""


@dataclass
class WorkRecord:
    """One request that reached the pod's app: its work started."""

    request_id: str | None
    pod_id: str
    kind: str  # "generate" or "stream"
    started: float
    ended: float | None = None
    outcome: str = "running"  # ok, failed, cut, client-gone, running
    body_bytes: int = 0


class WorkLog:
    """Every piece of work every pod started, newest last, bounded."""

    def __init__(self, size: int = WORK_LOG_SIZE) -> None:
        self._records: deque[WorkRecord] = deque(maxlen=size)

    def start(self, record: WorkRecord) -> WorkRecord:
        self._records.append(record)
        return record

    def records(self) -> list[WorkRecord]:
        return list(self._records)

    def as_json(self) -> list[dict[str, object]]:
        return [asdict(r) for r in self._records]

    def clear(self) -> None:
        self._records.clear()


@dataclass(frozen=True)
class WorkOrder:
    """What one app request asks for, read from its method, path and body."""

    kind: str
    seconds: float
    chunk_seconds: float
    prompt_bytes: int


def read_order(request: Request, *, default_s: float) -> WorkOrder:
    """The work a request asks for; a body that is not a JSON object asks for defaults."""
    stream = request.path == STREAM_PATH
    fields: dict[str, object] = {}
    if request.body:
        try:
            parsed = json.loads(request.body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            fields = parsed
    seconds = _number(fields.get("seconds"), STREAM_S if stream else default_s)
    chunk = _number(fields.get("chunk_seconds"), CHUNK_S) or CHUNK_S
    prompt = fields.get("prompt")
    return WorkOrder(
        kind="stream" if stream else "generate",
        seconds=min(seconds, MAX_WORK_S),
        chunk_seconds=chunk,
        prompt_bytes=len(prompt.encode()) if isinstance(prompt, str) else 0,
    )


def _number(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return default
    return float(value)


class Work:
    """One request's work on one pod, abortable by the pod's mode changes.

    `mode` is read afresh whenever the work waits, and `wake` (called by the pod on every
    knob turn) ends any wait early, so the work reacts to a change at once.
    """

    def __init__(
        self,
        *,
        record: WorkRecord,
        mode: Callable[[], tuple[ServiceMode, float]],
        clock: Clock,
    ) -> None:
        self.record = record
        self._mode = mode
        self._clock = clock
        self._waiter: asyncio.Future[bool] | None = None
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()

    def wake(self) -> None:
        """A knob turned: end the current wait (safe from any thread)."""
        waiter = self._waiter
        if waiter is not None:
            self._loop.call_soon_threadsafe(_finish, waiter)

    def finish(self, outcome: str) -> None:
        self.record.outcome = outcome
        self.record.ended = self._clock.now().timestamp()

    async def run_for(self, seconds: float, *, failure: type[Exception]) -> None:
        """Work `seconds` of loop time, unless the mode fails it first (raises `failure`)."""
        until = self._loop.time() + seconds
        while True:
            mode, fail_after_s = self._mode()
            now = self._loop.time()
            if mode is ServiceMode.DIES:
                raise failure("the pod's service died")
            if mode is ServiceMode.FAILS:
                # Every request fails this far into it, however short: it never finishes.
                fails_at = self._started + fail_after_s
                if now >= fails_at:
                    raise failure(f"the pod's service failed {fail_after_s:g}s into the request")
                await self._wait(fails_at - now)
                continue
            if mode is ServiceMode.HANGS:
                await self._wait(None)
                continue
            if now >= until or await self._wait(until - now):
                return

    async def _wait(self, seconds: float | None) -> bool:
        """True when `seconds` passed, False when a knob turned first."""
        waiter: asyncio.Future[bool] = self._loop.create_future()
        self._waiter = waiter
        # A timer that ends the wait, not a timeout around it: every app request and
        # probe of the simulation waits here, and a timeout scope was thrice the cost.
        timer = None if seconds is None else self._loop.call_later(seconds, _end, waiter, True)
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def answer(work: Work, order: WorkOrder, pod_id: str) -> Reply:
    """The whole answer to a finished `generate` request."""
    body = {
        "output": "ok",
        "pod": pod_id,
        "request_id": work.record.request_id,
        "prompt_bytes": order.prompt_bytes,
    }
    return Reply(
        200,
        json.dumps(body).encode() + b"\n",
        content_type="application/json",
        headers=(("x-pod", pod_id),),
    )


async def stream_events(
    work: Work, order: WorkOrder, *, done: Callable[[str], None]
) -> AsyncIterator[bytes]:
    """A stream's events, one per `chunk_seconds`; `done` gets its outcome at the end."""
    count = max(1, round(order.seconds / order.chunk_seconds))
    outcome = "client-gone"  # the client (nginx) went away and stopped reading
    try:
        for index in range(count):
            await work.run_for(order.chunk_seconds, failure=StreamCut)
            yield f"data: {index}\n\n".encode()
        yield b"data: [DONE]\n\n"
        outcome = "ok"
    except StreamCut:
        outcome = "cut"
        raise
    finally:
        done(outcome)


def wake_all(works: Iterable[Work]) -> None:
    for work in list(works):
        work.wake()


def _finish(waiter: asyncio.Future[bool]) -> None:
    _end(waiter, False)


def _end(waiter: asyncio.Future[bool], elapsed: bool) -> None:
    if not waiter.done():
        waiter.set_result(elapsed)
