"""The deterministic YAML writer: hostile strings read back unchanged by a YAML
1.1 reader (PyYAML) and a YAML 1.2 reader (ruamel.yaml), literal blocks are
byte-exact, output does not depend on the hash seed, nothing is ever tagged."""

from __future__ import annotations

import enum
import io
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gpuplan.render.yamlwriter import dump, dump_bytes, dump_documents, dump_documents_bytes, dump_template, needs_quotes

_RUAMEL = YAML(typ="safe")  # YAML 1.2 core schema


def load12(text: str):
    return _RUAMEL.load(io.StringIO(text))


def load11(text: str):
    return yaml.safe_load(text)


HOSTILE = [
    # YAML 1.1 booleans (and the y/n forms go-yaml v2 still reads as bools)
    "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
    "y", "Y", "n", "N", "true", "True", "TRUE", "false", "False", "FALSE",
    # nulls
    "null", "Null", "NULL", "~", "",
    # numbers of either version
    "1e3", "1E3", "+1e3", "-1e-3", "1.5e+3", "0x1F", "0X1F", "012", "09", "0o17", "0b101", "1_000",
    "123", "-7", "+7", "0", "1.5", ".5", "1.", "-.5", "+.5", "1.33",
    ".inf", ".Inf", ".INF", "-.inf", "+.inf", ".nan", ".NaN", ".NAN", "-.nan",
    "12:30", "190:20:30", "-1:30", "1:30.5",
    # timestamps
    "2024-01-01", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2002-12-14",
    # special keys / indicators
    "=", "<<", "-", "?", ":", "|", ">", "!", "&", "*", "%", "@", "`", "#", ",", "[", "]", "{", "}",
    "'", '"', "- item", "-item", "? key", ": x", "key: value", "a: b: c", "value #comment", "a #b", "#c",
    "{{ .Values.x }}", "{{x}}", "[a, b]", "{a: b}", "*alias", "&anchor", "!tag", "!!str", "%YAML 1.2",
    "@at", "`cmd`", "a,b", "a]b", "a}b", "x:", "x :", "http://example.com:8080/a#b",
    # whitespace
    " lead", "trail ", "  ", " ", "\t", "a\tb", "\ttab", "tab\t",
    # line breaks
    "a\nb", "a\nb\n", "a\nb\n\n", "\n", "\n\n", "\nlead", "  indented\nsecond\n", "a\r\nb", "a\rb",
    "trailing space \nx", "a\x85b", "a\u2028b", "a\u2029b",
    # non-ASCII and odd characters
    "café", "日本語", "emoji 🚀", "\u00a0nbsp", "\ufeffbom", "\x00nul", "\x07bell", "\x1b[31m", "\x7f", "\ufffe",
    # things that look like YAML documents
    "---", "...", "--- a", "... a", "a\n---\nb", "a\n...\nb",
    # look fine and should stay plain-readable
    "nvidia.com/gpu", "3g.40gb", "500m", "16Gi", "v1", "gpu-operator", "ml-platform",
]


def _both(text: str):
    return load11(text), load12(text)


@pytest.mark.parametrize("s", HOSTILE, ids=[repr(s) for s in HOSTILE])
def test_hostile_string_round_trips_in_yaml_1_1_and_1_2(s: str) -> None:
    obj = {"value": s, s: "key", "list": [s, s], "nested": {"x": [{"k": s}]}}
    text = dump(obj)
    for loaded in _both(text):
        assert loaded == obj, text
        assert type(loaded["value"]) is str
        assert all(type(k) is str for k in loaded)
    docs = dump_documents([obj, {"a": s}])
    assert list(yaml.safe_load_all(docs)) == [obj, {"a": s}]
    assert list(_RUAMEL.load_all(io.StringIO(docs))) == [obj, {"a": s}]


@pytest.mark.parametrize(
    "s",
    ["yes", "no", "on", "off", "y", "n", "true", "null", "~", "1e3", "0x1F", "012", "0o17", "1_000", ".inf",
     "-.nan", "12:30", "2024-01-01", "=", "<<", "", "09", "1.33"],
)
def test_ambiguous_scalars_are_quoted(s: str) -> None:
    text = dump({"k": s})
    assert text.startswith("k: '") or text.startswith('k: "'), text


