"""The YAML documents in a file a person handed us, read within limits, and echoed safely.

Where it sits: before everything else, for the three commands that read a user's file
(`rpp validate`, `rpp simulate --scenario`, `rpp fake-runpod --scenario`); the reading
itself is rpp/adapters/files.py, this module only turns bytes into documents. A hostile or
broken file must cost a clear line, not a traceback, minutes or gigabytes:

- text that is not UTF-8 (UTF-16, a binary) is named as such;
- the size is capped (`Limits.max_bytes`), so is nesting (a 20,000-deep list once blew
  Python's recursion limit) and the number of values after YAML aliases expand (a 2.2 KB
  "billion laughs" file once ran for minutes and then ran out of memory).

The limits are checked on libyaml's event stream before any Python object is built: the
parser keeps its own stack, so a deep file is refused at the first level too deep, and an
alias adds the size its anchor already counted, so a bomb is refused by arithmetic, not by
expanding it. Only then are the documents built, as kubectl reads YAML
(rpp/model/kube_yaml.py: go-yaml v2's scalars, not PyYAML's YAML 1.1), so a file means to
rpp what it means to the API server.

`clip` shortens whatever part of a file is echoed back in a message, saying how much was cut;
it is the one such helper, so RunPod's answers and the log (rpp/adapters) cut texts with it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from rpp.model.kube_yaml import KubeYamlError, load_all

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CLIP_CHARS = 200


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one file may hold. A RunPodPool is a few KB, about 100 values, 6 levels deep."""

    max_bytes: int = 1024 * 1024  # the API server stores objects up to about 1.5 MiB
    max_depth: int = 64
    max_values: int = 100_000  # counted with every alias expanded


LIMITS = Limits()


class DocumentError(ValueError):
    """A file that cannot be read as YAML documents; the message is one line for a person,
    without the file's name (the caller puts it in front)."""


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """`text` up to `limit` characters, then how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters not shown)"


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MiB"
    return f"{count / 1024:.1f} KiB" if count >= 1024 else f"{count} bytes"


def too_large(size: int | None, *, limits: Limits = LIMITS) -> str:
    """The message for a file past `limits.max_bytes` (its size, when known)."""
    shown = (
        f"is {_size(size)}" if size is not None else f"is larger than {_size(limits.max_bytes)}"
    )
    return (
        f"{shown}; rpp reads YAML files up to {_size(limits.max_bytes)} (a RunPodPool is a few KB)"
    )


def _wide_encoding(data: bytes) -> str | None:
    """UTF-16 or UTF-32 by their byte order mark, or UTF-16 by every other byte being NUL
    (ASCII text saved as UTF-16 without a mark)."""
    if data.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16"
    head = data[:64]
    if len(head) >= 4 and (not any(head[1::2]) or not any(head[0::2])):
        return "UTF-16"
    return None


def decode(data: bytes, *, limits: Limits = LIMITS) -> str:
    """The file's text; DocumentError when it is too large or not UTF-8 text."""
    if len(data) > limits.max_bytes:
        raise DocumentError(too_large(None, limits=limits))
    encoding = _wide_encoding(data)
    if encoding is not None:
        raise DocumentError(
            f"is {encoding} text; rpp reads UTF-8: convert it, e.g. "
            f"iconv -f {encoding} -t UTF-8 FILE > FILE.utf8"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(
            f"is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start:,}); "
            "is it a binary file? rpp reads YAML saved as UTF-8"
        ) from None
    if "\x00" in text:
        offset = text.index("\x00")
        raise DocumentError(f"holds a NUL byte at offset {offset:,}: a binary file, not YAML text")
    return text.removeprefix("\ufeff")


def _line(event: yaml.Event | yaml.YAMLError) -> str:
    mark = getattr(event, "start_mark", None) or getattr(event, "problem_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


def _too_deep(where: yaml.Event | yaml.YAMLError, limits: Limits) -> str:
    return (
        f"{_line(where)}nests deeper than {limits.max_depth} levels; "
        "a RunPodPool needs fewer than 10"
    )


def check_limits(text: str, *, limits: Limits = LIMITS) -> None:
    """Walk libyaml's events once: nesting depth and expanded size within `limits`."""
    # Each open collection: [values counted so far, its anchor].
    open_nodes: list[list[Any]] = []
    anchors: dict[str, int] = {}
    total = 0
    aliases = False

    def counted(event: yaml.Event, values: int) -> None:
        nonlocal total
        if open_nodes:
            open_nodes[-1][0] += values
        else:
            total += values
        if max(total, open_nodes[-1][0] if open_nodes else 0) > limits.max_values:
            if aliases:
                raise DocumentError(
                    f"{_line(event)}holds more than {limits.max_values:,} values once its "
                    "YAML aliases (*name) are expanded; write the values out, or use fewer "
                    "aliases"
                )
            raise DocumentError(
                f"{_line(event)}holds more than {limits.max_values:,} values; "
                "a RunPodPool has about 100"
            )

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            anchors.clear()  # anchors do not reach across documents
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) >= limits.max_depth:
                raise DocumentError(_too_deep(event, limits))
            open_nodes.append([1, event.anchor])
        elif isinstance(event, yaml.CollectionEndEvent):
            values, anchor = open_nodes.pop()
            if anchor is not None:
                anchors[anchor] = values
            counted(event, values)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                anchors[event.anchor] = 1
            counted(event, 1)
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for _, anchor in open_nodes):
                raise DocumentError(
                    f"{_line(event)}the alias *{clip(str(event.anchor), 40)} refers to a "
                    "value that contains it; a RunPodPool has no loops"
                )
            # An undefined alias is left to the loader, which names it as a syntax error.
            aliases = True
            counted(event, anchors.get(str(event.anchor), 1))


