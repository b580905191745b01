"""The one deterministic YAML writer for every manifest gpuplan emits.

Objects are plain data (dict/list/tuple, str, int, float, bool, None; any
``Mapping``/``Sequence`` is accepted) and come out:

* in insertion order (never sorted, never hash order), block style, 2-space
  indent, Kubernetes-style "indentless" sequences (``key:\\n- item``);
* with every string that a YAML 1.1 reader (PyYAML, go-yaml v2 as used by
  sigs.k8s.io/yaml) or a YAML 1.2 reader (ruamel.yaml, go-yaml v3) could read
  as something else quoted, so the text reads back as the same string in all
  of them;
* multi-line strings as literal blocks (``|``/``|-``/``|+`` chosen by libyaml
  from the trailing newlines, so the text round-trips byte-exact);
* without anchors, aliases or Python tags: anything else raises TypeError.

Speed matters (tens of thousands of objects per build). Almost every manifest
is plain dicts, lists, ints and short ASCII strings, so those are written as
text directly (``_fast_document``), each string's rendering decided once and
memoised. Any document holding something else (multi-line or non-ASCII text,
strings libyaml would quote for syntax, long keys, floats, subclasses ...)
sends its whole stream to libyaml's C emitter (``yaml.CSafeDumper``) with a
closed representer and resolver. The text path only accepts what it writes
byte-identically to the libyaml path; tests/render/test_yamlwriter.py checks
that with generated objects, and benchmarks/floor_build.py measures both.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

__all__ = ["dump", "dump_documents", "dump_bytes", "dump_documents_bytes", "dump_template", "needs_quotes"]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"

# Plain scalars some reader resolves to a non-string: booleans of YAML 1.1
# (including the y/n forms go-yaml v2 still honours), nulls, the special
# floats, merge/value keys and the indicator-only words.
_WORDS = frozenset(
    [
        v
        for w in ("y", "yes", "n", "no", "true", "false", "on", "off", "null")
        for v in (w, w.capitalize(), w.upper())
    ]
    + [s + "." + w for s in ("", "+", "-") for w in ("inf", "Inf", "INF", "nan", "NaN", "NAN")]
    + ["~", "", "=", "<<", "!", "&", "*", "-", "?", ":", "|", ">"]
)

# Anything that starts like a number and consists only of characters found in
# YAML 1.1/1.2 ints, floats (exponent, `_`, `.`), hex/octal/binary prefixes,
# sexagesimal `:` and timestamps (`T`, `Z`, space, sign). Deliberately broader
# than any one schema: quoting a harmless string costs two characters, while
# missing one turns `1e3` into 1000.0 in a 1.2 reader. Quantities such as
# `500m`, `16Gi` and profile names such as `1g.10gb` stay plain (they contain a
# letter no number form uses).
_NUMBERISH = re.compile(r"[-+]?[0-9_.][0-9a-fA-F_.:xXoOtTzZ \t+-]*").fullmatch

# Characters that are line breaks to a YAML reader but would not survive a
# literal block unchanged (it normalises them to `\n`): force double quotes.
_ODD_BREAK = re.compile("[\r\x85\u2028\u2029]").search


def needs_quotes(s: str) -> bool:
    """True when plain ``s`` could be read as a non-string by some YAML reader.

    Only the *resolution* ambiguities are decided here; libyaml itself quotes
    strings whose syntax forbids a plain scalar (``: ``, `` #``, leading
    indicators, surrounding spaces, control characters ...)."""
    return s in _WORDS or _NUMBERISH(s) is not None


class _Dumper(yaml.CSafeDumper):
    """CSafeDumper with a closed, fast representer and a resolver that agrees
    with it. Instances are single-use (one per dump call)."""

    def represent_data(self, data: Any) -> Any:
        t = type(data)
        if t is str:
            style = _STYLE_MEMO.get(data, _MISS)
            if style is _MISS:
                style = _str_style(data)
            return ScalarNode(_STR, data, None, None, style)
        if t is dict:
            rep = self.represent_data
            return MappingNode(
                _MAP,
                [
                    (
                        rep(k) if type(k) is str else self.represent_key(k),
                        rep(v),
                    )
                    for k, v in data.items()
                ],
                None,
                None,
                False,
            )
        if t is list:
            rep = self.represent_data
            return SequenceNode(_SEQ, [rep(v) for v in data], None, None, False)
        if t is int:
            return ScalarNode(_INT, int.__repr__(data), None, None, None)
        if t is bool:
            return ScalarNode(_BOOL, "true" if data else "false", None, None, None)
        if data is None:
            return ScalarNode(_NULL, "null", None, None, None)
        if t is float:
            return ScalarNode(_FLOAT, _float_text(data), None, None, None)
        return self.represent_data(_plain_value(data))

    def represent_key(self, key: Any) -> Any:
        if isinstance(key, (str, int, float)) or key is None:
            return self.represent_data(key)
        raise TypeError(f"mapping keys must be scalars, not {type(key).__qualname__}")

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # libyaml asks twice per scalar whether the plain / quoted form would
        # read back with the node's tag. The quoted form always resolves to str
        # (there are no path resolvers). For the plain form, the word set and
        # regex are a superset of PyYAML's YAML 1.1 resolvers, so text they pass
        # is a plain string; the rest (including the text of int/float/bool/null
        # nodes) goes to PyYAML's resolver.
        if kind is ScalarNode:
            if not implicit[0]:
                return _STR
            tag = _TAG_MEMO.get(value)
            if tag is None:
                tag = _plain_tag(self, value)
            return tag
        return _BASE_RESOLVE(self, kind, value, implicit)

    # Called by libyaml's serializer around every node; gpuplan registers no
    # path resolvers, so they do nothing. C builtins that accept the same
    # arguments are several times cheaper than a Python no-op method.
    descend_resolver = slice  # slice(parent, index): discarded
    ascend_resolver = tuple  # tuple(): discarded


_BASE_RESOLVE = yaml.CSafeDumper.resolve

# Manifests repeat the same few thousand strings (keys, label values, names)
# over and over; remembering each one's style and plain tag skips the regex
# for them. Pure functions of the string, so sharing them is safe; bounded so a
# long-lived process does not grow without end.
_MEMO_MAX = 1 << 16
_STYLE_MEMO: dict[str, str | None] = {}
_TAG_MEMO: dict[str, str] = {}
_MISS = object()


def _remember(memo: dict[str, Any], s: str, value: Any) -> Any:
    """Store a per-string decision in a bounded memo (short strings only: names,
    label values and keys repeat; long text rarely does)."""
    if len(s) <= 256:
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[s] = value
    return value


def _str_style(s: str) -> str | None:
    if s in _WORDS or _NUMBERISH(s) is not None:
        style: str | None = "'"
    elif "\n" in s:
        style = '"' if _ODD_BREAK(s) else "|"
    else:
        style = None
    return _remember(_STYLE_MEMO, s, style)


def _plain_tag(dumper: Any, s: str) -> str:
    if s in _WORDS or _NUMBERISH(s) is not None:
        tag = _BASE_RESOLVE(dumper, ScalarNode, s, (True, False))
    else:
        tag = _STR
    return _remember(_TAG_MEMO, s, tag)


def _plain_value(data: Any) -> Any:
    """Subclasses (str enums, IntEnum, OrderedDict, tuples) become the base
    value; anything else is refused rather than written with a Python tag."""
    if isinstance(data, bool):
        return bool(data)
    if isinstance(data, str):
        return str.__str__(data)
    if isinstance(data, int):
        return int(data)
    if isinstance(data, float):
        return float(data)
    if isinstance(data, Mapping):
        return dict(data.items())
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes, bytearray, memoryview)):
        return list(data)
    t = type(data)
    raise TypeError(
        f"cannot write a {t.__module__}.{t.__qualname__} as YAML: "
        "only str, int, float, bool, None, mappings and sequences"
    )


def _float_text(f: float) -> str:
    if f != f:
        return ".nan"
    if f == float("inf"):
        return ".inf"
    if f == float("-inf"):
        return "-.inf"
    text = repr(f).lower()
    # `1e+17` is a float in YAML 1.2 but a string in YAML 1.1, which needs a dot.
    if "." not in text and "e" in text:
        text = text.replace("e", ".0e", 1)
    return text


class _Sink:
    """A write() target collecting libyaml's UTF-8 output chunks (no decode)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        self.parts.append(chunk)