@pytest.mark.parametrize("s", ["nvidia.com/gpu", "500m", "16Gi", "3g.40gb", "gpu-operator", "PreemptLowerPriority"])
def test_ordinary_strings_stay_plain(s: str) -> None:
    assert dump({"k": s}) == f"k: {s}\n"


@pytest.mark.parametrize(
    "s, chomp",
    [
        ("line1\nline2\n", "|"),
        ("line1\nline2", "|-"),
        ("line1\nline2\n\n", "|+"),
        ("line1\nline2\n\n\n", "|+"),
        ("  indented\nline\n", "|2"),
        ("#!/bin/bash\necho 'hi: there' # x\n", "|"),
    ],
)
def test_multiline_strings_are_literal_blocks_and_byte_exact(s: str, chomp: str) -> None:
    obj = {"data": {"config.yaml": s}}
    text = dump(obj)
    assert f"config.yaml: {chomp}" in text, text
    for loaded in _both(text):
        assert loaded["data"]["config.yaml"] == s


def test_mime_user_data_round_trips() -> None:
    user_data = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
        "Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
        "spec:\n  kubelet:\n    config:\n      topologyManagerPolicy: restricted\n\n--//--\n"
    )
    text = dump_documents([{"spec": {"userData": user_data}}])
    assert "userData: |\n" in text
    for loaded in (yaml.safe_load(text), load12(text)):
        assert loaded["spec"]["userData"] == user_data


def test_long_strings_are_not_folded() -> None:
    s = " ".join(["word"] * 5000)
    quoted = "x: " + s  # needs quotes (": "), must not be broken either
    text = dump({"a": s, "b": quoted})
    assert text.count("\n") == 2
    assert load11(text) == {"a": s, "b": quoted} == load12(text)


def test_key_order_is_insertion_order_and_block_style() -> None:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "z", "labels": {"b": "1st", "a": "2nd"}},
           "spec": {"finalizers": ["kubernetes"]}}
    assert dump_documents([obj], header="generated by gpuplan from examples/fleet.yaml; do not edit") == (
        "# generated by gpuplan from examples/fleet.yaml; do not edit\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: Namespace\n"
        "metadata:\n"
        "  name: z\n"
        "  labels:\n"
        "    b: 1st\n"
        "    a: 2nd\n"
        "spec:\n"
        "  finalizers:\n"
        "  - kubernetes\n"
    )


def test_multi_document_and_header_lines() -> None:
    text = dump_documents([{"a": 1}, {"b": [True, None, 1.5]}], header="line one\n\nline three")
    assert text == "# line one\n#\n# line three\n---\na: 1\n---\nb:\n- true\n- null\n- 1.5\n"
    assert dump_documents([]) == ""
    assert dump_documents_bytes([{"a": "é"}]) == "---\na: é\n".encode()


def test_single_document_has_no_marker() -> None:
    assert dump({"version": "v1", "flags": {"migStrategy": "mixed"}}) == "version: v1\nflags:\n  migStrategy: mixed\n"
    assert dump_bytes({"a": 1}, header="h") == b"# h\na: 1\n"
    assert dump("text") == "text\n"
    assert dump({}) == "{}\n"
    assert dump([]) == "[]\n"


@pytest.mark.parametrize(
    "value", [0, -1, 2**70, 1.5, -0.0, 1e17, 1e-7, 3.0, float("inf"), float("-inf"), True, False, None]
)
def test_scalars_keep_their_type_in_both_versions(value) -> None:
    for loaded in _both(dump({"v": value, "l": [value]})):
        assert loaded["v"] == value or (value != value)
        assert type(loaded["v"]) is type(value)
        assert type(loaded["l"][0]) is type(value)


def test_nan_round_trips() -> None:
    for loaded in _both(dump({"v": float("nan")})):
        assert loaded["v"] != loaded["v"]


def test_subclasses_become_plain_values() -> None:
    class Mode(str, enum.Enum):
        MIG = "mig"

    class Count(enum.IntEnum):
        TWO = 2

    obj = OrderedDict([("mode", Mode.MIG), ("count", Count.TWO), ("t", ("a", "b"))])
    assert dump(obj) == "mode: mig\ncount: 2\nt:\n- a\n- b\n"


