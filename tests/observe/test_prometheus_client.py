"""The Prometheus client against a real Prometheus scraping fake inference pods.

Three fake pods serve traffic on 127.0.0.1; Prometheus scrapes them every second with
the `runpod_pod` label /sd/<pool> would set, and answers the latency and error-ratio
queries of examples/pool.yaml, read from the file. Failure cases (no URL, unreachable,
errors, empty or ambiguous results) must turn into `problems` lines, never exceptions.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from rpp.adapters.clock import ManualClock
from rpp.decide.health.pool_wide import judge_pool
from rpp.decide.health.registry import active_rules
from rpp.decide.health.rule import MemberObservation
from rpp.model.spec import ReplaceWhen, RunPodPoolSpec
from rpp.model.spec_load import load_spec
from rpp.observe.prometheus import PoolQueries, PrometheusClient, queries_from_spec
from rpp.sim.asgi_io import Receive, Scope, Send, send_bytes
from rpp.sim.inference import FakeInferencePod
from rpp.sim.localhttp import ServerThread, serve_local
from tests.fixtures_prometheus import ScrapeTarget, running_prometheus, scrape_config, wait_for

TOKEN = "prom-scrape-token"
EXAMPLE_POOL = Path(__file__).resolve().parents[2] / "examples" / "pool.yaml"


def example_spec() -> RunPodPoolSpec:
    """The pool spec of examples/pool.yaml: its queries are the ones run here."""
    raw = yaml.safe_load(EXAMPLE_POOL.read_text())
    spec, problems = load_spec(raw["metadata"]["name"], raw["spec"])
    assert problems == [], f"examples/pool.yaml does not load: {problems}"
    assert spec is not None
    return spec


EXAMPLE = example_spec()
JOB = EXAMPLE.prometheus.job
LATENCY_Q = EXAMPLE.prometheus.latency_query or ""
ERROR_Q = EXAMPLE.prometheus.error_ratio_query or ""
REQUESTS_Q = EXAMPLE.prometheus.request_rate_query or ""
AUTOSCALE_Q = 'count(up{job="$job"} == 1)'
# The fake pods time their answers on the wall clock, so a loaded machine adds the same
# overhead o to every request: pod-c reads above RelativeLatency's 4x the others' median
# while o < 80 ms (at 0.08 s it took only 13 ms of load to hide it).
LATENCIES = {"pod-a": 0.01, "pod-b": 0.01, "pod-c": 0.33}


@dataclass(frozen=True)
class ScrapedPool:
    url: str
    pods: dict[str, FakeInferencePod]


def _drive_traffic(ports: dict[str, int], stop: threading.Event) -> None:
    with httpx.Client(timeout=5) as client:
        while not stop.is_set():
            for port in ports.values():
                client.get(f"http://127.0.0.1:{port}/generate")


@pytest.fixture(scope="module")
def scraped_pool(
    prometheus_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ScrapedPool]:
    clock = ManualClock(dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    pods = {
        pod_id: FakeInferencePod(
            pod_id=pod_id, clock=clock, latency_s=latency, metrics_token=TOKEN, seed=i
        )
        for i, (pod_id, latency) in enumerate(LATENCIES.items())
    }
    pods["pod-b"].errors(0.25)
    stop = threading.Event()
    with ServerThread(list(pods.values())) as port_list:
        ports = dict(zip(pods, port_list, strict=True))
        traffic = threading.Thread(target=_drive_traffic, args=(ports, stop), daemon=True)
        traffic.start()
        targets = [
            ScrapeTarget(f"127.0.0.1:{port}", {"runpod_pod": pod_id})
            for pod_id, port in ports.items()
        ]
        config = scrape_config(job=JOB, targets=targets, params={"token": TOKEN})
        try:
            with running_prometheus(
                binary=prometheus_binary,
                workdir=tmp_path_factory.mktemp("prometheus"),
                config=config,
            ) as prometheus:
                query = ERROR_Q.replace("$job", JOB)

                def three_pods_with_rates() -> bool:
                    answer = httpx.get(
                        f"{prometheus.url}/api/v1/query", params={"query": query}
                    ).json()
                    return len(answer["data"]["result"]) == 3

                wait_for(three_pods_with_rates, timeout_s=20, what="rates for 3 pods")
                counted = f'increase(app_requests_total{{job="{JOB}"}}[5m])'

                def enough_requests_counted() -> bool:
                    # A ratio over n requests is off by up to 1/n (7 requests read 1/7,
                    # not 0.25): wait for 40 each, so the bounds below hold.
                    answer = httpx.get(
                        f"{prometheus.url}/api/v1/query", params={"query": counted}
                    ).json()
                    counts = [float(r["value"][1]) for r in answer["data"]["result"]]
                    return len(counts) == 3 and min(counts) >= 40

                wait_for(enough_requests_counted, timeout_s=30, what="40 requests per pod")
                yield ScrapedPool(url=prometheus.url, pods=pods)
        finally:
            stop.set()
            traffic.join(timeout=10)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def queries(**kwargs: str) -> PoolQueries:
    return PoolQueries(job=JOB, **kwargs)


async def test_latency_error_ratio_request_rate_and_autoscaling_value_keyed_by_runpod_pod(
    scraped_pool: ScrapedPool, http: httpx.AsyncClient
) -> None:
    client = PrometheusClient(base_url=scraped_pool.url, client=http)
    reading = await client.read(
        queries(
            latency_query=LATENCY_Q,
            error_ratio_query=ERROR_Q,
            request_rate_query=REQUESTS_Q,
            autoscaling_query=AUTOSCALE_Q,
        )
    )
    assert reading.problems == ()
    assert set(reading.per_pod) == set(LATENCIES)
    latency = {p: m.latency_s for p, m in reading.per_pod.items()}
    errors = {p: m.error_ratio for p, m in reading.per_pod.items()}
    assert latency["pod-a"] is not None
    assert latency["pod-c"] is not None
    # Each pod's own number, under its own runpod_pod: a request takes at least the pod's
    # latency (a loaded machine only adds to both), and the slow pod reads slower.
    assert latency["pod-a"] >= 0.01
    assert latency["pod-c"] >= 0.33
    assert latency["pod-c"] > latency["pod-a"]
    assert errors["pod-a"] == 0.0
    assert errors["pod-c"] == 0.0
    assert errors["pod-b"] is not None
    # 25% fail at random: over at least 40 requests, 3 standard deviations either side.
    assert 0.05 < errors["pod-b"] < 0.6
    rates = {p: m.request_rate for p, m in reading.per_pod.items()}
    assert all(rate is not None and rate > 0 for rate in rates.values()), rates
    assert reading.autoscaling_value == 3.0


async def test_real_reading_drives_the_relative_latency_and_error_rate_rules(
    scraped_pool: ScrapedPool, http: httpx.AsyncClient
) -> None:
    client = PrometheusClient(base_url=scraped_pool.url, client=http)
    reading = await client.read(queries(latency_query=LATENCY_Q, error_ratio_query=ERROR_Q))
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    pool = judge_pool(
        rules=active_rules(ReplaceWhen()),
        observations={p: MemberObservation(metrics=m) for p, m in reading.per_pod.items()},
        breaches={},
        ready=list(reading.per_pod),
        now=now,
    )
    assert set(pool.members["pod-c"].breaches) == {"RelativeLatency"}
    assert set(pool.members["pod-b"].breaches) == {"ErrorRate"}
    assert not pool.members["pod-a"].degraded
    assert not pool.pool_wide


@pytest.mark.parametrize(
    ("kwargs", "problem", "answered"),
    [
        pytest.param(
            {"latency_query": LATENCY_Q.replace("$job", "no-such-job")},
            "latencyQuery: the query returned no series; RelativeLatency is off this loop",
            True,
            id="empty-result",
        ),
        pytest.param(
            {"error_ratio_query": "sum by (runpod_pod) ("},
            "errorRatioQuery: Prometheus answered HTTP 400: ",
            False,
            id="syntax-error",
        ),
        pytest.param(
            {"latency_query": 'app_requests_total{job="$job"}[1m]'},
            "latencyQuery: the query returns a matrix, not an instant vector",
            False,
            id="range-vector",
        ),
        pytest.param(
            {"latency_query": 'sum(rate(app_requests_total{job="$job"}[1m]))'},
            "latencyQuery: no series carries a runpod_pod label",
            True,
            id="label-dropped",
        ),
        pytest.param(
            {"latency_query": 'app_request_duration_seconds_bucket{job="$job"}'},
            "latencyQuery: more than one series for pod(s) pod-a, pod-b, pod-c",
            True,
            id="not-aggregated",
        ),
        pytest.param(
            {"autoscaling_query": 'up{job="$job"}'},
            "autoscaling.query: the query returned 3 series; it must return one value",
            True,
            id="autoscaling-many",
        ),
        pytest.param(
            {"error_ratio_query": 'sum by (runpod_pod) (up{job="$job"}) * NaN'},
            "errorRatioQuery: the query returned no usable value (NaN or infinite)",
            True,
            id="all-nan",
        ),
    ],
)
async def test_unusable_answers_turn_the_rule_off_with_a_problem_line(
    scraped_pool: ScrapedPool,
    http: httpx.AsyncClient,
    kwargs: dict[str, str],
    problem: str,
    answered: bool,
) -> None:
    client = PrometheusClient(base_url=scraped_pool.url, client=http)
    reading = await client.read(queries(**kwargs))
    assert len(reading.problems) == 1
    assert reading.problems[0].startswith(problem)
    # Answered without data is told apart from not answered (decide raises only the latter
    # before any pod serves).
    assert reading.no_data == ({problem.split(":")[0]} if answered else set())
    assert reading.autoscaling_value is None


async def test_one_failing_query_leaves_the_others_data_in_place(
    scraped_pool: ScrapedPool, http: httpx.AsyncClient
) -> None:
    client = PrometheusClient(base_url=scraped_pool.url, client=http)
    reading = await client.read(queries(latency_query=LATENCY_Q, error_ratio_query="sum("))
    assert [p.split(":")[0] for p in reading.problems] == ["errorRatioQuery"]
    assert set(reading.per_pod) == set(LATENCIES)
    assert all(m.latency_s is not None for m in reading.per_pod.values())
    assert all(m.error_ratio is None for m in reading.per_pod.values())


async def test_no_prometheus_url_turns_every_query_off_without_a_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.url}")

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        client = PrometheusClient(base_url=None, client=http)
        reading = await client.read(
            queries(latency_query=LATENCY_Q, autoscaling_query=AUTOSCALE_Q), pool="inference"
        )
        nothing = await client.read(queries())
    assert reading.problems == (
        "latencyQuery: PROMETHEUS_URL is not set; RelativeLatency is off this loop",
        "autoscaling.query: PROMETHEUS_URL is not set; autoscaling is off this loop",
    )
    (logged,) = [r for r in caplog.records if "latencyQuery" in r.getMessage()]
    assert logged.getMessage().startswith("prometheus: latencyQuery: PROMETHEUS_URL is not set")
    assert logged.pool == "inference"  # type: ignore[attr-defined]
    assert nothing.problems == ()


async def test_a_lasting_problem_is_warned_once_per_pool_and_again_when_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Measured on a real cluster: with PROMETHEUS_URL unset (deploy/controller.yaml's
    default) every pool warned three lines a loop, forever. The pool's condition says a
    lasting problem; the log says it when it starts."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.url}")

    caplog.set_level(logging.DEBUG)
    wanted = queries(latency_query=LATENCY_Q)
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        client = PrometheusClient(base_url=None, client=http)

        def warned() -> list[str]:
            found = [r.pool for r in caplog.records if r.levelno == logging.WARNING]  # type: ignore[attr-defined]
            caplog.clear()
            return found

        for _ in range(3):
            await client.read(wanted, pool="a")
        await client.read(wanted, pool="b")
        assert warned() == ["a", "b"]
        await client.read(queries(), pool="a")  # the query goes, and with it the problem
        await client.read(wanted, pool="a")
        assert warned() == ["a"]


async def test_unreachable_prometheus_is_a_problem_that_hides_its_credentials(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve_local(_not_prometheus) as port:
        pass  # closed again: nothing listens on the port now
    caplog.set_level(logging.WARNING)
    client = PrometheusClient(base_url=f"http://admin:hunter2@127.0.0.1:{port}", client=http)
    reading = await client.read(queries(error_ratio_query=ERROR_Q), pool="inference")
    assert reading.problems == (
        f"errorRatioQuery: Prometheus at http://127.0.0.1:{port} is unreachable "
        "(ConnectError); ErrorRate is off this loop",
    )
    assert "hunter2" not in caplog.text
    assert "ErrorRate is off this loop" in caplog.text


async def _not_prometheus(scope: Scope, receive: Receive, send: Send) -> None:
    await send_bytes(send, 502, b"<html>bad gateway</html>", content_type="text/html")


async def test_non_json_answer_is_a_problem_naming_the_status(http: httpx.AsyncClient) -> None:
    async with serve_local(_not_prometheus) as port:
        client = PrometheusClient(base_url=f"http://127.0.0.1:{port}", client=http)
        reading = await client.read(queries(latency_query=LATENCY_Q))
    assert reading.problems == (
        "latencyQuery: Prometheus answered HTTP 502 without a query result; "
        "RelativeLatency is off this loop",
    )


def _answering(values: dict[str, str]) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """A stand-in Prometheus whose every instant query gives these values by pod."""
    result = [{"metric": {"runpod_pod": pod}, "value": [1.0, v]} for pod, v in values.items()]
    answer = {"status": "success", "data": {"resultType": "vector", "result": result}}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send_bytes(send, 200, json.dumps(answer).encode(), content_type="application/json")

    return app


async def test_a_pods_nan_or_infinite_value_is_no_data_for_that_pod_alone(
    http: httpx.AsyncClient,
) -> None:
    # rpp/decide/health/pool_wide.py sorts the latencies it is given: none may be NaN.
    values = {"pod-a": "NaN", "pod-b": "+Inf", "pod-c": "-Inf", "pod-d": "0.2", "pod-e": "0.3"}
    async with serve_local(_answering(values)) as port:
        client = PrometheusClient(base_url=f"http://127.0.0.1:{port}", client=http)
        reading = await client.read(queries(latency_query=LATENCY_Q))
    assert {p: m.latency_s for p, m in reading.per_pod.items()} == {"pod-d": 0.2, "pod-e": 0.3}
    assert reading.problems == ()


async def test_prometheus_that_hangs_is_given_up_after_the_timeout(
    http: httpx.AsyncClient,
) -> None:
    hung = FakeInferencePod(pod_id="prom", clock=ManualClock())
    hung.hang()
    async with serve_local(hung) as port:
        client = PrometheusClient(base_url=f"http://127.0.0.1:{port}", client=http, timeout_s=0.3)
        reading = await client.read(queries(latency_query=LATENCY_Q))
        hung.recover()
    assert reading.problems == (
        f"latencyQuery: Prometheus at http://127.0.0.1:{port} did not answer within 0.3s; "
        "RelativeLatency is off this loop",
    )


def test_job_is_substituted_into_every_query() -> None:
    pool = PoolQueries(job="inference-pods", latency_query='x{job="$job"}', error_ratio_query="")
    assert pool.configured() == {"latencyQuery": 'x{job="inference-pods"}'}


@pytest.mark.parametrize("enabled", [True, False])
def test_queries_come_from_the_pool_spec(enabled: bool) -> None:
    raw = {
        "prometheus": {
            "latencyQuery": LATENCY_Q,
            "errorRatioQuery": ERROR_Q,
            "requestRateQuery": REQUESTS_Q,
        },
        "autoscaling": {"enabled": enabled, "query": AUTOSCALE_Q},
    }
    pool, problems = load_spec("inference", raw)
    assert problems == []
    assert pool is not None
    assert queries_from_spec(pool).configured() == {
        "latencyQuery": LATENCY_Q.replace("$job", JOB),
        "errorRatioQuery": ERROR_Q.replace("$job", JOB),
        "requestRateQuery": REQUESTS_Q.replace("$job", JOB),
        **({"autoscaling.query": AUTOSCALE_Q.replace("$job", JOB)} if enabled else {}),
    }


def test_fixture_config_is_what_prometheus_reads(tmp_path: Path) -> None:
    config = scrape_config(
        job=JOB, targets=[ScrapeTarget("127.0.0.1:1", {"runpod_pod": "p"})], params={"t": "v"}
    )
    job = config["scrape_configs"][0]
    assert job["params"] == {"t": ["v"]}
    assert job["static_configs"] == [{"targets": ["127.0.0.1:1"], "labels": {"runpod_pod": "p"}}]
