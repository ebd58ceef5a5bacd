"""YAML read as kubectl reads it: go-yaml v2's scalars, then sigs.k8s.io/yaml's JSON.

Where it sits: inside rpp/model/documents.py, after a file's limits are checked, for
every file rpp reads from a person (`rpp validate`, and the scenario files of
`rpp simulate` and `rpp fake-runpod`, whose pools are Kubernetes objects too: one dialect
for every file, so a pool means the same in a scenario as in the file applied).

Why: `kubectl apply -f` turns YAML into JSON with sigs.k8s.io/yaml over
go.yaml.in/yaml/v2, and the API server judges that JSON. PyYAML's YAML 1.1 reads some
plain scalars otherwise, so `rpp validate` once refused what the API server stores and
accepted what it refuses (measured on kube-apiserver 1.36.2): `0o120` and `8e1` are
numbers to Go and text to PyYAML, `1:20` is text to Go and 80 to PyYAML (base 60), and a
date such as `2001-12-14` is text to Go and a date to PyYAML.

A document is what Python's json module reads from the JSON kubectl sends:

- plain scalars resolve as go-yaml v2's resolve.go: the booleans y/yes/on/true and
  n/no/off/false in three spellings, null as ~/null/empty, integers in every base Go's
  `strconv.ParseInt(s, 0, 64)` reads (`0x50`, `0o120`, `0120`, `0b101`, underscores
  dropped) and up to 2^64-1, floats (`8e1`, `.5`, `.inf`, `.nan`), no base 60; a
  timestamp stays its text (decode.go keeps it a string when decoding into interface{});
  the rest is text. A quoted or block scalar is text;
- explicit tags: `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!timestamp` resolve
  the value and refuse one that is not of the tag's kind; `!!binary` is base64; any other
  tag leaves the text;
- a merge key `<<` sets its mapping's keys where it stands, as v2 does: it overrides a key
  written before it (PyYAML lets that key win), a later key overrides it, and in a list of
  mappings the first wins;
- keys become JSON strings as sigs.k8s.io/yaml's convertToJSONableObject writes them (`80`,
  `true`, a float in float32's shortest form); a null key, or an integer past int64, is
  refused there, and so here;
- numbers as Go's encoding/json writes them: a float that is whole and below 1e21 is
  written without a point (`8e1` is sent as `80`), so it arrives as an integer.

NaN and the infinities are kept: kubectl refuses the whole file ("json: unsupported value:
NaN"), and rpp names the field that holds one instead.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_TAG = "tag:yaml.org,2002:"
STR, BOOL, INT, FLOAT = _TAG + "str", _TAG + "bool", _TAG + "int", _TAG + "float"
NULL, TIMESTAMP, BINARY, MERGE = _TAG + "null", _TAG + "timestamp", _TAG + "binary", _TAG + "merge"
_RESOLVABLE = (STR, BOOL, INT, FLOAT, NULL, TIMESTAMP)
INT64_MAX, UINT64_MAX = 2**63 - 1, 2**64 - 1

# resolve.go's resolveMap, looked up for a scalar starting with one of "yYnNtTfFoO~.+-".
_WORDS: dict[str, tuple[str, Any]] = {"": (NULL, None)}
for _tag, _value, _words in (
    (BOOL, True, "y Y yes Yes YES true True TRUE on On ON"),
    (BOOL, False, "n N no No NO false False FALSE off Off OFF"),
    (NULL, None, "~ null Null NULL"),
    (FLOAT, math.nan, ".nan .NaN .NAN"),
    (FLOAT, math.inf, ".inf .Inf .INF +.inf +.Inf +.INF"),
    (FLOAT, -math.inf, "-.inf -.Inf -.INF"),
):
    _WORDS.update(dict.fromkeys(_words.split(), (_tag, _value)))
_HINTED = set("+-0123456789yYnNtTfFoO~.")

# Go's ParseInt(s, 0, 64) syntax: a sign, then 0x / 0b / 0o, a leading 0 (octal) or decimal.
_GO_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_BASES = {"x": 16, "b": 2, "o": 8}
# resolve.go's yamlStyleFloat, and what ParseFloat reads of a scalar starting with '.'.
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
# resolve.go's allowedTimestampFormats (2006-1-2T15:4:5.999999999Z07:00, its lower-case t,
# the space-separated one without a zone, the date alone).
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[Tt]\d{1,2}:\d{1,2}:\d{1,2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"
    r"| \d{1,2}:\d{1,2}:\d{1,2}(?:\.\d+)?)?"
)


class KubeYamlError(ValueError):
    """A document kubectl could not turn into JSON: one line, `line N: why`."""


def _go_int(plain: str) -> int | None:
    """strconv.ParseInt(plain, 0, 64), then ParseUint for what is past int64."""
    match = _GO_INT.fullmatch(plain)
    if match is None:
        return None
    sign, body = match.groups()
    base, digits = 10, body
    if len(body) > 1 and body[0] == "0":
        prefix = body[1].lower()
        base, digits = (_BASES[prefix], body[2:]) if prefix in _BASES else (8, body[1:])
    elif len(body) > 20:  # past 2^64 (and int() refuses 4,300 decimal digits)
        return None
    number = int(digits, base) * (-1 if sign == "-" else 1)
    if -INT64_MAX - 1 <= number <= INT64_MAX or (not sign and number <= UINT64_MAX):
        return number
    return None


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat of text the caller has matched: None when out of range."""
    number = float(text)
    return None if math.isinf(number) else number