@pytest.mark.parametrize(
    "bad", [b"bytes", object(), {1, 2}, complex(1, 2), {"k": {"nested": object()}}, [bytearray(b"x")]],
    ids=["bytes", "object", "set", "complex", "nested-object", "bytearray"],
)
def test_non_plain_data_is_refused(bad) -> None:
    with pytest.raises(TypeError):
        dump({"x": bad})


def test_non_scalar_keys_are_refused() -> None:
    with pytest.raises(TypeError):
        dump({("a", "b"): 1})


def test_no_anchors_for_shared_objects() -> None:
    labels = {"app.kubernetes.io/managed-by": "gpuplan"}
    text = dump_documents([{"metadata": {"labels": labels}}, {"a": labels, "b": labels}])
    assert "&" not in text and "*" not in text
    assert list(yaml.safe_load_all(text))[1] == {"a": labels, "b": labels}


def test_no_python_tags_ever() -> None:
    text = dump_documents([{"a": ("t",), "b": OrderedDict(x=1)}])
    assert "!!" not in text and "!" not in text


def test_needs_quotes_is_a_superset_of_pyyaml_resolution() -> None:
    # Every string PyYAML's YAML 1.1 resolver reads as a non-string must be
    # flagged (the writer's resolver shortcut relies on it).
    resolver = yaml.resolver.Resolver()
    for s in HOSTILE + ["1", "-0", "0b1", "1:2:3", "2001-12-14T21:59:43Z"]:
        tag = resolver.resolve(yaml.ScalarNode, s, (True, False))
        if tag != "tag:yaml.org,2002:str":
            assert needs_quotes(s), s


_DETERMINISM_SCRIPT = r"""
import sys
from gpuplan.render.yamlwriter import dump_documents
objs = []
for i in range(200):
    objs.append({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i}", "labels": {f"k{j}": f"v{j}" for j in range(i % 7)}},
        "data": {"set-like": sorted({"b", "a", "c"}), "yes": "no", "text": "a\nb\n" * (i % 3), "n": i * 1.5},
    })
sys.stdout.write(dump_documents(objs, header="generated"))
"""


def test_output_is_identical_under_different_hash_seeds() -> None:
    outs = set()
    for seed in ("0", "1", "12345", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", _DETERMINISM_SCRIPT], env=env, capture_output=True, check=True
        )
        assert proc.stdout.startswith(b"# generated\n---\napiVersion: v1\n")
        outs.add(proc.stdout)
    assert len(outs) == 1


# Text a person could put in a name, a label, an embedded file: anything.
@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.text())
def test_any_text_round_trips_in_both_readers(s: str) -> None:
    obj = {"k": s, s: [s]}
    text = dump(obj)
    assert load11(text) == obj
    assert load12(text) == obj


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab :#-?\n\t '\"|>0123456789.eExo_+{}[]!&*%@`~=<,")), max_size=12))
def test_syntax_heavy_text_round_trips_in_both_readers(s: str) -> None:
    obj = {"k": s, s: [s, {"n": s}]}
    text = dump_documents([obj, obj])
    assert list(yaml.safe_load_all(text)) == [obj, obj]
    assert list(_RUAMEL.load_all(io.StringIO(text))) == [obj, obj]


# The text path (plain dicts, lists, ints, bools, None, short ASCII strings)
# must write exactly the bytes libyaml writes for the same objects, and every
# scalar shape it accepts must read back unchanged in YAML 1.1 and 1.2.
from gpuplan.render import yamlwriter as _yw  # noqa: E402

_SYNTAX = list("ab :#-?\t'\"|>0123456789.eExXo_+{}[]!&*%@`~=<,/")
_scalars = st.one_of(
    st.text(alphabet=st.sampled_from(_SYNTAX), max_size=8),
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=140),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
)
_keys = st.one_of(
    st.text(alphabet=st.sampled_from(_SYNTAX), max_size=8),
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=120, max_size=140),
    st.integers(min_value=-5, max_value=5),
)
_trees = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20,
)
# Mostly names, numbers and words as manifests hold them: these stay on the text path.
_plainish = st.one_of(st.from_regex(r"[a-zA-Z0-9_/][a-zA-Z0-9._/=+-]{0,15}", fullmatch=True),
                      st.sampled_from(["yes", "no", "on", "1.33", "0x1F", "1e3", "~", "", "null", "12:30"]),
                      st.integers(), st.booleans(), st.none())
