"""Inference-shaped client traffic against nginx's public port, open loop, bounded.

Kinds (the defaults are the serving benchmark's mix, about 41 requests a second):

- `post`: POST /generate with a JSON body, `post_rate` a second, each asking for
  `post_s` (0.2 s) of work; ok only if the answer is 200 and names the prompt's size,
  so a body that arrived cut (or not at all, on a retry) fails.
- `get`: GET /generate, `get_rate` a second (the pod answers at once).
- `stream`: `streams` workers, each running POST /stream of `stream_s` (20 s, an event
  every 0.5 s) one after another; ok only with every event and the final [DONE].
- `long`: one stream of `long_s` (35 s, over 30 s) started 1 s in.

Every request carries a unique X-Request-Id, which the fake pods log with the work they
start (GET /_fake/work): the analysis joins the two. Each client connection carries one
request, as nginx's public server allows (keepalive_timeout 0). New requests stop after
`duration`; the ones in flight finish (streams included), bounded by `deadline_s`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

CHUNK_S = 0.5
PROMPT = "Write a haiku about retries."


@dataclass
class Record:
    """What one client saw of one request."""

    rid: str
    kind: str
    sent: float  # epoch seconds
    ended: float = 0.0
    status: int | None = None
    ok: bool = False
    error: str | None = None
    pod: str | None = None  # the pod that answered (its X-Pod header)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Mix:
    """How much of each kind, for how long."""

    duration: float = 40.0
    post_rate: float = 30.0
    post_s: float = 0.2
    get_rate: float = 10.0
    streams: int = 5
    stream_s: float = 20.0
    long_s: float = 35.0
    deadline_s: float = 120.0  # nothing waits longer than this after the start


@dataclass
class Load:
    """One run of the mix against `base` (http://127.0.0.1:PORT)."""

    base: str
    mix: Mix
    records: list[Record] = field(default_factory=list)
    started: float = 0.0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def run(self) -> list[Record]:
        # One request per connection: nginx closes each after its answer anyway.
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            self.started = time.time()
            jobs = [
                self._tick(self.mix.post_rate, lambda: self._post(session)),
                self._tick(self.mix.get_rate, lambda: self._get(session)),
                *(self._streams(session, worker) for worker in range(self.mix.streams)),
            ]
            if self.mix.long_s:
                jobs.append(self._long(session))
            async with asyncio.timeout(self.mix.deadline_s):
                await asyncio.gather(*jobs)
        return self.records

    def _left(self) -> float:
        return self.mix.duration - (time.time() - self.started)

    def _rid(self, kind: str) -> str:
        return f"{kind}-{next(self._ids):06d}"

    async def _tick(self, rate: float, send: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if rate <= 0:
            return
        pending: set[asyncio.Task[None]] = set()
        for n in itertools.count():
            at = self.started + n / rate
            if at - self.started >= self.mix.duration:
                break
            await asyncio.sleep(max(0.0, at - time.time()))
            task = asyncio.create_task(send())
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.gather(*pending)

    async def _post(self, session: aiohttp.ClientSession) -> None:
        body = {"prompt": PROMPT, "seconds": self.mix.post_s}
        await self._whole(session, "post", "POST", body)

    async def _get(self, session: aiohttp.ClientSession) -> None:
        await self._whole(session, "get", "GET", None)

    async def _whole(
        self, session: aiohttp.ClientSession, kind: str, method: str, body: Any
    ) -> None:
        record = Record(rid=self._rid(kind), kind=kind, sent=time.time())
        self.records.append(record)
        try:
            async with session.request(
                method,
                self.base + "/generate",
                json=body,
                headers={"X-Request-Id": record.rid},
            ) as answer:
                text = await answer.text()
                record.status, record.pod = answer.status, answer.headers.get("X-Pod")
                record.ok = answer.status == 200 and _echoes(text, record.rid, body)
                if not record.ok:
                    record.error = f"HTTP {answer.status}: {text[:80]!r}"
        except (aiohttp.ClientError, TimeoutError) as error:
            record.error = _describe(error)
        record.ended = time.time()

    async def _streams(self, session: aiohttp.ClientSession, worker: int) -> None:
        await asyncio.sleep(worker * 0.4)  # staggered, so they do not all end together
        while self._left() > 0:
            if not await self._stream(session, "stream", self.mix.stream_s):
                await asyncio.sleep(0.5)  # a client backs off; keeps the count bounded

    async def _long(self, session: aiohttp.ClientSession) -> None:
        await asyncio.sleep(1.0)
        await self._stream(session, "long", self.mix.long_s)

    async def _stream(self, session: aiohttp.ClientSession, kind: str, seconds: float) -> bool:
        record = Record(rid=self._rid(kind), kind=kind, sent=time.time())
        self.records.append(record)
        wanted = round(seconds / CHUNK_S)
        got = b""
        try:
            async with session.post(
                self.base + "/stream",
                json={"prompt": PROMPT, "seconds": seconds, "chunk_seconds": CHUNK_S},
                headers={"X-Request-Id": record.rid},
            ) as answer:
                record.status, record.pod = answer.status, answer.headers.get("X-Pod")
                async for data in answer.content.iter_any():
                    got += data
        except (aiohttp.ClientError, TimeoutError) as error:
            record.error = f"{_describe(error)} after {_events(got)}/{wanted} events"
        else:
            record.ok = record.status == 200 and got.endswith(b"data: [DONE]\n\n")
            record.ok = record.ok and _events(got) == wanted
            if not record.ok:
                record.error = f"HTTP {record.status}, {_events(got)}/{wanted} events"
        record.ended = time.time()
        return record.ok


def _echoes(text: str, rid: str, body: Any) -> bool:
    """The answer names this request, and the whole prompt reached the pod."""
    try:
        answer = json.loads(text)
    except ValueError:
        return False
    if not isinstance(answer, dict) or answer.get("request_id") != rid:
        return False
    return body is None or answer.get("prompt_bytes") == len(PROMPT.encode())


def _events(got: bytes) -> int:
    return got.count(b"data: ") - got.count(b"data: [DONE]")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:120]
