"""Load YAML into plain data with source positions — safely.

The loader drives ruamel.yaml's libyaml-backed event parser (pure-Python
ruamel when the C extension is missing) and builds plain dicts, lists and
scalars itself, in one pass. Building from events rather than from a composed
node tree is what lets it, cheaply and before any other stage sees the data:

* record the line and column of every key and value (``Document.locate``);
* reject duplicate keys (YAML says they are an error; most loaders keep the
  last one silently);
* bound nesting depth, so a file of ten thousand ``[`` cannot exhaust a stack;
* bound the *expanded* size of aliases, so a billion-laughs file fails in
  microseconds instead of taking the validator down;
* refuse tags that would construct anything but plain data.

Scalars are resolved with the YAML 1.2 core schema: ``on``/``yes`` stay
strings, ``012`` is the integer 12.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
# Upper bound on the number of values after alias expansion. A real fleet of
# 2,000 nodes and 1,000 tenants is well under 200k.
MAX_EXPANDED_NODES = 2_000_000

Path_ = tuple  # spec path: tuple of str keys and int indices

E_SYNTAX = Code(
    "GP001", "YAML syntax error", Severity.ERROR,
    "The file is not valid YAML.",
    bad="pools:\n  - name: train\n   gpu: A100  # inconsistent indentation",
    good="pools:\n  - name: train\n    gpu: A100",
)
E_DUPLICATE_KEY = Code(
    "GP002", "duplicate key", Severity.ERROR,
    "A mapping has the same key twice. YAML forbids it and most tools silently keep the last value.",
    bad="name: train\ngpu: A100-SXM4-80GB\nname: training",
    good="name: train\ngpu: A100-SXM4-80GB",
)
E_EMPTY = Code(
    "GP003", "empty document", Severity.ERROR,
    "The file holds no YAML document (or only comments).",
    bad="# nothing here", good="apiVersion: gpuplan.dev/v1alpha1\nkind: Fleet\n...",
)
E_NOT_MAPPING = Code(
    "GP004", "document is not a mapping", Severity.ERROR,
    "The top level of the file must be a mapping (apiVersion, kind, metadata, spec).",
    bad="- apiVersion: gpuplan.dev/v1alpha1", good="apiVersion: gpuplan.dev/v1alpha1",
)
E_MULTI_DOC = Code(
    "GP005", "more than one document", Severity.ERROR,
    "The file holds several YAML documents (`---`); a fleet spec is exactly one.",
    bad="apiVersion: gpuplan.dev/v1alpha1\n---\napiVersion: gpuplan.dev/v1alpha1",
    good="apiVersion: gpuplan.dev/v1alpha1",
)
E_ALIAS_BOMB = Code(
    "GP006", "alias expansion too large", Severity.ERROR,
    "Anchors and aliases expand to more values than any real spec holds "
    "(a 'billion laughs' document).",
    bad='a: &a ["x", "x"]\nb: &b [*a, *a]\nc: &c [*b, *b]  # ... doubling 30 times',
    good="defaults: &gpu {gpu: A100-SXM4-80GB}\npools:\n  - {<<: *gpu, name: train}",
)
E_TOO_LARGE = Code(
    "GP007", "file too large", Severity.ERROR,
    f"The file is larger than the limit ({MAX_BYTES // (1024 * 1024)} MiB).",
)
E_BINARY = Code(
    "GP008", "not UTF-8 text", Severity.ERROR,
    "The file is binary or not UTF-8 encoded.",
)
E_TOO_DEEP = Code(
    "GP009", "nesting too deep", Severity.ERROR,
    f"Mappings and lists nest deeper than {MAX_DEPTH} levels.",
)
E_UNREADABLE = Code(
    "GP010", "cannot read file", Severity.ERROR,
    "The file does not exist or cannot be read.",
)
E_TAG = Code(
    "GP011", "unsupported YAML tag", Severity.ERROR,
    "Only the standard tags (!!str, !!int, !!float, !!bool, !!null, !!map, !!seq) are accepted; "
    "tags that construct objects are refused.",
    bad="name: !!python/object:os.system ls", good='name: "train"',
)
E_KEY = Code(
    "GP012", "unsupported mapping key", Severity.ERROR,
    "Mapping keys must be plain scalars (strings).",
    bad="? [a, b]\n: value", good="a: value",
)

CODES = (
    E_SYNTAX, E_DUPLICATE_KEY, E_EMPTY, E_NOT_MAPPING, E_MULTI_DOC, E_ALIAS_BOMB,
    E_TOO_LARGE, E_BINARY, E_TOO_DEEP, E_UNREADABLE, E_TAG, E_KEY,
)


@dataclass
class Document:
    """Plain data plus where each piece came from (1-based line and column)."""

    file: str
    data: Any
    value_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    key_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: Path_, *, key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path``; for a path the file does not contain (a missing
        key, a value inside an alias) the nearest enclosing one."""
        p = tuple(path)
        while True:
            if key and p in self.key_pos:
                return self.key_pos[p]
            if p in self.value_pos:
                return self.value_pos[p]
            if p in self.key_pos:
                return self.key_pos[p]
            if not p:
                return (1, 1)
            p = p[:-1]


