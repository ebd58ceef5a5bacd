"""Read a pod's own /metrics page: which metrics it has and when its process started.

Part of observe. The prober fetches the page; this module turns the text into the two
facts decide needs, with prometheus_client's parser (never a hand-written one):

- whether the pool's `probe.requireMetric` is present, and
- the process start time, for restart detection during in-place updates. RunPod resets a
  pod on the same machine for an image update and does not move `startedAt`, so the only
  reliable signal is the service's own metrics: `process_start_time_seconds` when the
  service exports it, else the earliest `*_created` sample (every prometheus_client
  Counter and Histogram exports one, stamped when the process made it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

PROCESS_START = "process_start_time_seconds"
CREATED_SUFFIX = "_created"


class MetricsTextError(ValueError):
    """The page is not Prometheus text; the message says where it broke."""


@dataclass(frozen=True)
class MetricsPage:
    """What one /metrics page says, reduced to what the pool uses."""

    family_names: frozenset[str]
    sample_names: frozenset[str]
    process_start: float | None  # epoch seconds

    def has_metric(self, name: str) -> bool:
        """True when `name` is a family (`app_requests`) or sample (`app_requests_total`)."""
        return name in self.family_names or name in self.sample_names


def parse_metrics_page(text: str) -> MetricsPage:
    """Parse Prometheus text exposition; raises MetricsTextError when it is not that."""
    families: set[str] = set()
    samples: set[str] = set()
    start_samples: list[float] = []
    created_samples: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            families.add(family.name)
            for sample in family.samples:
                samples.add(sample.name)
                if not _is_timestamp(sample.value):
                    continue
                if sample.name == PROCESS_START:
                    start_samples.append(sample.value)
                elif sample.name.endswith(CREATED_SUFFIX):
                    created_samples.append(sample.value)
    except (ValueError, IndexError, KeyError, TypeError) as error:
        # The parser raises bare ValueErrors (and the odd IndexError on truncated lines);
        # one clear type lets the prober report "unparseable" instead of crashing.
        raise MetricsTextError(f"not Prometheus text format: {_short(str(error))}") from None
    # A service that exports its start time knows it best; `*_created` samples are
    # stamped a little after start, and the earliest is the closest to it.
    chosen = start_samples or created_samples
    return MetricsPage(
        family_names=frozenset(families),
        sample_names=frozenset(samples),
        process_start=min(chosen) if chosen else None,
    )


def _is_timestamp(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
