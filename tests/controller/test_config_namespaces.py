"""NAMESPACE and NAMESPACES: which namespaces' RunPodPools `rpp run` serves."""

from __future__ import annotations

import pytest

from rpp.controller.config import ConfigError, load_config
from rpp.controller.namespaces import WatchedNamespaces

BASE = {"RUNPOD_API_KEY": "rp_live_SECRET_key_123"}


def test_without_either_variable_the_credentials_namespace_alone_is_served() -> None:
    watched = load_config(BASE).watched

    assert watched == WatchedNamespaces()
    assert watched.resolve("runpod") == ("runpod",)
    assert watched.describe("runpod") == "namespace runpod"


def test_namespace_stays_the_one_namespace_spelling() -> None:
    config = load_config({**BASE, "NAMESPACE": "gpu"})

    assert config.namespace == "gpu"
    assert config.watched.resolve("elsewhere") == ("gpu",)


def test_namespaces_lists_several_in_order_without_repeats_and_leaves_the_lease_home() -> None:
    config = load_config({**BASE, "NAMESPACES": " team-a, team-b ,team-a "})

    assert config.watched.resolve("runpod") == ("team-a", "team-b")
    assert config.namespace is None  # the Lease stays in the credentials' namespace
    assert config.watched.describe("runpod") == "namespaces team-a, team-b"


def test_a_star_serves_every_namespace() -> None:
    watched = load_config({**BASE, "NAMESPACES": "*"}).watched

    assert watched.every
    assert watched.describe("runpod") == "every namespace"


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        pytest.param(
            {"NAMESPACE": "a", "NAMESPACES": "b"},
            "NAMESPACE and NAMESPACES: both set; set only one",
            id="both",
        ),
        pytest.param({"NAMESPACES": "a,,b"}, "NAMESPACES: 'a,,b' has an empty entry", id="empty"),
        pytest.param({"NAMESPACES": "a,*"}, "NAMESPACES: * stands alone", id="star-and-names"),
        pytest.param(
            {"NAMESPACES": "a,Team_B"},
            "NAMESPACES: 'Team_B' is not a namespace name",
            id="bad-name",
        ),
    ],
)
def test_a_bad_namespaces_setting_is_one_line_naming_the_variable(
    environ: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({**BASE, **environ})

    assert str(raised.value).startswith(said)
    assert "\n" not in str(raised.value)
