"""Ask Prometheus for the pool's per-pod latency, 5xx share and autoscaling value.

Part of observe. Once a loop, for each pool, the client runs the pool's instant queries
(`prometheus.latencyQuery`, `prometheus.errorRatioQuery`, `prometheus.requestRateQuery`,
`autoscaling.query`) against
PROMETHEUS_URL, with `$job` replaced by `prometheus.job`, and returns one
`PrometheusReading`: per-pod values keyed by the `runpod_pod` label, which the /sd feed
sets on every scrape target, plus the autoscaling value.

Prometheus is optional and fallible. No URL, an unreachable server, a query error, or a
query that returns nothing all mean the same to decide: no data this loop, so the rule
that needs it neither starts nor ends a breach, and autoscaling keeps its size. None of
them raises. Each becomes one `problems` line, prefixed with the query's spec field and
naming what is off (`latencyQuery: ... RelativeLatency is off this loop`), which the
pool turns into a condition, and one log line (INFO for an answer without data, a
warning otherwise). Credentials in PROMETHEUS_URL never appear in either.

A query that got no answer at all (no URL, unreachable, an error status, a result of
the wrong type) and an answer without usable data (no series, NaN, series without
`runpod_pod`) are both problem lines; the latter's spec field is also in `no_data`, so
the pool can tell "Prometheus answered: nothing to report" (normal while no pod
serves) from "Prometheus could not be asked". Either way
`per_pod` holds only what the queries that did answer said, so a pod's value is None
exactly when its rule has no data this loop: callers can use `per_pod` as it is.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from rpp.adapters.logs import fields, layer_logger
from rpp.model import spec
from rpp.model.observations import PodMetrics, PrometheusReading

log = layer_logger("rpp.observe")

POD_LABEL = "runpod_pod"
LATENCY = "latencyQuery"
ERROR_RATIO = "errorRatioQuery"
REQUEST_RATE = "requestRateQuery"
AUTOSCALING = "autoscaling.query"
PER_POD = (LATENCY, ERROR_RATIO, REQUEST_RATE)
QUERY_REQUESTS_KEPT = 1024  # built query requests kept (four queries per pool)
# What each query feeds: named in problem lines so the condition says what is off.
FEEDS = {
    LATENCY: "RelativeLatency",
    ERROR_RATIO: "ErrorRate",
    REQUEST_RATE: "the canary's request count",
    AUTOSCALING: "autoscaling",
}


@dataclass(frozen=True, kw_only=True)
class PoolQueries:
    """A pool's PromQL, as written in its spec (with `$job` not yet replaced)."""

    job: str
    latency_query: str | None = None
    error_ratio_query: str | None = None
    request_rate_query: str | None = None
    autoscaling_query: str | None = None

    def configured(self) -> dict[str, str]:
        """{spec field: PromQL with $job replaced}, for the queries the pool sets."""
        queries = {
            LATENCY: self.latency_query,
            ERROR_RATIO: self.error_ratio_query,
            REQUEST_RATE: self.request_rate_query,
            AUTOSCALING: self.autoscaling_query,
        }
        return {name: q.replace("$job", self.job) for name, q in queries.items() if q}


def queries_from_spec(pool: spec.RunPodPoolSpec) -> PoolQueries:
    """Adapter from a pool's spec; the autoscaling query runs only when autoscaling is on."""
    return PoolQueries(
        job=pool.prometheus.job,
        latency_query=pool.prometheus.latency_query,
        error_ratio_query=pool.prometheus.error_ratio_query,
        request_rate_query=pool.prometheus.request_rate_query,
        autoscaling_query=pool.autoscaling.query if pool.autoscaling.enabled else None,
    )


class PrometheusQueryError(Exception):
    """One query got no usable answer; the message says why, without credentials."""


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    value: float