class LoadError(Exception):
    def __init__(self, diag: Diagnostic):
        super().__init__(diag.message)
        self.diag = diag


# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(nan|NaN|NAN)\Z")

_STD_TAGS = {
    "tag:yaml.org,2002:str": "str",
    "tag:yaml.org,2002:int": "int",
    "tag:yaml.org,2002:float": "float",
    "tag:yaml.org,2002:bool": "bool",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:map": "map",
    "tag:yaml.org,2002:seq": "seq",
    "!": "str",  # non-specific tag on a quoted scalar
}


def _resolve_plain(v: str) -> Any:
    if v in _NULL:
        return None
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    c = v[0]
    if c.isdigit() or c in "+-.":
        if _INT.match(v):
            return int(v, 10)
        if _OCT.match(v):
            return int(v[2:], 8)
        if _HEX.match(v):
            return int(v[2:], 16)
        if _FLOAT.match(v):
            return float(v)
        if _INF.match(v):
            return float("-inf") if v[0] == "-" else float("inf")
        if _NAN.match(v):
            return float("nan")
    return v


def _pure_parser(text: str) -> Any:
    """ruamel's pure-Python parser: the same events, for when the C extension is missing."""
    from ruamel.yaml.loader import SafeLoader

    return SafeLoader(text)


def _parser_class():
    from ruamel.yaml.resolver import BaseResolver

    try:
        from ruamel.yaml.cyaml import CParser as _P
    except ImportError:
        return _pure_parser

    class _Parser(_P, BaseResolver):
        def __init__(self, text: str) -> None:
            _P.__init__(self, text)
            BaseResolver.__init__(self)

    return _Parser


def _short_tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


def _mark(ev: Any) -> tuple[int, int]:
    m = ev.start_mark
    return (m.line + 1, m.column + 1)