def _timestamp(text: str) -> bool:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    try:
        datetime.date(*(int(part) for part in match.groups()))
    except ValueError:
        return False
    return True


def resolve(text: str, *, timestamps: bool = True) -> tuple[str, Any]:
    """(tag, value) of a plain scalar, as resolve.go's resolve("", text)."""
    if text[:1] not in _HINTED and text:
        return STR, text
    if text in _WORDS:
        return _WORDS[text]
    if text[0] == ".":
        number = _go_float(text) if _DOT_FLOAT.fullmatch(text) else None
        return (FLOAT, number) if number is not None else (STR, text)
    if text[0] in "+-0123456789":
        if timestamps and _timestamp(text):
            return TIMESTAMP, text  # a string once decoded into interface{}
        plain = text.replace("_", "")
        integer = _go_int(plain)
        if integer is not None:
            return INT, integer
        number = _go_float(plain) if _YAML_FLOAT.fullmatch(plain) else None
        if number is not None:
            return FLOAT, number
    return STR, text


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


@dataclass
class _Scalar:
    value: str
    tag: str | None
    plain: bool
    line: int


@dataclass
class _Collection:
    mapping: bool
    line: int
    children: list[Any] = field(default_factory=list)  # a mapping's: key, value, key, ...


@dataclass
class _Alias:
    """A use of an anchor, kept apart from its target: go-yaml v2's isMerge never takes an
    alias node, so `*k: ...` is an ordinary key even when the anchored scalar is `<<`."""

    target: Any


def _scalar(node: _Scalar) -> Any:
    """The value go-yaml v2 decodes into interface{}: what sigs.k8s.io/yaml converts."""
    if node.tag is None:
        return resolve(node.value)[1] if node.plain else node.value
    if node.tag == BINARY:
        try:
            data = base64.b64decode(re.sub(r"[\r\n]", "", node.value), validate=True)
        except (binascii.Error, ValueError):
            raise KubeYamlError(
                f"line {node.line}: !!binary value contains invalid base64 data"
            ) from None
        return data.decode("utf-8", errors="replace")  # as encoding/json writes it
    if node.tag not in _RESOLVABLE:
        return node.value  # `!`, `!foo`, `!!set`: the text, as v2 leaves it
    if node.tag == STR:
        return node.value
    tag, value = resolve(node.value, timestamps=node.tag == TIMESTAMP)
    if tag == node.tag:
        return node.value if tag == TIMESTAMP else value
    if node.tag == FLOAT and tag == INT:
        return float(value)
    raise KubeYamlError(
        f"line {node.line}: cannot read {_short(tag)} `{node.value[:80]}` as a "
        f"{_short(node.tag)}; fix the value or drop the tag"
    )


def as_json(value: Any) -> Any:
    """A decoded scalar as encoding/json writes it and json.loads reads it back."""
    whole = isinstance(value, float) and math.isfinite(value) and value.is_integer()
    return int(value) if whole and abs(value) < 1e21 else value


