"""The generated CRD installs: the API server's checks of a CRD on create find nothing.

tests/crd_create.py models those checks from apiextensions-apiserver's source; the first
test holds the generated CRD (deploy/crd.yaml, the chart's template) to them. The others
show that each check refuses what the API server refuses, so a pass means something: the
7 refusals issue 24 got from a real API server when the rules were not guarded, and one
schema for each other kind of error.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from rpp.model import crd as crd_module
from rpp.model.crd import build_crd
from rpp.model.crd_guards import guard_rules
from tests.crd_create import crd_problems

SPEC = "spec.validation.openAPIV3Schema.properties[spec]"


def test_the_generated_crd_passes_every_check_the_api_server_makes_on_create() -> None:
    assert crd_problems(build_crd()) == []
    assert crd_problems(build_crd("pools.example.com")) == []


def test_unguarded_rules_get_the_seven_refusals_a_real_api_server_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 24, as kube-apiserver 1.36 worded it: the default {} of spec, autoscaling,
    datacenters and nginx fails every rule there that reads a field of it."""
    monkeypatch.setattr(crd_module, "guard_rules", lambda node: node)
    found = crd_problems(build_crd())
    assert found[0] == (
        f'{SPEC}.default: Invalid value: "object": no such key: nginx evaluating rule: '
        "nginx.slotPorts must be at least replicas.max + 1"
    )
    keys = [line.split("no such key: ")[1].split(" ")[0] for line in found]
    assert keys == ["nginx", "limits", "rollout", "probe", "enabled", "allow", "basePort"]


def _spec(crd: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return node["properties"]["spec"]  # type: ignore[no-any-return]


def _status(crd: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return node["properties"]["status"]  # type: ignore[no-any-return]


def _unrequired_key(crd: dict[str, Any]) -> None:
    del _status(crd)["properties"]["conditions"]["items"]["required"]


def _set_of_objects(crd: dict[str, Any]) -> None:
    _status(crd)["properties"]["members"]["x-kubernetes-list-type"] = "set"


def _default_with_unknown_field(crd: dict[str, Any]) -> None:
    _spec(crd)["properties"]["drain"]["default"] = {"perod": "150s"}


def _default_its_schema_refuses(crd: dict[str, Any]) -> None:
    _spec(crd)["properties"]["cloud"]["default"] = "PRIVATE"


def _default_a_rule_refuses(crd: dict[str, Any]) -> None:
    _spec(crd)["properties"]["nginx"]["default"] = {"basePort": 65535, "slotPorts": 2}


def _default_a_nested_rule_refuses(crd: dict[str, Any]) -> None:
    _spec(crd)["properties"]["drain"]["default"] = {"period": "150 seconds"}


def _default_in_metadata(crd: dict[str, Any]) -> None:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    root["properties"]["metadata"]["properties"]["name"]["default"] = "pool"


def _undefined_field(crd: dict[str, Any]) -> None:
    nginx = _spec(crd)["properties"]["nginx"]
    nginx["x-kubernetes-validations"] = [{"rule": "self.slotPort > 0", "message": "m"}]


def _unbounded_string(crd: dict[str, Any]) -> None:
    del _spec(crd)["properties"]["autoscaling"]["properties"]["query"]["maxLength"]


def _unbounded_list(crd: dict[str, Any]) -> None:
    del _spec(crd)["properties"]["datacenters"]["properties"]["deny"]["maxItems"]


def _properties_and_additional(crd: dict[str, Any]) -> None:
    _spec(crd)["properties"]["drain"]["additionalProperties"] = {"type": "string"}


def _array_without_items(crd: dict[str, Any]) -> None:
    del _spec(crd)["properties"]["gpuTypes"]["items"]


def _message_on_two_lines(crd: dict[str, Any]) -> None:
    _spec(crd)["x-kubernetes-validations"][0]["message"] = "two\nlines"


def _rule_that_does_not_compile(crd: dict[str, Any]) -> None:
    _spec(crd)["x-kubernetes-validations"][0]["rule"] = "self.paused ||"


def _column_of_unknown_type(crd: dict[str, Any]) -> None:
    crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = "percent"


BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "map-list key neither required nor defaulted": (
        _unrequired_key, "must have a default or be a required property",
    ),
    "set of objects": (_set_of_objects, "must be atomic as item of a list with"),
    "default with an unknown field": (
        _default_with_unknown_field, "default: Invalid value: must not have unknown fields",
    ),
    "default its own schema refuses": (
        _default_its_schema_refuses, "[cloud].default: Invalid value: 'PRIVATE' is not one of",
    ),
    "default a rule of its node refuses": (
        _default_a_rule_refuses, "nginx.basePort + nginx.slotPorts runs past port 65535",
    ),
    "default a rule below its node refuses": (
        _default_a_nested_rule_refuses, 'default.period: Invalid value: "string": not a dur',
    ),
    "default in metadata": (_default_in_metadata, "must not be set in top-level metadata"),
    "rule reading an undefined field": (_undefined_field, "undefined field 'slotPort'"),
    "rule reading an unbounded string": (_unbounded_string, "self.query, which has no maxLength"),
    "rule reading an unbounded list": (_unbounded_list, "reads self.deny, which has no maxItems"),
    "properties beside additionalProperties": (
        _properties_and_additional, "additionalProperties and properties are mutual exclusive",
    ),
    "array without items": (_array_without_items, "properties[gpuTypes].items: Required value"),
    "message on two lines": (_message_on_two_lines, "must not contain line breaks"),
    "rule that does not compile": (_rule_that_does_not_compile, "compilation failed"),
    "printer column of an unknown type": (_column_of_unknown_type, "Unsupported value: 'percent'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_each_check_refuses_what_the_api_server_refuses(case: str) -> None:
    breaks, expected = BROKEN[case]
    crd = copy.deepcopy(build_crd())
    breaks(crd)
    found = crd_problems(crd)
    assert any(expected in line for line in found), found


def test_a_rule_reading_a_field_no_default_fills_must_test_for_it_in_the_model() -> None:
    """The generator guards only fields that always have a value on a pool; any other
    field a default lacks is the model rule's own business (`has()`), or it says so."""
    node = {
        "type": "object",
        "default": {},
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
        "x-kubernetes-validations": [{"rule": "self.a > self.b", "message": "m"}],
    }
    with pytest.raises(ValueError, match=r"reads self\.a, which a default .* lacks"):
        guard_rules(node)
    node["x-kubernetes-validations"] = [
        {"rule": "!has(self.a) || self.a > self.b", "message": "m"}
    ]
    [rule] = guard_rules(node)["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.b) || (!has(self.a) || self.a > self.b)"
