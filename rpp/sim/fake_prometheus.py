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
The numbers come from the traffic the world sends through RunPod's proxy to every wired
pod (`record`), which is what the pod's own counters count: a request the pod never
answered (dead, hung, a 502 or 524 from the proxy) is not in them. Only pods in an
nginx slot are answered for, as only those are scrape targets of /sd/<pool>; a target
without answers in the window gets NaN, as 0/0 does in Prometheus. Any other query
gets Prometheus' 400 `bad_data`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from rpp.adapters.clock import Clock
from rpp.model.durations import DurationError, parse_duration
from rpp.observe.prometheus import AUTOSCALING, ERROR_RATIO, LATENCY, POD_LABEL, REQUEST_RATE
from rpp.sim.asgi_io import Receive, Scope, Send, read_request, reject_non_http, send_json

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
class Answer:
    """One request a pod answered: when (epoch seconds), how long it took, and if it failed."""

    at: float
    duration: float
    failed: bool


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
    """The `/api/v1/query` endpoint over the pods' answers; an ASGI app."""

    def __init__(self, *, clock: Clock, resolve: Resolver, targets: Targets) -> None:
        self.clock = clock
        self.resolve = resolve
        self.targets = targets
        self.loads: dict[str, float] = {}
        self.queries = 0
        self._answers: defaultdict[str, deque[Answer]] = defaultdict(deque)

    def record(self, pod_id: str, *, duration: float, failed: bool) -> None:
        """The pod answered one request (its own counters moved)."""
        now = self.clock.now().timestamp()
        answers = self._answers[pod_id]
        answers.append(Answer(now, duration, failed))
        while answers and answers[0].at < now - KEEP_S:
            answers.popleft()

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
            recent = []
            for answer in reversed(self._answers.get(pod, ())):
                if answer.at <= since:
                    break  # answers are in time order: the rest is older still
                recent.append(answer)
            if field == REQUEST_RATE:
                value = len(recent) / window
            elif not recent:
                value = math.nan
            elif field == LATENCY:
                value = sum(a.duration for a in recent) / len(recent)
            elif field == ERROR_RATIO:
                value = sum(1 for a in recent if a.failed) / len(recent)
            else:
                raise QueryError(f"unknown query field {field}")
            result.append(({POD_LABEL: pod}, value))
        return result

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await reject_non_http(scope, receive, send):
            return
        request = await read_request(scope, receive)
        if request.path != "/api/v1/query":
            await send_json(send, 404, {"status": "error", "error": "not found"})
            return
        params = dict(request.query)
        if request.method == "POST":
            params.update(parse_qs(request.body.decode("utf-8", "replace")))
        query = (params.get("query") or [""])[0]
        self.queries += 1
        try:
            vector = self.evaluate(query)
        except QueryError as err:
            body = {"status": "error", "errorType": "bad_data", "error": str(err)}
            await send_json(send, 400, body)
            return
        stamp = self.clock.now().timestamp()
        result = [{"metric": labels, "value": [stamp, _number(value)]} for labels, value in vector]
        data = {"resultType": "vector", "result": result}
        await send_json(send, 200, {"status": "success", "data": data})


def _number(value: float) -> str:
    """Prometheus sends sample values as strings, NaN included."""
    if math.isnan(value):
        return "NaN"
    return repr(float(value))