_manifests = st.recursive(
    _plainish,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.from_regex(r"[a-z][a-z0-9./-]{0,12}", fullmatch=True), inner,
                                            max_size=4)),
    max_leaves=25,
)
_docs = st.lists(st.one_of(st.dictionaries(_keys, _trees, max_size=5), st.lists(_trees, max_size=4), _trees),
                 min_size=1, max_size=3)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_docs)
def test_text_path_writes_libyaml_bytes_exactly(docs) -> None:
    expected = _yw._libyaml_bytes(docs)
    out: list[str] = []
    try:
        for d in docs:
            _yw._fast_document(d, out)
    except _yw._Slow:
        assert dump_documents_bytes(docs) == expected
        return
    assert "".join(out).encode("ascii") == expected
    assert dump_documents_bytes(docs, header="h") == b"# h\n" + expected


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_scalars)
def test_every_text_path_scalar_round_trips_in_yaml_1_1_and_1_2(v) -> None:
    if type(v) is str and _yw._str_text(v) is None:
        return  # written by libyaml: covered by the tests above
    obj = {"k": v, "l": [v, {"n": v}]}
    if type(v) is str and len(v) <= 128:
        obj[v] = v
    text = dump_documents([obj])
    assert list(yaml.safe_load_all(text)) == [obj]
    assert list(_RUAMEL.load_all(io.StringIO(text))) == [obj]


def test_text_path_takes_the_common_manifest_shapes() -> None:
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "gpu", "namespace": "team-a", "labels": {"on": "yes", "v": "1.33"}},
             "spec": {"hard": {"requests.nvidia.com/gpu": "8", "count": 3, "x": None, "b": True},
                      "scopeSelector": {"matchExpressions": [{"operator": "In", "values": ["a", "b"]}]},
                      "empty": {}, "none": [], "nested": [[1, [2]], []]}}
    out: list[str] = []
    _yw._fast_document(quota, out)  # does not fall back
    assert "".join(out).encode() == _yw._libyaml_bytes([quota])
    assert "  labels:\n    'on': 'yes'\n    v: '1.33'\n" in "".join(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.from_regex(r"[a-z][a-z0-9./-]{0,12}", fullmatch=True), _manifests,
                                min_size=1, max_size=5), min_size=1, max_size=3))
@pytest.mark.slow
def test_text_path_manifest_like_objects(docs) -> None:
    out: list[str] = []
    for d in docs:
        _yw._fast_document(d, out)  # all of these are text-path shapes
    text = "".join(out)
    assert text.encode("ascii") == _yw._libyaml_bytes(docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert list(_RUAMEL.load_all(io.StringIO(text))) == docs


def _pod(ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x-example", "namespace": ns},
            "spec": {"containers": [{"name": "main", "image": "img:1"}]}}


@pytest.mark.parametrize("s", HOSTILE + ["on", "123", "2001-01-01", "0x1f", "team-a", "é"], ids=repr)
def test_dump_template_is_the_full_dump(s: str) -> None:
    assert dump_template(_pod)(s) == dump(_pod(s))


@given(st.text(max_size=12))
@settings(max_examples=300, deadline=None)
def test_dump_template_is_the_full_dump_for_any_value(s: str) -> None:
    assert dump_template(_pod)(s) == dump(_pod(s))


@pytest.mark.parametrize("make", [
    lambda v: {"name": f"{v}-example", "namespace": v},  # the value twice
    lambda v: {"name": f"x-{v}"},  # inside another string
    lambda v: {"names": [v]},  # a sequence item
    lambda v: {v: "key"},  # a key
    lambda v: {"a": "multi\nline", "namespace": v},  # a document only libyaml writes
])
@pytest.mark.parametrize("s", ["on", "123", "ns", "a: b"])
def test_dump_template_falls_back_where_it_cannot_substitute(make, s: str) -> None:
    assert dump_template(make)(s) == dump(make(s))
