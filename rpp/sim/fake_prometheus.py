"""A fake Prometheus query API for the simulator, answering a pool's four queries.

Where it sits: outside observe -> decide -> act, on the world's side, like the fake
RunPod cloud. The controller's real `PrometheusClient` sends its instant queries here
(`GET /api/v1/query`) through an in-process httpx transport, exactly as it would to
PROMETHEUS_URL.

A pool's queries are arbitrary PromQL, and evaluating PromQL is not this module's job.
It recognises each query instead: the world tells it which text is which pool's
`prometheus.latencyQuery`, `prometheus.errorRatioQuery`, `prometheus.requestRateQuery` or
`autoscaling.query` (with `$job` replaced), and it answers from the fake pods' own numbers:

- latency: per pod, the mean duration of the requests the pod answered within the
  window, as `rate(sum) / rate(count)` of its request-duration histogram would;
- error ratio: per pod, the share of those answers that were 5xx, as
  `rate(failed) / rate(total)` would;
- request rate: per pod, the answers within the window per second, as `rate(total)`
  would (0, not NaN, for a target without answers: a counter that did not move);
- autoscaling: the value the scenario's last `load` event set (0 until then).

The window is the first range selector in the query (`[5m]`), 5 minutes without one.
Each pod's counters are kept as running totals after each answer (`Tally`), so a query
reads two tallies per pod, the last one and the last one before its window, as
`rate()` reads a counter at both ends of the range, instead of summing every answer.
The numbers come from the traffic the world sends through RunPod's proxy to every wired
pod (`record`), which is what the pod's own counters count: a request the pod never
answered (dead, hung, a 502 or 524 from the proxy) is not in them. Only pods in an
nginx slot are answered for, as only those are scrape targets of /sd/<pool>; a target
without answers in the window gets NaN, as 0/0 does in Prometheus. Any other query
gets Prometheus' 400 `bad_data`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from rpp.adapters.clock import Clock
from rpp.model.durations import DurationError, parse_duration
from rpp.observe.prometheus import AUTOSCALING, ERROR_RATIO, LATENCY, POD_LABEL, REQUEST_RATE
from rpp.sim.asgi_io import Receive, Reply, Request, Scope, Send, asgi_app

DEFAULT_WINDOW_S = 300.0
KEEP_S = 3600.0  # answers older than the longest window anyone sensible asks for
_RANGE = re.compile(r"\[(\d+(?:\.\d+)?(?:ms|s|m|h))\]")

Resolver = Callable[[str], tuple[str, str] | None]
"""PromQL text -> (pool, spec field), or None for a query no pool asks."""
Targets = Callable[[str], Sequence[str]]
"""pool -> the pod ids in its nginx slots (the /sd/<pool> targets)."""


class QueryError(Exception):
    """A query the fake cannot answer; Prometheus would say bad_data."""


@dataclass(frozen=True)
class Tally:
    """A pod's counters just after one answer: when (epoch seconds), and the requests
    answered, their total duration and the failed ones so far."""

    at: float
    count: int = 0
    duration: float = 0.0
    failed: int = 0


@functools.lru_cache(maxsize=1024)  # the pools ask the same few texts every loop
def window_of(promql: str) -> float:
    """The first range selector's length in seconds, or the default 5 minutes."""
    match = _RANGE.search(promql)
    if match is None:
        return DEFAULT_WINDOW_S
    try:
        return parse_duration(match.group(1))
    except DurationError:
        return DEFAULT_WINDOW_S


class FakePrometheus:
    """The `/api/v1/query` endpoint over the pods' answers: a responder, and ASGI."""

    def __init__(self, *, clock: Clock, resolve: Resolver, targets: Targets) -> None:
        self.clock = clock
        self.resolve = resolve
        self.targets = targets
        self.loads: dict[str, float] = {}
        self.queries = 0
        self._tallies: defaultdict[str, deque[Tally]] = defaultdict(deque)
        self._forgotten: dict[str, Tally] = {}  # per pod, the last tally let go of
        self._asgi = asgi_app(self.respond)

    def record(self, pod_id: str, *, duration: float, failed: bool) -> None:
        """The pod answered one request (its own counters moved)."""
        now = self.clock.now().timestamp()
        tallies = self._tallies[pod_id]
        last = tallies[-1] if tallies else self._forgotten.get(pod_id, Tally(-math.inf))
        tallies.append(
            Tally(now, last.count + 1, last.duration + duration, last.failed + int(failed))
        )
        while tallies and tallies[0].at < now - KEEP_S:
            self._forgotten[pod_id] = tallies.popleft()

    def _within(self, pod_id: str, since: float) -> tuple[int, float, int]:
        """Answers after `since`: how many, their total duration, how many failed."""
        tallies = self._tallies.get(pod_id)
        if not tallies:
            return 0, 0.0, 0
        before = bisect_right(tallies, since, key=lambda t: t.at)
        start = tallies[before - 1] if before else self._forgotten.get(pod_id, Tally(0.0))
        end = tallies[-1]
        return end.count - start.count, end.duration - start.duration, end.failed - start.failed

    def set_load(self, pool: str, value: float) -> None:
        self.loads[pool] = value

    def evaluate(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """The instant vector Prometheus would return for one of the pools' queries."""
        found = self.resolve(promql.strip())
        if found is None:
            raise QueryError(
                "the simulator's Prometheus answers only the pools' latencyQuery, "
                "errorRatioQuery, requestRateQuery and autoscaling.query, "
                f"not {promql.strip()[:80]!r}"
            )
        pool, field = found
        if field == AUTOSCALING:
            return [({}, self.loads.get(pool, 0.0))]
        window = window_of(promql)
        since = self.clock.now().timestamp() - window
        result = []
        for pod in sorted(self.targets(pool)):
            count, duration, failed = self._within(pod, since)
            if field == REQUEST_RATE:
                value = count / window
            elif not count:
                value = math.nan
            elif field == LATENCY:
                value = duration / count
            elif field == ERROR_RATIO:
                value = failed / count
            else:
                raise QueryError(f"unknown query field {field}")
            result.append(({POD_LABEL: pod}, value))
        return result

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The query API over ASGI (uvicorn, httpx.ASGITransport)."""
        await self._asgi(scope, receive, send)

    async def respond(self, request: Request) -> Reply:
        """One request to the query API (the simulator's transport calls this directly)."""
        if request.path != "/api/v1/query":
            return _json(404, {"status": "error", "error": "not found"})
        params = dict(request.query)
        if request.method == "POST":
            params.update(parse_qs(request.body.decode("utf-8", "replace")))
        query = (params.get("query") or [""])[0]
        self.queries += 1
        try:
            vector = self.evaluate(query)
        except QueryError as err:
            return _json(400, {"status": "error", "errorType": "bad_data", "error": str(err)})
        stamp = self.clock.now().timestamp()
        result = [{"metric": labels, "value": [stamp, _number(value)]} for labels, value in vector]
        data = {"resultType": "vector", "result": result}
        return _json(200, {"status": "success", "data": data})


def _json(status: int, body: object) -> Reply:
    return Reply(status, json.dumps(body).encode(), content_type="application/json")


def _number(value: float) -> str:
    """Prometheus sends sample values as strings, NaN included."""
    if math.isnan(value):
        return "NaN"
    return repr(float(value))
