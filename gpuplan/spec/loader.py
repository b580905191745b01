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

Every file the compiler reads (the spec, inventory files, inventories pulled
from ConfigMaps) goes through ``read_source`` and ``load_text``/``load_all``:
only regular files are opened (a FIFO or ``/dev/zero`` is refused before a
byte is read), at most the size limit is read, and the parsed ``Document``
keeps the text so a reporter never opens the file again. ``Limits`` bounds
bytes, nesting, and values after alias expansion (which also bounds keys).

Scalars are resolved with the YAML 1.2 core schema: ``on``/``yes`` stay
strings, ``012`` is the integer 12.

Stage: load (docs/architecture.md)."""

from __future__ import annotations

import errno
import os
import re
import stat
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


@dataclass(frozen=True)
class Limits:
    """What one file may cost: bytes read, nesting depth, values (keys,
    items and scalars, counted after alias expansion)."""

    max_bytes: int = MAX_BYTES
    max_depth: int = MAX_DEPTH
    max_values: int = MAX_EXPANDED_NODES


SPEC_LIMITS = Limits()
# One node's inventory: an 8-GPU node is ~15 kB and ~2,000 values; a ConfigMap
# holds at most 1 MiB. A document beyond these is not a probe's output.
INVENTORY_LIMITS = Limits(max_bytes=1024 * 1024, max_depth=32, max_values=100_000)

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
    f"The file is larger than the limit ({MAX_BYTES // (1024 * 1024)} MiB for a spec, "
    f"{INVENTORY_LIMITS.max_bytes // (1024 * 1024)} MiB for one inventory). Only the limit is ever read.",
)
E_BINARY = Code(
    "GP008", "not UTF-8 text", Severity.ERROR,
    "The file is binary or not UTF-8 encoded.",
)
E_TOO_DEEP = Code(
    "GP009", "nesting too deep", Severity.ERROR,
    f"Mappings and lists nest deeper than {MAX_DEPTH} levels ({INVENTORY_LIMITS.max_depth} in an inventory).",
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
E_NOT_REGULAR = Code(
    "GP013", "not a regular file", Severity.ERROR,
    "gpuplan reads only regular files: a directory, a FIFO, a socket or a device "
    "(`/dev/zero`, `/dev/stdin`) is refused before anything is read, so a command never "
    "hangs or reads without end.",
    bad="gpuplan validate /dev/zero", good="gpuplan validate fleet.yaml",
)
E_TOO_MANY_VALUES = Code(
    "GP014", "too many values", Severity.ERROR,
    "The document holds more keys, list items and scalars than the limit for its kind "
    "of file; no real spec or inventory comes near it.",
    bad="spec:\n  k1: 1\n  k2: 1\n  # ... two million keys", good="spec:\n  pools: [...]",
)

E_SPEC_PATH = Code(
    "GP015", "spec path is a symlink or leads out of the repository", Severity.ERROR,
    "The spec given on the command line is a symlink, or a symlinked directory on its path leads "
    "out of the repository that holds it (the nearest directory with `.git` above the path as "
    "named, else the spec's directory). CI runs gpuplan on a pull request's checkout, where a "
    "committed `fleet.yaml -> ~/.git-credentials` would make gpuplan read that file and quote "
    "its lines into the log. The spec is read only as a regular file, never through a link: "
    "name the file itself.",
    bad="$ ln -s ~/.git-credentials fleet.yaml && gpuplan validate fleet.yaml",
    good="$ gpuplan validate clusters/prod/fleet.yaml   # the file, not a link to it",
)

CODES = (
    E_SYNTAX, E_DUPLICATE_KEY, E_EMPTY, E_NOT_MAPPING, E_MULTI_DOC, E_ALIAS_BOMB,
    E_TOO_LARGE, E_BINARY, E_TOO_DEEP, E_UNREADABLE, E_TAG, E_KEY, E_NOT_REGULAR,
    E_TOO_MANY_VALUES, E_SPEC_PATH,
)


class Positions(dict):
    """path -> (line, column), each stored packed in one int: a tuple plus its
    line's int object cost ~80 bytes more per value, tens of MiB on a large
    spec whose positions no diagnostic ever reads."""

    __slots__ = ()

    def __getitem__(self, path: Path_) -> tuple[int, int]:
        v = dict.__getitem__(self, path)
        return (v >> 32, v & 0xFFFFFFFF)

    def get(self, path: Path_, default: Any = None) -> Any:  # type: ignore[override]
        v = dict.get(self, path)
        return default if v is None else (v >> 32, v & 0xFFFFFFFF)

    def put(self, path: Path_, pos: tuple[int, int]) -> None:
        dict.__setitem__(self, path, pos[0] << 32 | pos[1])


@dataclass
class Document:
    """Plain data plus where each piece came from (1-based line and column)."""

    file: str
    data: Any
    value_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    key_pos: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    text: str = field(default="", repr=False)  # the source, for excerpts in reports

    def release(self) -> None:
        """Drop the loaded tree and the position tables (about a third of a
        large spec's memory) once nothing will ask for a position again: the
        build after its checks. ``locate`` then fails loudly rather than
        pointing at line 1."""
        self.data = None
        self.value_pos = self.key_pos = None  # type: ignore[assignment]

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
    """A file that cannot be read as YAML. ``text``: its decoded text when it was read (a syntax
    error), so the diagnostic is shown with its code frame."""

    def __init__(self, diag: Diagnostic, text: str | None = None):
        super().__init__(diag.message)
        self.diag = diag
        self.text = text


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

    def __init__(self, file: str, parser: Any, limits: Limits = SPEC_LIMITS) -> None:
        from ruamel.yaml import events as ev

        self.ev = ev
        self.file = file
        self.p = parser
        self.limits = limits
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, expanded size)
        self.expanded = 0
        self.aliased = False
        self.value_pos = Positions()
        self.key_pos = Positions()

    def fail(self, code: Code, message: str, pos: tuple[int, int], hint: str | None = None):
        raise LoadError(code.diag(message, file=self.file, line=pos[0], col=pos[1], hint=hint))

    def _count(self, n: int, pos: tuple[int, int]) -> None:
        self.expanded += n
        if self.expanded > self.limits.max_values:
            limit = self.limits.max_values
            if self.aliased:
                self.fail(E_ALIAS_BOMB, f"aliases expand to more than {limit:,} values", pos,
                          hint="remove the recursive anchors; gpuplan files never need this many values")
            self.fail(E_TOO_MANY_VALUES, f"the document holds more than {limit:,} keys, items and values",
                      pos, hint="this is far beyond any real file of this kind; was it generated by mistake?")

    def node(self, path: Path_, depth: int) -> tuple[Any, int]:
        """Build the node starting at the next event. Returns (value, expanded size)."""
        ev = self.ev
        e = self.p.get_event()
        pos = _mark(e)
        self.value_pos.put(path, pos)
        if isinstance(e, ev.AliasEvent):
            if e.anchor not in self.anchors:
                self.fail(E_SYNTAX, f"unknown alias *{e.anchor}", pos)
            value, size = self.anchors[e.anchor]
            self.aliased = True
            self._count(size, pos)
            return value, size
        if depth > self.limits.max_depth:
            self.fail(E_TOO_DEEP, f"nesting deeper than {self.limits.max_depth} levels", pos)
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
            self.key_pos.put(kp, kpos)
            value, n = self.node(kp, depth + 1)
            out[key] = value
            size += n
        self.p.get_event()
        for m in merges:  # explicit keys win over merged ones (YAML merge semantics)
            for mk, mv in m.items():
                out.setdefault(mk, mv)
        return out, size


def load_text(text: str, file: str, limits: Limits = SPEC_LIMITS) -> Document:
    """Parse YAML text (one document) into a ``Document``. Raises ``LoadError``."""
    docs = _load(text, file, limits, multi=False)
    if not docs or docs[0].data is None:
        raise LoadError(E_EMPTY.diag("the document is empty" if docs else "the file holds no YAML document",
                                     file=file, line=1, col=1, hint="start from examples/fleet.yaml"))
    return docs[0]


def load_all(text: str, file: str, limits: Limits = SPEC_LIMITS) -> list[Document]:
    """Every non-empty document of a ``---`` separated stream. The limits hold
    for the file as a whole. Raises ``LoadError`` at the first problem."""
    return [d for d in _load(text, file, limits, multi=True) if d.data is not None]


def _load(text: str, file: str, limits: Limits, *, multi: bool) -> list[Document]:
    import gc

    # Only acyclic trees of dicts and lists are built; the cyclic GC would
    # rescan them again and again as they grow (a third of the time on a
    # large file), so it is paused and restored.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_events(text, file, limits, multi=multi)
    finally:
        if was_enabled:
            gc.enable()


def _load_events(text: str, file: str, limits: Limits, *, multi: bool) -> list[Document]:
    from ruamel.yaml import events as ev
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if len(text) > limits.max_bytes:  # text that did not come through read_source
        raise LoadError(E_TOO_LARGE.diag(f"the text is larger than {_size(limits.max_bytes)}",
                                         file=file, line=1, col=1))
    parser = _parser_class()(text)
    b = _Builder(file, parser, limits)
    out: list[Document] = []
    try:
        parser.get_event()  # StreamStart
        while not parser.check_event(ev.StreamEndEvent):
            if out and not multi:
                e = parser.get_event()
                line, col = _mark(e)
                raise LoadError(E_MULTI_DOC.diag(
                    "the file holds more than one YAML document", file=file, line=line, col=col,
                    hint="a fleet spec is exactly one document: remove the `---` and what follows"))
            parser.get_event()  # DocumentStart
            b.anchors = {}
            b.value_pos, b.key_pos = Positions(), Positions()
            data, _ = b.node((), 1)
            parser.get_event()  # DocumentEnd
            out.append(Document(file=file, data=data, value_pos=b.value_pos, key_pos=b.key_pos, text=text))
    except LoadError:
        raise
    except MarkedYAMLError as exc:
        problem = exc.problem or exc.context or "invalid YAML"
        # a key without its ':' is found only on a later line; the scanner's context mark is
        # where that key began, the line the user changed
        key_start = exc.context_mark is not None and "expected ':'" in problem
        mark = exc.context_mark if key_start else (exc.problem_mark or exc.context_mark)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        lines = text.splitlines()
        at = lines[line - 1] if line is not None and 0 < line <= len(lines) else ""
        if not key_start and line is not None and "mapping values are not allowed" in problem:
            # `key value` then `other: x` below at its indent: the scanner read both lines as one
            # plain scalar and fails on the second's ':'; the line that lost its colon is above
            above = _colonless_key_above(lines, line)
            if above is not None:
                key_start, (line, col) = True, above
        if key_start:
            problem = "a key without ':' (or a line that continues the one above)"
        elif "tab" in problem or (col is not None and at[col - 1:col] == "\t"):
            problem = "a tab character in the indentation (YAML indents with spaces only)"
        raise LoadError(E_SYNTAX.diag(problem, file=file, line=line, col=col,
                                      hint=_syntax_hint(problem)), text=text) from None
    except (YAMLError, ValueError, TypeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise LoadError(E_SYNTAX.diag(str(exc).splitlines()[0] if str(exc) else "invalid YAML",
                                      file=file, line=line, col=col), text=text) from None
    return out


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _colonless_key_above(lines: list[str], line: int) -> tuple[int, int] | None:
    """(line, col) of the line above ``line`` (1-based) when it sits at the same indent and holds
    no ``:`` — a key whose colon is missing; None otherwise."""
    here = lines[line - 1]
    indent = len(here) - len(here.lstrip(" "))
    for n in range(line - 2, -1, -1):
        above = lines[n]
        if not above.strip() or above.lstrip().startswith("#"):
            continue
        if len(above) - len(above.lstrip(" ")) == indent and ":" not in above:
            return n + 1, indent + 1
        return None
    return None


def _syntax_hint(problem: str) -> str | None:
    if "tab" in problem:
        return "YAML indentation must use spaces, not tabs"
    if "mapping values are not allowed" in problem:
        return "a value containing ': ' must be quoted, or the indentation is off"
    if "without ':'" in problem:
        return "write `key: value` (a space after the colon), or indent the line under the one above"
    return None


def _refuse_kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def display_path(path: Path | str) -> str:
    """``path`` fit for messages and generated text: bytes of a file name that
    are not UTF-8 (kept by Python as surrogates) shown as ``\\xNN``, so the
    name can be printed and encoded like any other text."""
    s = os.fspath(path)
    if isinstance(s, bytes):
        return s.decode("utf-8", "backslashreplace")
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def named_repository(path: Path | str) -> Path:
    """The repository that holds ``path`` as it is named: the nearest directory
    with a ``.git`` entry among the path's own (absolute, not symlink-resolved)
    parents, else its directory. ``gpuplan.probe.paths.repository_root`` finds
    the same directory from the resolved path; this one is the anchor a
    symlink on the way cannot move, so a path can be checked against it."""
    d = Path(os.path.abspath(path)).parent
    for cand in (d, *d.parents):
        if os.path.lexists(cand / ".git"):
            return cand
    return d


def leaves_repository(path: Path | str, repo: Path | str) -> bool:
    """Whether ``path`` resolves outside ``repo`` (as named, for example from
    :func:`named_repository`) although it is named inside it: a symlinked
    directory (or file) under ``repo`` leads out. A path named outside ``repo``
    is the caller's own choice and is not judged here."""
    repo = os.path.abspath(repo)
    if not _inside(os.path.abspath(path), repo):
        return False
    return not _inside(os.path.realpath(path), os.path.realpath(repo))


def spec_path_problem(path: Path | str, *, display: str | None = None) -> Diagnostic | None:
    """Why the spec at ``path`` is not read (GP015), or None: it is a symlink,
    or a symlinked directory under its repository leads out of it. The rule
    is deliberately simple: a PR can commit any symlink, and even one that
    stays inside (``fleet.yaml -> .git/config``) would be read and quoted."""
    name = display or display_path(path)
    hint = "name the spec file itself, inside the repository, not a symlink to it"
    if os.path.islink(path):
        return E_SPEC_PATH.diag(f"{name} is a symlink; gpuplan reads a spec only as a regular file", file=name,
                                hint=hint)
    if leaves_repository(path, named_repository(path)):
        return E_SPEC_PATH.diag(f"{name} leads out of its repository through a symlinked directory; refused",
                                file=name, hint=hint)
    return None


def read_bytes(path: Path | str, *, display: str | None = None, max_bytes: int = MAX_BYTES,
               nofollow: bool = False) -> bytes:
    """At most ``max_bytes`` of a regular file. Raises ``LoadError``.

    The file is opened with O_NONBLOCK, so opening a FIFO returns at once
    instead of waiting for a writer, and ``fstat`` on the open descriptor
    (not a path that could be swapped meanwhile) refuses anything that is not
    a regular file before a byte is read. ``nofollow``: a symlink as the last
    component is refused at open (GP015), not read through."""
    name = display or display_path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise LoadError(E_NOT_REGULAR.diag(f"{name} is a directory, not a file", file=name)) from None
        if nofollow and exc.errno == errno.ELOOP:
            raise LoadError(E_SPEC_PATH.diag(f"{name} is a symlink; gpuplan reads a spec only as a regular file",
                                             file=name)) from None
        raise LoadError(E_UNREADABLE.diag(f"cannot read {name}: {exc.strerror or exc}", file=name)) from None
    try:
        st = os.fstat(fd)
        kind = _refuse_kind(st.st_mode)
        if kind:
            raise LoadError(E_NOT_REGULAR.diag(
                f"{name} is {kind}, not a regular file", file=name,
                hint="gpuplan reads only regular files"))
        if st.st_size > max_bytes:
            raise _too_large(name, max_bytes)
        data = _read_capped(fd, max_bytes)  # the file may grow after fstat: the cap is on what is read
    except OSError as exc:
        raise LoadError(E_UNREADABLE.diag(f"cannot read {name}: {exc.strerror or exc}", file=name)) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise _too_large(name, max_bytes)
    return data


def _read_capped(fd: int, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of ``fd``: one more than the cap tells "too large"."""
    chunks: list[bytes] = []
    got = 0
    while got <= max_bytes:
        chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_stdin(*, max_bytes: int, display: str = "<stdin>") -> bytes:
    """At most ``max_bytes`` of standard input, which may be a pipe (only the cap is
    enforced) or a file (refused from its size before a byte is read). Raises ``LoadError``."""
    import sys

    stream = sys.stdin
    try:
        if stream is None:  # started with stdin closed
            raise OSError("stdin is closed")
        fd = stream.fileno()
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size - os.lseek(fd, 0, os.SEEK_CUR) > max_bytes:
            raise _too_large(display, max_bytes)
        data = _read_capped(fd, max_bytes)
    except (OSError, ValueError) as exc:  # ValueError: stdin replaced by an object without a descriptor
        raise LoadError(E_UNREADABLE.diag(f"cannot read {display}: {getattr(exc, 'strerror', None) or exc}",
                                          file=display)) from None
    if len(data) > max_bytes:
        raise _too_large(display, max_bytes)
    return data


def _too_large(name: str, max_bytes: int) -> LoadError:
    return LoadError(E_TOO_LARGE.diag(
        f"the file is larger than {_size(max_bytes)}", file=name, line=1, col=1,
        hint="split inventory into several files; a fleet spec is far smaller"))


def read_source(path: Path | str, *, display: str | None = None, max_bytes: int = MAX_BYTES,
                nofollow: bool = False) -> str:
    """Read a regular file as UTF-8 text within the size limit. Raises ``LoadError``."""
    name = display or display_path(path)
    return decode_source(read_bytes(path, display=name, max_bytes=max_bytes, nofollow=nofollow), name)


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


def load_file(path: Path | str, *, display: str | None = None, max_bytes: int = MAX_BYTES,
              limits: Limits = SPEC_LIMITS, nofollow: bool = False) -> Document:
    """Read and parse one YAML file. Raises ``LoadError`` with a diagnostic."""
    name = display or display_path(path)
    if max_bytes != limits.max_bytes:
        limits = Limits(max_bytes, limits.max_depth, limits.max_values)
    return load_text(read_source(path, display=name, max_bytes=limits.max_bytes, nofollow=nofollow), name, limits)
