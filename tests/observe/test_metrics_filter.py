"""Whether a page has the required metric, read from only the lines that can name it.

The prober asks `has_metric_within` on every steady probe of a pool with
`probe.requireMetric`; these tests hold it to the whole page's parse: the same verdict
for every page prometheus_client accepts, prefixes, label sets, comments, HELP and TYPE
lines and chunked pages included, and the same error for a page it rejects when the
metric is not found.
"""

from __future__ import annotations

import asyncio
import math
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpp.observe import metrics_text
from rpp.observe.metrics_text import (
    MetricsPage,
    MetricsTextError,
    has_metric_within,
    parse_metrics_page_within,
)
from rpp.sim.pod_metrics import DURATION, ProcessMetrics


def filtered(text: str, name: str) -> bool:
    async def ask() -> bool:
        deadline = asyncio.get_running_loop().time() + 3600
        return await has_metric_within(text, name, deadline=deadline)

    return asyncio.run(ask())


def parse_metrics_page(text: str) -> MetricsPage:
    """The whole page's parse, as the prober does it, without a deadline."""
    return asyncio.run(parse_metrics_page_within(text, deadline=math.inf))


def whole(text: str, name: str) -> bool:
    return parse_metrics_page(text).has_metric(name)


def unrelated_families(count: int) -> str:
    return "".join(
        f"# HELP other_{i}_seconds Something else, with a long help text to parse.\n"
        f"# TYPE other_{i}_seconds histogram\n"
        f'other_{i}_seconds_bucket{{le="+Inf",path="/v1/x"}} {i}\n'
        f"other_{i}_seconds_sum 1.5\nother_{i}_seconds_count {i}\n"
        for i in range(count)
    )


REQUIRED = (
    "# HELP app_queue_length Requests waiting.\n"
    "# TYPE app_queue_length gauge\n"
    'app_queue_length{model="m"} 3\n'
)


def test_required_metric_is_found_among_huge_unrelated_content() -> None:
    page = unrelated_families(2000) + REQUIRED + unrelated_families(2000)
    assert filtered(page, "app_queue_length")
    assert not filtered(page, "app_queue_length_total")
    assert not filtered(page.replace(REQUIRED, ""), "app_queue_length")


def test_a_page_of_unrelated_families_hands_the_parser_a_few_lines() -> None:
    page = (unrelated_families(200) + REQUIRED + unrelated_families(200)).split("\n")
    lines_for = metrics_text._filter_for("app_queue_length")
    assert lines_for is not None
    kept = list(lines_for.keep(page))
    assert kept == [lines_for.placeholder, *REQUIRED.splitlines(), lines_for.placeholder]


def test_a_required_histograms_samples_are_not_handed_to_the_parser() -> None:
    metrics = ProcessMetrics(start=1.7e9)
    metrics.answered(duration=0.3)
    lines_for = metrics_text._filter_for(DURATION)
    assert lines_for is not None
    kept = list(lines_for.keep(metrics.page().decode().split("\n")))
    assert [line for line in kept if not line.startswith("#")] == [lines_for.placeholder] * 3
    assert filtered(metrics.page().decode(), DURATION)


# Each page is judged for every name in NAMES, by the whole parse and the filtered one.
NAMES = (
    "foo",
    "foo_total",
    "foo_bucket",
    "foo_count",
    "foo_created",
    "foo_total_total",
    "foo_total_count",
    "foo_bucket_total",
    "bar",
    "bar_total",
)
CASES = {
    "a counter and its _total sample": "# TYPE foo counter\nfoo_total 1\n",
    "a counter sample named like its family is renamed": "# TYPE foo counter\nfoo 1\n",
    "a counter family named with _total": "# TYPE foo_total counter\nfoo_total 1\n",
    "a renamed counter's family ended by another sample": "# TYPE foo counter\nbar 1\nfoo 2\n",
    "ended by another family's TYPE": "# TYPE foo counter\n# TYPE bar gauge\nfoo 2\n",
    "ended by another family's HELP": "# TYPE foo counter\n# HELP bar Bar.\nfoo 2\n",
    "not ended by a comment or a blank line": "# TYPE foo counter\n# hello\n\nfoo 2\n",
    "a prefix of another metric only": "foobar_total 1\nfoo_seconds 2\n",
    "only in a label value": 'bar{path="foo",kind="foo_total"} 1\n',
    "only in help text": "# HELP bar Counts foo and foo_total.\n# TYPE bar gauge\nbar 1\n",
    "only in a comment": "# foo foo_total\nbar 1\n",
    "a histogram's samples": (
        '# HELP foo Latency.\n# TYPE foo histogram\nfoo_bucket{le="1"} 1\n'
        'foo_bucket{le="+Inf"} 2\nfoo_sum 3\nfoo_count 2\nfoo_created 1.7e9\n'
    ),
    "a histogram's bucket after another family": (
        '# TYPE foo histogram\nbar 1\nfoo_bucket{le="+Inf"} 2\n'
    ),
    "label sets": 'foo{a="1",b="x y"} 1\nfoo{a="2"} 2\nfoo{} 3\n',
    "a quoted name": '{"foo"} 1\n',
    "the name in __name__": '{__name__="foo_total"} 1\n',
    "HELP then TYPE then samples of the same name": (
        "# HELP foo_total Foo.\n# TYPE foo_total counter\nfoo_total 7\n"
    ),
    "a TYPE repeated with another type": "# TYPE foo counter\n# TYPE foo gauge\nfoo 1\n",
    "a space, a tab or a no-break space after the name": (
        'foo {a="b"} 1\nbar 1\nfoo\t2\nbar 2\nfoo\u00a0{a="c"} 3\n'
    ),
    "a counter's sample with labels after its TYPE": (
        '# TYPE foo counter\nfoo{a="x"} 1\nfoo_created{a="x"} 1.7e9\nfoo{a="y"} 2\n'
    ),
    "a counter's TYPE changed by a later TYPE of its name": (
        "# TYPE foo_total counter\nfoo_total 1\n# TYPE foo_total histogram\n"
    ),
    "a histogram's TYPE changed to counter after its buckets": (
        '# TYPE foo histogram\nfoo_bucket{le="1"} 1\nfoo_count 1\n# TYPE foo counter\nfoo 1\n'
    ),
    "comments holding the name": "#foo\n# foo_total is here\n#\tTYPE foo counter\nfoo 1\n",
}