class _Builder:
    """Turns the event stream of one document into plain data."""

    def __init__(self, file: str, parser: Any) -> None:
        from ruamel.yaml import events as ev

        self.ev = ev
        self.file = file
        self.p = parser
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, expanded size)
        self.expanded = 0
        self.value_pos: dict[Path_, tuple[int, int]] = {}
        self.key_pos: dict[Path_, tuple[int, int]] = {}

    def fail(self, code: Code, message: str, pos: tuple[int, int], hint: str | None = None):
        raise LoadError(code.diag(message, file=self.file, line=pos[0], col=pos[1], hint=hint))

    def _count(self, n: int, pos: tuple[int, int]) -> None:
        self.expanded += n
        if self.expanded > MAX_EXPANDED_NODES:
            self.fail(
                E_ALIAS_BOMB,
                f"aliases expand to more than {MAX_EXPANDED_NODES:,} values",
                pos,
                hint="remove the recursive anchors; gpuplan specs never need this many values",
            )

    def node(self, path: Path_, depth: int) -> tuple[Any, int]:
        """Build the node starting at the next event. Returns (value, expanded size)."""
        ev = self.ev
        e = self.p.get_event()
        pos = _mark(e)
        self.value_pos[path] = pos
        if isinstance(e, ev.AliasEvent):
            if e.anchor not in self.anchors:
                self.fail(E_SYNTAX, f"unknown alias *{e.anchor}", pos)
            value, size = self.anchors[e.anchor]
            self._count(size, pos)
            return value, size
        if depth > MAX_DEPTH:
            self.fail(E_TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels", pos)
        tag = getattr(e, "tag", None)
        kind = None
        if tag is not None:
            kind = _STD_TAGS.get(tag)
            if kind is None:
                self.fail(E_TAG, f"tag {_short_tag(tag)} is not allowed", pos,
                          hint="remove the tag; gpuplan reads plain YAML data only")
        if isinstance(e, ev.ScalarEvent):
            value = self.scalar(e, kind, pos)
            size = 1
        elif isinstance(e, ev.SequenceStartEvent):
            if kind not in (None, "seq"):
                self.fail(E_TAG, f"tag {tag} does not fit a list", pos)
            value, size = self.sequence(path, depth)
        elif isinstance(e, ev.MappingStartEvent):
            if kind not in (None, "map"):
                self.fail(E_TAG, f"tag {tag} does not fit a mapping", pos)
            value, size = self.mapping(path, depth, pos)
        else:  # pragma: no cover - the parser only yields the above here
            self.fail(E_SYNTAX, f"unexpected {type(e).__name__}", pos)
        self._count(1, pos)
        anchor = getattr(e, "anchor", None)
        if anchor is not None:
            self.anchors[anchor] = (value, size)
        return value, size

    def scalar(self, e: Any, kind: str | None, pos: tuple[int, int]) -> Any:
        v = e.value
        plain = e.style is None or e.style == ""
        if kind is None:
            return _resolve_plain(v) if plain else v
        if kind == "str":
            return v
        resolved = _resolve_plain(v)
        want = {"int": int, "float": (int, float), "bool": bool, "null": type(None)}.get(kind)
        if want is None or not isinstance(resolved, want) or (kind == "int" and isinstance(resolved, bool)):
            self.fail(E_TAG, f"{v!r} is not a valid !!{kind}", pos)
        return float(resolved) if kind == "float" else resolved

    def sequence(self, path: Path_, depth: int) -> tuple[list, int]:
        out: list = []
        size = 1
        SeqEnd = self.ev.SequenceEndEvent
        while not self.p.check_event(SeqEnd):
            value, n = self.node(path + (len(out),), depth + 1)
            out.append(value)
            size += n
        self.p.get_event()
        return out, size

    def mapping(self, path: Path_, depth: int, pos: tuple[int, int]) -> tuple[dict, int]:
        ev = self.ev
        out: dict = {}
        size = 1
        merges: list[dict] = []
        while not self.p.check_event(ev.MappingEndEvent):
            k = self.p.get_event()
            kpos = _mark(k)
            if not isinstance(k, ev.ScalarEvent):
                self.fail(E_KEY, "mapping keys must be plain strings", kpos)
            key = k.value
            if key == "<<" and (k.style is None or k.style == ""):
                value, n = self.node(path + ("<<",), depth + 1)
                size += n
                for m in value if isinstance(value, list) else [value]:
                    if not isinstance(m, dict):
                        self.fail(E_SYNTAX, "a merge key (<<) needs a mapping or a list of mappings", kpos)
                    merges.append(m)
                continue
            kp = path + (key,)
            if key in out:
                first = self.key_pos.get(kp, (None, None))[0]
                self.fail(
                    E_DUPLICATE_KEY,
                    f"duplicate key {key!r}" + (f" (first defined on line {first})" if first else ""),
                    kpos,
                    hint="remove one of the two entries",
                )
            self.key_pos[kp] = kpos
            value, n = self.node(kp, depth + 1)
            out[key] = value
            size += n
        self.p.get_event()
        for m in merges:  # explicit keys win over merged ones (YAML merge semantics)
            for mk, mv in m.items():
                out.setdefault(mk, mv)
        return out, size


def load_text(text: str, file: str) -> Document:
    """Parse YAML text (one document) into a ``Document``. Raises ``LoadError``."""
    from ruamel.yaml import events as ev
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    parser = _parser_class()(text)
    b = _Builder(file, parser)
    try:
        parser.get_event()  # StreamStart
        if parser.check_event(ev.StreamEndEvent):
            raise LoadError(E_EMPTY.diag("the file holds no YAML document", file=file, line=1, col=1,
                                         hint="start from examples/fleet.yaml"))
        parser.get_event()  # DocumentStart
        data, _ = b.node((), 1)
        parser.get_event()  # DocumentEnd
        if not parser.check_event(ev.StreamEndEvent):
            e = parser.get_event()
            line, col = _mark(e)
            raise LoadError(E_MULTI_DOC.diag(
                "the file holds more than one YAML document", file=file, line=line, col=col,
                hint="a fleet spec is exactly one document: remove the `---` and what follows"))
    except LoadError:
        raise
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        problem = exc.problem or exc.context or "invalid YAML"
        raise LoadError(E_SYNTAX.diag(problem, file=file, line=line, col=col,
                                      hint=_syntax_hint(problem))) from None
    except (YAMLError, ValueError, TypeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise LoadError(E_SYNTAX.diag(str(exc).splitlines()[0] if str(exc) else "invalid YAML",
                                      file=file, line=line, col=col)) from None
    if data is None:
        raise LoadError(E_EMPTY.diag("the document is empty", file=file, line=1, col=1,
                                     hint="start from examples/fleet.yaml"))
    return Document(file=file, data=data, value_pos=b.value_pos, key_pos=b.key_pos)


def _syntax_hint(problem: str) -> str | None:
    if "tab" in problem:
        return "YAML indentation must use spaces, not tabs"
    if "mapping values are not allowed" in problem:
        return "a value containing ': ' must be quoted, or the indentation is off"
    if "could not find expected ':'" in problem:
        return "check the indentation of this line and the one above"
    return None


def read_source(path: Path | str, *, display: str | None = None, max_bytes: int = MAX_BYTES) -> str:
    """Read a file as UTF-8 text within the size limit. Raises ``LoadError``."""
    p = Path(path)
    name = display or str(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise LoadError(E_UNREADABLE.diag(f"cannot read {name}: {exc.strerror or exc}", file=name)) from None
    if len(raw) > max_bytes:
        raise LoadError(E_TOO_LARGE.diag(
            f"the file is larger than {max_bytes // (1024 * 1024)} MiB", file=name, line=1, col=1,
            hint="split inventory into several files; a fleet spec is far smaller"))
    return decode_source(raw, name)


def decode_source(raw: bytes, name: str) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise LoadError(E_BINARY.diag("the file contains NUL bytes: it is binary, not YAML",
                                      file=name, line=line, col=nul - raw.rfind(b"\n", 0, nul)))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise LoadError(E_BINARY.diag(f"the file is not UTF-8 (byte 0x{raw[exc.start]:02x})",
                                      file=name, line=line, col=col,
                                      hint="save the file as UTF-8")) from None


def load_file(path: Path | str, *, display: str | None = None, max_bytes: int = MAX_BYTES) -> Document:
    """Read and parse one YAML file. Raises ``LoadError`` with a diagnostic."""
    name = display or str(path)
    return load_text(read_source(path, display=name, max_bytes=max_bytes), name)