def _header_bytes(header: str | None) -> bytes:
    if not header:
        return b""
    lines = header.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join(f"# {ln}\n" if ln else "#\n" for ln in lines).encode("utf-8")


# --- text path -------------------------------------------------------------
#
# A string is written by the text path only when libyaml, with the settings of
# ``_libyaml_bytes``, would write it plain (or, when ``needs_quotes``, in single
# quotes) on one line: printable ASCII, no leading/trailing space, not starting
# with an indicator (``-?:,[]{}#&*!|>'"%@` ``) or a document marker, no ``: ``,
# `` #`` or trailing ``:`` (libyaml's analyze_scalar, block context). Everything
# else returns None and the stream goes to libyaml.
_TEXT_SAFE = re.compile(r"(?![-?:,\[\]{}#&*!|>'\"%@`])[!-~]([ -~]*[!-9;-~])?").fullmatch
_ASCII_PRINTABLE = re.compile(r"[ -~]*").fullmatch
_TEXT_MEMO: dict[str, str | None] = {}
_KEY_MAX = 128  # libyaml writes longer keys as `? key` (yaml_emitter_check_simple_key)


class _Slow(Exception):
    """The object holds something only the libyaml path writes."""


def _str_text(s: str) -> str | None:
    text: str | None
    if s in _WORDS or _NUMBERISH(s) is not None:
        # libyaml single-quotes these (the style `_str_style` asks for) unless a
        # tab or other non-printable character forces double quotes.
        text = "'" + s.replace("'", "''") + "'" if _ASCII_PRINTABLE(s) else None
    elif _TEXT_SAFE(s) is None or ": " in s or " #" in s or s.startswith("..."):
        text = None
    else:
        text = s
    return _remember(_TEXT_MEMO, s, text)


