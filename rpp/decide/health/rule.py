"""What every health rule is: one object behind one interface.

Where it sits: decide, at the bottom of the health concern. Each rule in
rpp/decide/health/rules/ (one file per rule) subclasses `HealthRule`; the registry
(rpp/decide/health/registry.py) lists them in order; rpp/decide/health/pool_wide.py
applies whatever the registry lists, so adding a rule touches the rule's file, the
registry and its spec section (rpp/model/spec_health.py), and nothing that judges.

A rule says five things about itself:

- `name`: the word the status, the conditions and the Events use (`Unreachable`);
- `section`: the spec section it reads (`health.replaceWhen.unreachable`);
- `limits(replace_when)`: its threshold and duration from that section, or None when
  the section switches it off (hostNotice: false);
- `check(observation, peer_latencies=..., limits=...)`: this loop's answer for one
  pod, breach (with the words that say why), pass, or no data;
- `needs`: the data it reads, which says where its observation comes from and what
  the loop reports when that data is missing (`Needs.PROMETHEUS`: PrometheusUnavailable
  names it; a canary flagged by it failed on Prometheus' word, not on its probes).

Pure, like all of decide: a check is a function of this loop's observation, its peers
and its limits; the breach starts, durations and flags are pool_wide.py's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from rpp.model import spec
from rpp.model.observations import HostNotice, PodMetrics, ProbeResult


class Needs(StrEnum):
    """The data a rule reads (observe gathers each kind in its own way)."""

    PROBE = "probe"  # the health and metrics probes answered at all
    METRICS_PAGE = "metrics page"  # how long the metrics probe's page took
    PROMETHEUS = "Prometheus"  # a per-pod PromQL query (spec.prometheus)
    RUNPOD_NOTICE = "RunPod notice"  # RunPod's note or maintenance window on the machine


@dataclass(frozen=True, kw_only=True)
class Limits:
    """One rule's limit and how long it must be breached to flag; `threshold` is unused
    by rules that have none (Unreachable, HostNotice)."""

    threshold: float = 0.0
    duration_s: float

    @classmethod
    def of(
        cls, section: spec.SlowScrapeRule | spec.RelativeLatencyRule | spec.ErrorRateRule
    ) -> Limits:
        """A spec section with a threshold and a duration, as limits."""
        return cls(threshold=section.threshold, duration_s=section.duration)


@dataclass(frozen=True, kw_only=True)
class MemberObservation:
    """This loop's facts about one pod; None = not known this loop (no data)."""

    probe: ProbeResult | None = None
    metrics: PodMetrics | None = None
    notice: HostNotice | None = None  # HostNotice() with nothing set = known clear


@dataclass(frozen=True)
class Check:
    """One rule's answer for one pod this loop."""

    breach: bool | None  # None = no data
    detail: str = ""  # why, for a breach (a pass's detail is never shown)


PASS = Check(False)
NO_DATA = Check(None)


class HealthRule(ABC):
    """One health rule. Subclasses set the class attributes and implement both methods."""

    name: ClassVar[str]
    """The rule's name in status, conditions and Events (a `Rule` value)."""
    section: ClassVar[str]
    """The spec section its limits come from, as a user writes it."""
    needs: ClassVar[Needs]
    """The data its check reads."""
    query_field: ClassVar[str | None] = None
    """For a rule that needs Prometheus: the spec.prometheus field of its query."""

    @abstractmethod
    def limits(self, replace_when: spec.ReplaceWhen) -> Limits | None:
        """Its limits from its section of spec.health.replaceWhen; None = switched off."""

    @abstractmethod
    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        """Breach, pass or no data for one pod; `peer_latencies` are the other judged
        pods' average request times, sorted."""

    def query(self, prometheus: spec.Prometheus) -> str | None:
        """For a rule that needs Prometheus: the query the pool set for it, if any."""
        return None


@dataclass(frozen=True)
class ActiveRule:
    """A rule a pool's spec switches on, with that pool's limits for it."""

    rule: HealthRule
    limits: Limits
