"""rpp/model/documents.py: bytes to YAML documents within limits, and what is echoed back."""

from __future__ import annotations

import pytest

from rpp.model.documents import DocumentError, Limits, clip, describe, parse_documents

SMALL = Limits(max_bytes=4096, max_depth=4, max_values=50)


def test_documents_come_back_in_order_without_empty_ones() -> None:
    data = b"a: 1\n---\n---\n- x\n...\n"
    assert parse_documents(data) == [{"a": 1}, ["x"]]


def test_a_utf8_byte_order_mark_is_accepted() -> None:
    assert parse_documents("\ufeffkind: RunPodPool\n".encode()) == [{"kind": "RunPodPool"}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("kind: x\n".encode("utf-16-le"), "is UTF-16 text"),
        ("kind: x\n".encode("utf-16-be"), "is UTF-16 text"),
        ("kind: x\n".encode("utf-32"), "is UTF-32 text"),
        (b"\x89PNG\r\n\x1a\n", "is not UTF-8 text (byte 0x89 at offset 0)"),
        (b"\x7fELF\x02\x01\x01\x00rest", "holds a NUL byte at offset 7"),
        (b"a: " + b"x" * 5000, "is larger than 4.0 KiB; rpp reads YAML files up to 4.0 KiB"),
    ],
)
def test_what_is_not_utf8_yaml_text_is_named(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_documents(data, limits=SMALL)


def test_depth_is_counted_to_the_limit_and_no_further() -> None:
    assert parse_documents(b"a: {b: {c: [1]}}", limits=SMALL) == [{"a": {"b": {"c": [1]}}}]
    with pytest.raises(DocumentError, match=r"^line 1: nests deeper than 4 levels"):
        parse_documents(b"a: {b: {c: [[1]]}}", limits=SMALL)


def test_values_are_counted_with_aliases_expanded() -> None:
    # 3 + 3 * 3 + ... : the anchor's size is added at each alias, nothing is expanded.
    fits = b"a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
    assert parse_documents(fits, limits=SMALL)[0]["b"] == [[1, 2, 3]] * 3
    bomb = fits + b"c: &c [*a, *a, *a, *a]\nd: [*c, *c, *c]\n"
    with pytest.raises(DocumentError, match=r"^line 4: holds more than 50 values once its YAML"):
        parse_documents(bomb, limits=SMALL)


def test_merge_keys_count_what_they_copy() -> None:
    base = b"base: &b {" + b", ".join(b"k%d: 1" % i for i in range(10)) + b"}\n"
    merged = base + b"".join(b"m%d: {<<: *b}\n" % i for i in range(5))
    with pytest.raises(DocumentError, match="holds more than 50 values"):
        parse_documents(merged, limits=SMALL)


def test_many_plain_values_are_refused_without_talking_of_aliases() -> None:
    with pytest.raises(DocumentError, match=r"holds more than 50 values; a RunPodPool has about"):
        parse_documents(b"[" + b"1, " * 60 + b"1]", limits=SMALL)


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"the alias \*x refers to a value that contains it"):
        parse_documents(b"a: &x [1, *x]")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"a: [1,\nb: 2\n", r"^line 3, column 1: YAML syntax error: did not find expected"),
        (b"a: *nowhere\n", r"^line 1, column 4: YAML syntax error: found undefined alias"),
        (b"~: 1\n", r"^line 1: a mapping key is null \(~ or nothing\); kubectl cannot"),
        (b"a: !!int x\n", r"^line 1: cannot read !!str `x` as a !!int; fix the value"),
    ],
)
def test_yaml_mistakes_are_one_line(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message) as caught:
        parse_documents(data)
    assert "\n" not in str(caught.value)


def test_values_kubectl_reads_as_text_are_text_not_errors() -> None:
    """PyYAML refused these (Python's 4,300-digit limit, a date past December); kubectl
    reads both as text (go-yaml v2: ParseInt and ParseFloat out of range, no timestamp)."""
    assert parse_documents(b"a: " + b"9" * 5000) == [{"a": "9" * 5000}]
    assert parse_documents(b"when: 2026-13-45\n") == [{"when": "2026-13-45"}]


def test_clip_keeps_short_text_and_says_how_much_it_cut() -> None:
    assert clip("short") == "short"
    assert clip("x" * 1000, 10) == "xxxxxxxxxx... (990 more characters not shown)"


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"kind": "Deployment", "apiVersion": "apps/v1"}, "kind Deployment (apps/v1)"),
        ({"kind": "ConfigMap"}, "kind ConfigMap"),
        ({"spec": {}, "metadata": {}}, "a mapping without kind (keys: spec, metadata)"),
        (
            [{"kind": "RunPodPool", "apiVersion": "v"}] * 2,
            "a list of 2 items: kind RunPodPool (v)",
        ),
        (["a"], "a list of 1 item"),
        ("text", "the text 'text'"),
        (3, "the int value 3"),
        ("y" * 10_000, "the text 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy... (9,960 more"),
    ],
)
def test_a_document_is_described_in_a_few_words(document: object, words: str) -> None:
    assert describe(document).startswith(words)
    assert len(describe(document)) < 200