@pytest.mark.parametrize("page", CASES.values(), ids=CASES.keys())
def test_filtered_verdict_is_the_whole_pages_for_every_name(page: str) -> None:
    for name in NAMES:
        assert filtered(page, name) == whole(page, name), name


def test_a_page_the_parser_rejects_reads_as_before_when_the_metric_is_not_found() -> None:
    for page in ("<html><body>502 Bad Gateway</body></html>", 'foo{label="unterminated 1\n'):
        with pytest.raises(MetricsTextError, match="not Prometheus text format"):
            filtered(page, "foo")


def test_a_bad_line_that_cannot_name_the_required_metric_no_longer_fails_it() -> None:
    page = "# TYPE foo gauge\nfoo 1\nbar{broken 2\n"
    with pytest.raises(MetricsTextError):
        parse_metrics_page(page)
    assert filtered(page, "foo")


@pytest.mark.parametrize("name", ["foo", "foo_total"])
def test_a_present_metric_is_answered_without_parsing_the_whole_page(name: str) -> None:
    page = unrelated_families(50) + "# TYPE foo counter\nfoo 1\n" + unrelated_families(50)
    with mock.patch.object(metrics_text, "parse_metrics_page_within", side_effect=AssertionError):
        assert filtered(page, name)


def test_a_name_that_is_not_a_plain_metric_name_is_read_from_the_whole_page() -> None:
    page = '{__name__="odd name"} 1\n'
    assert filtered(page, "odd name") == whole(page, "odd name") is True


# Few names, so that families meet: a counter `foo` ended or not before its sample `foo`.
WORDS = (
    "foo",
    "foo_total",
    "foo_bucket",
    "foo_count",
    "foo_total_count",
    "foo_bucket_total",
    "bar",
)
TYPES = ("counter", "histogram", "summary", "gauge")
LINES = st.one_of(
    st.builds(lambda n, t: f"# HELP {n} {t}", st.sampled_from(WORDS), st.sampled_from(WORDS)),
    st.builds(lambda n, t: f"# TYPE {n} {t}", st.sampled_from(WORDS), st.sampled_from(TYPES)),
    st.builds(lambda n: f"{n} 1", st.sampled_from(WORDS)),
    st.builds(
        lambda n, v: f'{n}{{le="{v}",x="y"}} 2', st.sampled_from(WORDS), st.sampled_from(WORDS)
    ),
    st.builds(lambda n: f"# {n} said", st.sampled_from(WORDS)),
    st.sampled_from(
        ["", "#", "# HELP", "  ", "\tfoo 3", "foobar_total 1", "xfoo 2", 'foo {a="b"} 1', "foo\t2"]
    ),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(LINES, max_size=14), st.sampled_from([2, 3, 1000]))
def test_filtered_verdict_is_the_whole_pages_on_generated_pages(
    lines: list[str], chunk_lines: int
) -> None:
    page = "\n".join(lines) + "\n"
    with mock.patch.object(metrics_text, "CHUNK_LINES", chunk_lines):
        try:
            expected = {name: whole(page, name) for name in NAMES}
        except MetricsTextError:
            return  # pages the parser rejects are the test above's
        assert {name: filtered(page, name) for name in NAMES} == expected
