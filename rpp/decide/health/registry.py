"""The health rules, listed once, in the order they are judged and reported.

Where it sits: decide, in the health concern, over the rules (rpp/decide/health/rules/,
one file each) and under what applies them (rpp/decide/health/pool_wide.py) and asks
about them (rpp/decide/health/judgement.py, rpp/decide/release/steps.py). Nothing else
lists rules: to add one, write its file, list it here (in `RULES` and `Rule`), and give
it its section of spec.health.replaceWhen (rpp/model/spec_health.py).

| rule            | breach (defaults: spec.health.replaceWhen)      | no data when        |
|-----------------|-------------------------------------------------|---------------------|
| Unreachable     | health or metrics probe failed                  | no probe            |
| SlowScrape      | metrics probe answered slower than 2s           | no metrics answer   |
| RelativeLatency | avg request time > 4x median of the OTHER pods  | < 2 peers with data |
| ErrorRate       | 5xx share > 5%                                  | no Prometheus value |
| HostNotice      | machine note or maintenance (hostNotice: true)  | notice unknown      |

The order matters: a member's `flagged` rules come in this order, and the first is the
one its record and the canary's verdict name.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final

from rpp.decide.health.rule import ActiveRule, HealthRule, Needs
from rpp.decide.health.rules.error_rate import ErrorRate
from rpp.decide.health.rules.host_notice import HostNotice
from rpp.decide.health.rules.relative_latency import RelativeLatency
from rpp.decide.health.rules.slow_scrape import SlowScrape
from rpp.decide.health.rules.unreachable import Unreachable
from rpp.model import spec

RULES: Final[tuple[HealthRule, ...]] = (
    Unreachable(),
    SlowScrape(),
    RelativeLatency(),
    ErrorRate(),
    HostNotice(),
)


class Rule(StrEnum):
    """The rules' names, in RULES' order, for code and tests that name one."""

    UNREACHABLE = Unreachable.name
    SLOW_SCRAPE = SlowScrape.name
    RELATIVE_LATENCY = RelativeLatency.name
    ERROR_RATE = ErrorRate.name
    HOST_NOTICE = HostNotice.name


PROMETHEUS_RULES: Final = frozenset(r.name for r in RULES if r.needs is Needs.PROMETHEUS)
"""The rules that read Prometheus rather than the probes or RunPod."""


def active_rules(
    replace_when: spec.ReplaceWhen, rules: Sequence[HealthRule] = RULES
) -> tuple[ActiveRule, ...]:
    """The rules a pool's spec switches on, each with its limits, in order."""
    active = []
    for rule in rules:
        limits = rule.limits(replace_when)
        if limits is not None:
            active.append(ActiveRule(rule, limits))
    return tuple(active)
