"""Read a pod's own /metrics page: which metrics it has and when its process started.

Part of observe. The prober fetches the page; this module turns the text into the two
facts decide needs, with prometheus_client's parser (never a hand-written one):

- whether the pool's `probe.requireMetric` is present, and
- the process start time, for restart detection during in-place updates. RunPod resets a
  pod on the same machine for an image update and does not move `startedAt`, so the only
  reliable signal is the service's own metrics: `process_start_time_seconds` when the
  service exports it, else the earliest `*_created` sample (every prometheus_client
  Counter and Histogram exports one, stamped when the process made it).

A page is the pod's to write, so its cost is bounded. The prober caps its size before
it gets here; this module parses it `CHUNK_LINES` lines at a time. Memory: the parser
keeps the samples of the family it is in, so a page of one family with a million
samples would hold them all; in chunks it holds at most one chunk's. Time:
`parse_metrics_page_within` lets the event loop run other pods' probes between chunks
and gives up at the probe's deadline, so no page stalls the loop for more than one
chunk (about 8 ms on the build machine) or outlives its pod's time budget. A page of
at most one chunk is parsed in one go, as before.

Chunking changes no answer: a chunk after the first starts with the last `# HELP` and
`# TYPE` lines before it, so its samples keep their family and type; a family cut in
two comes out as two families of the same name, and only names and start times are kept.

Most probes only ask whether the required metric is there (restart detection reads the
start time only for pods in an update), and parsing every line of every pod's page was
a quarter of the controller's CPU at 1,000 pods. `has_metric_within` hands the parser
only the lines that can name the metric (`_LineFilter` says which, and why that gives
the same answer), stops at the first family that names it, and parses the whole page
when those lines do not name it, so a missing metric or an unparseable page reads
exactly as before. The one difference: a page on which the metric is found passes even
when a line the parser was not handed is one it rejects.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from prometheus_client.parser import text_fd_to_metric_families

PROCESS_START = "process_start_time_seconds"
CREATED_SUFFIX = "_created"
CHUNK_LINES = 1000


class MetricsTextError(ValueError):
    """The page is not Prometheus text, or was not parsed in time; the message says which."""


@dataclass(frozen=True)
class MetricsPage:
    """What one /metrics page says, reduced to what the pool uses."""

    family_names: frozenset[str]
    sample_names: frozenset[str]
    process_start: float | None  # epoch seconds

    def has_metric(self, name: str) -> bool:
        """True when `name` is a family (`app_requests`) or sample (`app_requests_total`)."""
        return name in self.family_names or name in self.sample_names


async def parse_metrics_page_within(text: str, *, deadline: float) -> MetricsPage:
    """Parse Prometheus text exposition, yielding to the event loop between chunks;
    MetricsTextError when it is not that.

    `deadline` is on the running loop's clock; past it, MetricsTextError says how far
    the parse got.
    """
    loop = asyncio.get_running_loop()
    lines = text.split("\n")
    reader = _Reader()
    done = 0
    for chunk in _chunks(lines):
        if done:
            await asyncio.sleep(0)  # other pods' probes run between chunks
            if loop.time() > deadline:
                raise MetricsTextError(
                    f"page not parsed within the probe's time ({done} of {len(lines)} lines)"
                )
        reader.feed(chunk)
        done += CHUNK_LINES
    return reader.page()


async def has_metric_within(text: str, name: str, *, deadline: float) -> bool:
    """`parse_metrics_page_within(...).has_metric(name)`, parsing only what can name it.

    Raises MetricsTextError as the whole page's parse would when the metric is not found.
    """
    lines_for = _filter_for(name)
    if lines_for is not None:
        loop = asyncio.get_running_loop()
        try:
            for i, chunk in enumerate(_chunks(text.split("\n"))):
                if i:
                    await asyncio.sleep(0)  # filtering is cheap, but pages can be long
                    if loop.time() > deadline:
                        break
                if _names(lines_for.keep(chunk), name):
                    return True
        except MetricsTextError:
            pass  # the whole page's parse below gives the error it always gave
    page = await parse_metrics_page_within(text, deadline=deadline)
    return page.has_metric(name)


_TOTAL = "_total"
_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_PLACEHOLDERS = ("rpp_filtered_out", "RPP_FILTERED_OUT")


@dataclass(frozen=True)
class _LineFilter:
    """Which lines of a page can tell whether metric `m` is on it (`keep`).

    Why the answer is the same as the whole page's (for a page the parser accepts): `m`
    is on the page when a family or a sample comes out of the parser with that name. A
    family's name comes from its HELP or TYPE lines, a sample's from its line, except
    that the parser renames by the family's type, which is known only when the family
    ends: a counter loses `_total` from its own name or adds it to each of its samples'
    (`_families_that_may_name`). So every comment holding `needle` (the shortest of
    those families' names) is kept, and every sample of those families or named `m`,
    each as it is. Any other sample, HELP or TYPE line ends a family of those names, so
    each run of them becomes one `placeholder` sample, a name without `needle`, which
    ends a family just the same. Comments without `needle` that are not HELP or TYPE are
    kept (the parser decides what they are); blank lines, which it skips, are dropped.
    """

    needle: str
    sample: re.Pattern[str]  # a line of a sample of those families, or named `m`
    placeholder: str

    def keep(self, lines: Iterable[str]) -> Iterator[str]:
        ended = False
        for line in lines:
            if self.needle in line:
                stripped = line.strip()
                # A name in quotes or __name__ (`{"m"}`, `{__name__="m"}`) is kept too.
                if stripped[0] in "#{" or self.sample.match(stripped):
                    yield line
                    ended = False
                    continue
            else:
                stripped = line.strip()
                if not stripped:
                    continue
                if stripped[0] == "#" and not stripped.startswith(("# HELP ", "# TYPE ")):
                    yield line
                    continue
            if not ended:
                yield self.placeholder
                ended = True


def _names(lines: Iterable[str], name: str) -> bool:
    """Whether the parser, fed `lines`, yields `name` as a family or a sample; it stops
    reading at the first that does."""
    try:
        for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]
            if family.name == name or any(sample.name == name for sample in family.samples):
                return True
    except (ValueError, IndexError, KeyError, TypeError) as error:
        raise MetricsTextError(f"not Prometheus text format: {_short(str(error))}") from None
    return False


@lru_cache(maxsize=64)
def _filter_for(name: str) -> _LineFilter | None:
    """The filter for metric `name`, or None when it is not a plain metric name (then
    the whole page is parsed)."""
    if not _LEGACY_NAME.fullmatch(name):
        return None
    families = _families_that_may_name(name)
    needle = min(families | {name}, key=len)  # a prefix of `name` or `name` itself
    samples = {name} | {f + end for f in families for end in _SAMPLE_ENDS}
    names = "|".join(re.escape(n) for n in sorted(samples))
    # The name ends where a character that cannot continue a metric name comes.
    sample = re.compile(rf"(?:{names})(?![a-zA-Z0-9_:])")
    for candidate in _PLACEHOLDERS:
        if needle not in candidate:
            return _LineFilter(needle=needle, sample=sample, placeholder=f"{candidate} 0")
    return None


_SAMPLE_ENDS = ("", "_count", "_sum", "_bucket")  # what a family's samples add to its name


def _families_that_may_name(name: str) -> set[str]:
    """The families whose type, known only when they end, decides whether `name` is on
    the page: a counter named `name` plus `_total` comes out as `name`; one named `name`,
    when that ends with `_total`, loses it; and a counter not named with `_total` adds
    it to each of its samples, so one holding a sample `name` hides it, and one holding
    `name` without `_total` shows it."""
    families = {name + _TOTAL}
    held = [name]
    if name.endswith(_TOTAL):
        stem = name.removesuffix(_TOTAL)
        families |= {name, stem}
        held.append(stem)
    for sample in held:
        families.update(
            sample.removesuffix(end) for end in _SAMPLE_ENDS[1:] if sample.endswith(end)
        )
    return families


@dataclass
class _Reader:
    families: set[str] = field(default_factory=set)
    samples: set[str] = field(default_factory=set)
    starts: list[float] = field(default_factory=list)
    created: list[float] = field(default_factory=list)

    def feed(self, lines: Sequence[str]) -> None:
        try:
            for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]
                self.families.add(family.name)
                for sample in family.samples:
                    self.samples.add(sample.name)
                    if not _is_timestamp(sample.value):
                        continue
                    if sample.name == PROCESS_START:
                        self.starts.append(sample.value)
                    elif sample.name.endswith(CREATED_SUFFIX):
                        self.created.append(sample.value)
        except (ValueError, IndexError, KeyError, TypeError) as error:
            # The parser raises bare ValueErrors (and the odd IndexError on truncated
            # lines); one clear type lets the prober report "unparseable", not crash.
            raise MetricsTextError(f"not Prometheus text format: {_short(str(error))}") from None

    def page(self) -> MetricsPage:
        # A service that exports its start time knows it best; `*_created` samples are
        # stamped a little after start, and the earliest is the closest to it.
        chosen = self.starts or self.created
        return MetricsPage(
            family_names=frozenset(self.families),
            sample_names=frozenset(self.samples),
            process_start=min(chosen) if chosen else None,
        )


def _chunks(lines: list[str]) -> Iterator[Sequence[str]]:
    """CHUNK_LINES lines at a time, each after the first led by the family context."""
    if len(lines) <= CHUNK_LINES:
        yield lines
        return
    help_line: tuple[int, str] | None = None
    type_line: tuple[int, str] | None = None
    for start in range(0, len(lines), CHUNK_LINES):
        chunk = lines[start : start + CHUNK_LINES]
        context = sorted(c for c in (help_line, type_line) if c is not None)
        yield [line for _, line in context] + chunk if start else chunk
        for offset, line in enumerate(chunk):
            stripped = line.lstrip()
            if stripped.startswith("#"):
                words = stripped.split(None, 2)
                if len(words) > 1 and words[1] == "HELP":
                    help_line = (start + offset, line)
                elif len(words) > 1 and words[1] == "TYPE":
                    type_line = (start + offset, line)


def _is_timestamp(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