class PrometheusClient:
    """Instant queries against one Prometheus (PROMETHEUS_URL); None = not configured."""

    def __init__(
        self, *, base_url: str | None, client: httpx.AsyncClient, timeout_s: float = 10.0
    ) -> None:
        self._base_url = base_url.rstrip("/") if base_url else None
        self._client = client
        self._timeout_s = timeout_s
        self._shown = _display(self._base_url) if self._base_url else "(none)"
        self._requests: dict[str, httpx.Request] = {}
        self._said: dict[str, frozenset[str]] = {}  # per pool: last loop's problems

    async def read(self, queries: PoolQueries, *, pool: str = "") -> PrometheusReading:
        """Run the pool's queries concurrently; never raises for Prometheus' failures."""
        wanted = queries.configured()
        if self._base_url is None:
            unset = tuple(
                f"{name}: PROMETHEUS_URL is not set; {FEEDS[name]} is off this loop"
                for name in wanted
            )
            return self._report(pool, PrometheusReading(problems=unset))
        names = list(wanted)
        answers = await asyncio.gather(
            *(self.instant(wanted[n]) for n in names), return_exceptions=True
        )
        per_pod: dict[str, dict[str, float]] = {name: {} for name in PER_POD}
        autoscaling_value: float | None = None
        problems: list[str] = []
        no_data: set[str] = set()
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, PrometheusQueryError):
                problems.append(f"{name}: {answer}; {FEEDS[name]} is off this loop")
                continue
            if isinstance(answer, BaseException):
                raise answer  # a bug, not a Prometheus failure: let it be seen
            if name == AUTOSCALING:
                autoscaling_value, problem = _single_value(answer)
            else:
                per_pod[name], problem = _by_pod(answer)
            if problem:
                no_data.add(name)
                problems.append(f"{name}: {problem}; {FEEDS[name]} is off this loop")
        pods = set().union(*(per_pod[name].keys() for name in PER_POD))
        reading = PrometheusReading(
            per_pod={
                p: PodMetrics(
                    latency_s=per_pod[LATENCY].get(p),
                    error_ratio=per_pod[ERROR_RATIO].get(p),
                    request_rate=per_pod[REQUEST_RATE].get(p),
                )
                for p in sorted(pods)
            },
            autoscaling_value=autoscaling_value,
            problems=tuple(problems),
            no_data=frozenset(no_data),
        )
        return self._report(pool, reading)

    async def instant(self, promql: str) -> list[Series]:
        """One instant query; a scalar comes back as one series without labels."""
        if self._base_url is None:
            raise PrometheusQueryError("PROMETHEUS_URL is not set")
        try:
            request = self._query_request(promql)
            async with asyncio.timeout(self._timeout_s):
                response = await self._client.send(request)
        except TimeoutError:
            raise PrometheusQueryError(
                f"Prometheus at {self._shown} did not answer within {self._timeout_s:g}s"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise PrometheusQueryError(
                f"Prometheus at {self._shown} is unreachable ({type(error).__name__})"
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") != "success":
            detail = body.get("error") if isinstance(body, dict) else None
            raise PrometheusQueryError(
                f"Prometheus answered HTTP {response.status_code}"
                + (f": {detail}" if detail else " without a query result")
            )
        return _series(body.get("data"))

    def _query_request(self, promql: str) -> httpx.Request:
        """The query's GET, built once per query text and sent again: a pool asks the
        same queries every loop, and encoding a PromQL query into a URL and merging the
        client's defaults into a request was most of asking it. A bodiless GET is the
        same request every time."""
        request = self._requests.get(promql)
        if request is None:
            if len(self._requests) >= QUERY_REQUESTS_KEPT:  # spec changes bring new texts
                self._requests.clear()
            url = f"{self._base_url}/api/v1/query"
            request = self._client.build_request("GET", url, params={"query": promql})
            self._requests[promql] = request
        return request

    def _report(self, pool: str, reading: PrometheusReading) -> PrometheusReading:
        """Log each problem the loop it appears; while it lasts, the pool's
        PrometheusUnavailable condition says it, and the log repeats it at DEBUG only (a
        pool without PROMETHEUS_URL warned three times a loop, forever)."""
        before = self._said.get(pool, frozenset())
        for problem in reading.problems:
            # An empty answer is normal while no pod serves; the pool's condition says
            # when it is not (NoData), so the log does not warn for it.
            empty = problem.split(":", 1)[0] in reading.no_data
            level = logging.INFO if empty else logging.WARNING
            if problem in before:
                level = logging.DEBUG
            log.log(level, "prometheus: %s", problem, extra=fields(pool=pool or None))
        self._said[pool] = frozenset(reading.problems)
        return reading


def _series(data: Any) -> list[Series]:
    if not isinstance(data, dict):
        raise PrometheusQueryError("Prometheus answered without a data section")
    kind, result = data.get("resultType"), data.get("result")
    if not isinstance(result, list):
        raise PrometheusQueryError(f"Prometheus answered a {kind} without a result list")
    try:
        if kind == "vector":
            return [Series(dict(item["metric"]), _number(item["value"][1])) for item in result]
        if kind == "scalar":
            return [Series({}, _number(result[1]))]
    except (KeyError, IndexError, TypeError, ValueError):
        raise PrometheusQueryError(f"Prometheus answered a malformed {kind} result") from None
    raise PrometheusQueryError(
        f"the query returns a {kind}, not an instant vector; "
        "wrap range selectors in a function such as rate()"
    )


def _number(text: Any) -> float:
    return float(text)  # Prometheus sends "NaN", "+Inf" and decimals as strings


def _by_pod(series: list[Series]) -> tuple[dict[str, float], str | None]:
    values: dict[str, float] = {}
    duplicates: set[str] = set()
    unlabelled = 0
    for s in series:
        pod = s.labels.get(POD_LABEL)
        if not pod:
            unlabelled += 1
        elif pod in values or pod in duplicates:
            duplicates.add(pod)
        elif math.isfinite(s.value):  # NaN is 0/0: a pod without traffic has no data
            values[pod] = s.value
    for pod in duplicates:  # ambiguous, so no data rather than a guess
        values.pop(pod, None)
    if not series:
        return values, "the query returned no series"
    if duplicates:
        return values, (
            f"more than one series for pod(s) {', '.join(sorted(duplicates))}; "
            f"aggregate with sum/avg by ({POD_LABEL})"
        )
    if not values:
        if unlabelled:
            return values, f"no series carries a {POD_LABEL} label; keep it in by ({POD_LABEL})"
        return values, "the query returned no usable value (NaN or infinite)"
    return values, None


def _single_value(series: list[Series]) -> tuple[float | None, str | None]:
    if not series:
        return None, "the query returned no series"
    if len(series) > 1:
        return None, f"the query returned {len(series)} series; it must return one value"
    if not math.isfinite(series[0].value):
        return None, f"the query returned {series[0].value}, not a number"
    return series[0].value, None


def _display(url: str) -> str:
    """The URL without user:password, for messages."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(invalid PROMETHEUS_URL)"