def float32_text(number: float) -> str:
    """strconv.FormatFloat(number, 'g', -1, 32), with sigs.k8s.io/yaml's .inf and .nan."""
    if math.isnan(number):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", number))[0]
    except OverflowError:
        single = math.copysign(math.inf, number)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for places in range(9):  # the fewest digits that read back as the same float32
        mantissa, _, exponent = f"{abs(single):.{places}e}".partition("e")
        if struct.unpack("f", struct.pack("f", float(f"{mantissa}e{exponent}")))[0] == abs(single):
            break
    digits, power = mantissa.replace(".", "").rstrip("0") or "0", int(exponent)
    sign = "-" if single < 0 else ""
    if power < -4 or power >= 6:  # %e, as 'g' with the shortest precision chooses
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if power < 0 else '+'}{abs(power):02d}"
    point = power + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _json_key(key: Any, line: int) -> str:
    """A mapping key as convertToJSONableObject writes it (string, int, float, bool)."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int) and key <= INT64_MAX:
        return str(key)
    if isinstance(key, float):
        return float32_text(key)
    what = "null (~ or nothing)" if key is None else f"{key}, past int64"
    raise KubeYamlError(
        f"line {line}: a mapping key is {what}; kubectl cannot turn it into JSON: "
        "write the key as text"
    )


def _is_merge(node: Any) -> bool:
    """decode.go's isMerge: a `<<` key, plain (or non-specific `!`) or tagged !!merge."""
    return (
        isinstance(node, _Scalar)
        and node.value == "<<"
        and (node.plain or node.tag in (MERGE, "!"))
    )


class _Decoder:
    """One document's nodes into Python values, each collection built once (an alias is
    the same object, as with PyYAML; the limits were counted with aliases expanded)."""

    def __init__(self) -> None:
        self.built: dict[int, Any] = {}

    def value(self, node: Any) -> Any:
        if isinstance(node, _Alias):
            node = node.target
        if isinstance(node, _Scalar):
            return as_json(_scalar(node))
        if id(node) not in self.built:
            if node.mapping:
                self.built[id(node)] = self.mapping(node, {})
            else:
                self.built[id(node)] = [self.value(child) for child in node.children]
        return self.built[id(node)]

    def mapping(self, node: _Collection, out: dict[str, Any]) -> dict[str, Any]:
        pairs = node.children
        for key_node, value_node in zip(pairs[::2], pairs[1::2], strict=True):
            if _is_merge(key_node):
                self.merge(value_node, out, line=key_node.line)
                continue
            key_target = key_node.target if isinstance(key_node, _Alias) else key_node
            if not isinstance(key_target, _Scalar):
                raise KubeYamlError(
                    f"line {key_target.line}: a mapping key is a "
                    f"{'mapping' if key_target.mapping else 'list'}; keys are text"
                )
            out[_json_key(_scalar(key_target), key_target.line)] = self.value(value_node)
        return out

    def merge(self, node: Any, out: dict[str, Any], *, line: int) -> None:
        """`<<: VALUE`: a mapping, an alias of one, or a list of those (the first wins)."""
        items = node.children if isinstance(node, _Collection) and not node.mapping else [node]
        for item in reversed(items):
            target = item.target if isinstance(item, _Alias) else item
            if not (isinstance(target, _Collection) and target.mapping):
                raise KubeYamlError(
                    f"line {line}: a merge key (<<) takes a mapping or a list of mappings"
                )
            self.mapping(target, out)


def _composed(text: str) -> Iterator[Any]:
    """Each document's root node, from libyaml's events (the parser go-yaml v2 ports)."""
    anchors: dict[str, Any] = {}
    open_nodes: list[_Collection] = []
    root: Any = None

    def add(node: Any, anchor: str | None) -> None:
        nonlocal root
        if anchor is not None:
            anchors[anchor] = node
        if open_nodes:
            open_nodes[-1].children.append(node)
        else:
            root = node

    for event in yaml.parse(text, Loader=_Loader):
        mark: Any = event.start_mark  # libyaml's events always carry one
        line = mark.line + 1
        if isinstance(event, yaml.DocumentStartEvent):
            anchors, root = {}, None
        elif isinstance(event, yaml.DocumentEndEvent):
            yield root
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", mark
                )
            add(_Alias(anchors[event.anchor]), None)
        elif isinstance(event, yaml.ScalarEvent):
            plain = event.implicit[0] and event.tag is None
            tag = None if plain or (event.tag is None and event.implicit[1]) else event.tag
            add(_Scalar(event.value, tag, plain, line), event.anchor)
        elif isinstance(event, yaml.CollectionStartEvent):
            node = _Collection(isinstance(event, yaml.MappingStartEvent), line)
            add(node, event.anchor)
            open_nodes.append(node)
        elif isinstance(event, yaml.CollectionEndEvent):
            open_nodes.pop()


def load_all(text: str) -> list[Any]:
    """Every document of `text` (None for an empty one), as kubectl sends it as JSON;
    yaml.YAMLError for broken syntax, KubeYamlError for what kubectl cannot convert."""
    return [None if root is None else _Decoder().value(root) for root in _composed(text)]
