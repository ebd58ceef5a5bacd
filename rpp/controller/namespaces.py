"""Which namespaces the controller serves: NAMESPACE, NAMESPACES, or every namespace.

Where it sits: the controller's configuration, before observe -> decide -> act.
`load_config` (rpp/controller/config.py) reads the two variables here; `rpp run` turns the
answer into one Kubernetes adapter per served namespace (rpp/controller/pool_namespaces.py).

NAMESPACE is the one-namespace spelling and stays what it was; NAMESPACES is a
comma-separated list, or `*` for every namespace of the cluster (the chart's
`watchNamespaces`). Setting both is refused: which one was meant cannot be guessed, and
guessing wrong leaves pools unserved without a word. With neither, the controller serves
the namespace its credentials name (the pod's own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rpp.adapters.kube.api import ALL_NAMESPACES
from rpp.controller.config_error import ConfigError

SINGLE_VARIABLE = "NAMESPACE"
LIST_VARIABLE = "NAMESPACES"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, kw_only=True)
class WatchedNamespaces:
    """The namespaces whose RunPodPools this controller reconciles."""

    names: tuple[str, ...] = ()
    """The namespaces named, in the order given; empty: the credentials' own (or all)."""
    every: bool = False
    """NAMESPACES=*: every namespace, listed and watched cluster-wide."""

    @property
    def single(self) -> str | None:
        """The one namespace named, for the start-up line and the Lease; None otherwise."""
        return self.names[0] if len(self.names) == 1 else None

    def resolve(self, own: str) -> tuple[str, ...]:
        """The namespaces named, or the credentials' own when none is (not for `every`)."""
        return self.names or (own,)

    def describe(self, own: str) -> str:
        """For the start-up log line: `namespace runpod`, `namespaces a, b`, `every namespace`."""
        if self.every:
            return "every namespace"
        served = self.resolve(own)
        word = "namespace" if len(served) == 1 else "namespaces"
        return f"{word} {', '.join(served)}"


def read_watched(environ: Mapping[str, str]) -> WatchedNamespaces:
    """NAMESPACE or NAMESPACES, checked; a `ConfigError` naming the variable otherwise."""
    single = _value(environ, SINGLE_VARIABLE)
    listed = _value(environ, LIST_VARIABLE)
    if single is not None and listed is not None:
        raise ConfigError(
            f"{SINGLE_VARIABLE} and {LIST_VARIABLE}: both set; set only one: "
            f"{SINGLE_VARIABLE} for one namespace, {LIST_VARIABLE} for a comma-separated "
            "list or * for every namespace"
        )
    if single is not None:
        return WatchedNamespaces(names=(check_namespace(single, where=SINGLE_VARIABLE),))
    if listed is None:
        return WatchedNamespaces()
    if listed == ALL_NAMESPACES:
        return WatchedNamespaces(every=True)
    names: list[str] = []
    for part in listed.split(","):
        name = part.strip()
        if not name:
            raise ConfigError(
                f"{LIST_VARIABLE}: {listed!r} has an empty entry; list namespaces separated "
                "by commas (a,b), or set * for every namespace"
            )
        if name == ALL_NAMESPACES:
            raise ConfigError(
                f"{LIST_VARIABLE}: * stands alone (every namespace); remove the other names, "
                "or list namespaces without *"
            )
        checked = check_namespace(name, where=LIST_VARIABLE)
        if checked not in names:
            names.append(checked)
    return WatchedNamespaces(names=tuple(names))


def check_namespace(value: str, *, where: str) -> str:
    """A namespace name, or a `ConfigError` starting with `where`."""
    if not _DNS_LABEL.match(value):
        raise ConfigError(
            f"{where}: {value!r} is not a namespace name (lowercase letters, digits and "
            "'-', at most 63); unset it to use the one the credentials name (the pod's own, or "
            "the kubeconfig context's)"
        )
    return value


def _value(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    return value.strip() if value is not None and value.strip() else None
