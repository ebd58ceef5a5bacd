"""The fake pod's metrics page is the one prometheus_client renders for the same values.

rpp/sim/pod_metrics.py keeps the page as text and writes again only what changed, for
speed; prometheus_client is the oracle here: the same requests counted by its Counter,
Histogram and Gauge, with every `*_created` sample set to the process start, must give
the same bytes from `generate_latest`, after any sequence of requests and page reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from rpp.observe.metrics_text import parse_metrics_page_within
from rpp.sim.pod_metrics import LATENCY_BUCKETS, ProcessMetrics

START = 1_767_225_600.0


class Oracle(Collector):
    """The same process's metrics in prometheus_client, `*_created` at the start."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("app_requests", "App requests served.", registry=self.registry)
        self.failed = Counter(
            "app_requests_failed", "App requests answered with a 5xx.", registry=self.registry
        )
        self.duration = Histogram(
            "app_request_duration_seconds",
            "Time to answer an app request.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue = Gauge("app_queue_length", "App requests in flight.", registry=self.registry)
        self.exposed = CollectorRegistry()
        self.exposed.register(self)

    def collect(self) -> Iterable[Metric]:
        started = Metric("process_start_time_seconds", "Start time of the process.", "gauge")
        started.add_sample("process_start_time_seconds", {}, START)
        yield started
        for family in self.registry.collect():
            family.samples = [
                s._replace(value=START) if s.name.endswith("_created") else s
                for s in family.samples
            ]
            yield family

    def page(self) -> bytes:
        return generate_latest(self.exposed)


# (what happens, duration, failed): a request comes in, one is answered, the page is read.
steps = st.lists(
    st.tuples(
        st.sampled_from(["start", "answer", "read"]),
        st.one_of(
            st.sampled_from([0.0, 0.01, 0.25, 0.2500001, 30.0, 31.0]),
            st.floats(min_value=0, max_value=100, allow_nan=False),
        ),
        st.booleans(),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=steps)
def test_the_page_is_what_prometheus_client_renders_for_the_same_requests(
    steps: list[tuple[str, float, bool]],
) -> None:
    ours, oracle = ProcessMetrics(start=START), Oracle()
    assert ours.page() == oracle.page()
    for what, duration, failed in steps:
        if what == "start":
            ours.started()
            oracle.queue.inc()
        elif what == "answer":
            ours.left()
            oracle.queue.dec()
            ours.answered(duration=duration)
            oracle.requests.inc()
            oracle.duration.observe(duration)
            if failed:
                ours.errored()
                oracle.failed.inc()
        else:
            assert ours.page() == oracle.page()
    assert ours.page() == oracle.page()


def test_a_page_read_twice_without_a_request_between_is_the_same_bytes_object() -> None:
    metrics = ProcessMetrics(start=START)
    metrics.started()
    metrics.left()
    metrics.answered(duration=0.3)
    first = metrics.page()
    assert metrics.page() is first  # nothing is written again until a count moves
    metrics.errored()
    assert metrics.page() != first


async def test_restart_detection_reads_the_process_start_from_the_page() -> None:
    text = ProcessMetrics(start=START).page().decode()
    page = await parse_metrics_page_within(text, deadline=math.inf)
    assert page.process_start == START
    assert page.has_metric("app_request_duration_seconds")
