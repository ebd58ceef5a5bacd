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
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

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