def _scalar(v: Any) -> str:
    t = type(v)
    if t is str:
        text = _TEXT_MEMO.get(v, _MISS)
        if text is _MISS:
            text = _str_text(v)
        if text is None:
            raise _Slow
        return text  # type: ignore[return-value]
    if t is int:
        return int.__repr__(v)
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "null"
    raise _Slow


def _fast_map(d: dict, pad: str, out: list, inline: bool) -> None:
    memo = _TEXT_MEMO
    for k, v in d.items():
        # str keys and values inline (the memo hit is the common case)
        if type(k) is str:
            kt = memo.get(k, _MISS)
            if kt is _MISS:
                kt = _str_text(k)
            if kt is None or len(k) > _KEY_MAX:
                raise _Slow
        else:
            kt = _scalar(k)
        head = (out.pop() + kt) if inline else (pad + kt)
        inline = False
        t = type(v)
        if t is str:
            vt = memo.get(v, _MISS)
            if vt is _MISS:
                vt = _str_text(v)
            if vt is None:
                raise _Slow
            out.append(f"{head}: {vt}\n")
        elif t is dict:
            if v:
                out.append(head + ":\n")
                _fast_map(v, pad + "  ", out, False)
            else:
                out.append(head + ": {}\n")
        elif t is list:
            if v:
                out.append(head + ":\n")
                _fast_seq(v, pad, out, False)  # Kubernetes-style indentless sequence
            else:
                out.append(head + ": []\n")
        else:
            out.append(f"{head}: {_scalar(v)}\n")


def _fast_seq(items: list, pad: str, out: list, inline: bool) -> None:
    for v in items:
        head = (out.pop() if inline else pad) + "- "
        inline = False
        t = type(v)
        if t is dict:
            if v:
                out.append(head)
                _fast_map(v, pad + "  ", out, True)
            else:
                out.append(head + "{}\n")
        elif t is list:
            if v:
                out.append(head)
                _fast_seq(v, pad + "  ", out, True)
            else:
                out.append(head + "[]\n")
        else:
            out.append(head + _scalar(v) + "\n")