def yaml_error_text(error: yaml.YAMLError) -> str:
    """A YAML syntax error as `line L, column C: YAML syntax error: problem`."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or (str(error).splitlines() or ["unreadable"])[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}YAML syntax error: {clip(str(problem))}"


def parse_documents(data: bytes | str, *, limits: Limits = LIMITS) -> list[Any]:
    """Every non-empty YAML document in `data`; DocumentError with one line otherwise."""
    text = decode(data, limits=limits) if isinstance(data, bytes) else data
    if len(text) > limits.max_bytes:
        raise DocumentError(too_large(None, limits=limits))
    try:
        check_limits(text, limits=limits)
        documents = load_all(text)
    except DocumentError:
        raise
    except KubeYamlError as error:
        raise DocumentError(clip(str(error))) from None
    except yaml.YAMLError as error:
        if "maximum nesting depth" in str(getattr(error, "problem", "")):
            # libyaml's own cap (1,000 levels) can trip while it scans ahead of our count.
            raise DocumentError(_too_deep(error, limits)) from None
        raise DocumentError(yaml_error_text(error)) from None
    return [document for document in documents if document is not None]


def describe(document: Any) -> str:
    """A few words for what a document is, for a message saying it is not what we wanted."""
    if isinstance(document, dict):
        kind, api = document.get("kind"), document.get("apiVersion")
        if kind is None:
            keys = ", ".join(clip(str(key), 40) for key in list(document)[:5])
            more = ", ..." if len(document) > 5 else ""
            return f"a mapping without kind (keys: {keys}{more})"
        shown = clip(str(kind), 60)
        return f"kind {shown} ({clip(str(api), 60)})" if api is not None else f"kind {shown}"
    if isinstance(document, list):
        kinds = sorted({describe(item) for item in document if isinstance(item, dict)})
        inside = f": {'; '.join(kinds[:3])}" if kinds else ""
        return f"a list of {len(document)} item{'s' if len(document) != 1 else ''}{inside}"
    if isinstance(document, str):
        return f"the text {clip(document, 40)!r}"
    return f"the {type(document).__name__} value {clip(repr(document), 40)}"