def _fast_document(obj: Any, out: list) -> None:
    t = type(obj)
    if t is dict and obj:
        out.append("---\n")
        _fast_map(obj, "", out, False)
    elif t is list and obj:
        out.append("---\n")
        _fast_seq(obj, "", out, False)
    else:
        raise _Slow  # a root scalar or empty collection: libyaml's `--- x` forms


def dump_documents_bytes(objs: Sequence[Any], *, header: str | None = None) -> bytes:
    """UTF-8 YAML stream: optional ``# header`` lines, then each object as a
    document that starts with ``---``. Byte-identical for equal input."""
    out: list[str] = []
    try:
        for obj in objs:
            _fast_document(obj, out)
    except _Slow:
        return _libyaml_bytes(objs, _header_bytes(header))
    return _header_bytes(header) + "".join(out).encode("ascii")


def _libyaml_bytes(objs: Sequence[Any], head: bytes = b"") -> bytes:
    sink = _Sink()
    if head:
        sink.parts.append(head)  # joined once with the stream (a large file is not copied again)
    dumper = _Dumper(
        sink,
        default_style=None,
        default_flow_style=False,
        indent=2,
        width=2**31 - 1,  # libyaml folds nothing below this: long strings stay on one line
        allow_unicode=True,
        line_break="\n",
        encoding="utf-8",
        explicit_start=True,
        explicit_end=False,
        sort_keys=False,
    )
    try:
        dumper.open()
        for obj in objs:
            dumper.represent(obj)
        dumper.close()
    finally:
        dumper.dispose()
    return b"".join(sink.parts)


def dump_documents(objs: Sequence[Any], *, header: str | None = None) -> str:
    """Like :func:`dump_documents_bytes`, as text."""
    return dump_documents_bytes(objs, header=header).decode("utf-8")


def dump_bytes(obj: Any, *, header: str | None = None) -> bytes:
    """One document (Helm values.yaml, a ConfigMap payload) without ``---``."""
    out = dump_documents_bytes([obj], header=header)
    head = _header_bytes(header)
    body = out[len(head) :]
    # libyaml puts `---` on its own line, or `--- ` before a top-level scalar.
    if body.startswith(b"---\n"):
        body = body[4:]
    elif body.startswith(b"--- "):
        body = body[4:]
    return head + body


def dump(obj: Any, *, header: str | None = None) -> str:
    """Like :func:`dump_bytes`, as text."""
    return dump_bytes(obj, header=header).decode("utf-8")


# What dump_template dumps in place of the varying value: a plain scalar no manifest holds
_HOLE = "gpuplan-yamlwriter-template-value"


def dump_template(make: Callable[[str], Any]) -> Callable[[str], str]:
    """``lambda v: dump(make(v))`` for objects that differ only in one string: ``make(v)``
    holds ``v`` once, as a mapping value, and nothing else of it depends on ``v`` (a tier's
    example Pod in each tenant's namespace). ``make`` is dumped once, with a placeholder for
    ``v``, and each ``v`` is written into its place. The text path writes a mapping value as
    ``key: <_str_text(value)>`` wherever it stands, so that is byte-identical to the full dump
    when the text path writes the placeholder's object, the placeholder stands in its text
    exactly once as a whole value, and the text path writes ``v`` (plain, or single-quoted
    when ``needs_quotes``); anything else is the full dump."""
    out: list[str] = []
    try:
        _fast_document(make(_HOLE), out)
    except _Slow:
        out = []
    text = "".join(out)[len("---\n"):]
    parts = text.split(_HOLE) if text.count(_HOLE) == 1 and f": {_HOLE}\n" in text else None

    def one(v: str) -> str:
        vt = _TEXT_MEMO.get(v, _MISS) if type(v) is str else None
        if vt is _MISS:
            vt = _str_text(v)
        if parts is None or vt is None:
            return dump(make(v))
        return parts[0] + vt + parts[1]  # type: ignore[operator]

    return one
