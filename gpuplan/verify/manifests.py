"""Read Kubernetes manifests: files and directories, multi-document YAML,
positions on demand.

Scalars resolve as YAML 1.1 (libyaml through PyYAML's ``CSafeLoader``), as
sigs.k8s.io/yaml (go-yaml v2) resolves them for kubectl, Argo CD and Flux:
``yes``/``on`` are booleans there too. Timestamps stay strings and non-string
keys become strings, as they do when sigs.k8s.io/yaml turns YAML into JSON.
The composed node tree is kept, so a problem found later can be located at
the ``file:line:col`` of the field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity

E_READ = Code(
    "GP830", "manifest cannot be read", Severity.ERROR,
    "A manifest file is not valid YAML, not UTF-8, or cannot be opened; nothing in it was verified.",
    bad="kind: ConfigMap\nmetadata:\n  name: a\n   namespace: b   # inconsistent indentation",
    good="kind: ConfigMap\nmetadata:\n  name: a\n  namespace: b",
)
E_DUPLICATE = Code(
    "GP831", "duplicate key in a manifest", Severity.ERROR,
    "A mapping holds the same key twice. kubectl's strict decoding and the API server's field "
    "validation reject it (`duplicate field`); other tools silently keep one of the two.",
    bad="metadata:\n  name: a\n  name: b", good="metadata:\n  name: a",
)
E_NOT_OBJECT = Code(
    "GP832", "document is not a Kubernetes object", Severity.ERROR,
    "A YAML document in a manifest file is not a mapping with string `apiVersion` and `kind`.",
    bad="- apiVersion: v1\n  kind: Namespace", good="apiVersion: v1\nkind: Namespace\nmetadata: {name: a}",
)

I_PLAIN = Code(
    "GP838", "plain data, not a Kubernetes object", Severity.INFO,
    "A YAML document with neither `apiVersion` nor `kind` (Helm values, a tool's configuration) is not "
    "an object the API server would see: it is listed, not verified.",
    bad="# generated/gpu-operator/values.yaml\ndriver: {enabled: false}",
    good="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}",
)

CODES = (E_READ, E_DUPLICATE, E_NOT_OBJECT, I_PLAIN)

YAML_SUFFIXES = (".yaml", ".yml", ".json")
MAX_DEPTH = 100  # a Kubernetes object nests ~20 levels; Helm values inline a few more
MAX_EXPANDED_NODES = 2_000_000


@dataclass
class Manifest:
    """One YAML document of a file: its data, and the file's text to find
    positions in (composed again only when a problem needs a position: keeping
    every node of a large tree alive costs more, in memory and garbage
    collection, than parsing the one file twice)."""

    file: str
    index: int  # 0-based position of the document in the file
    data: Any
    text: str | None = None

    def locate(self, path: tuple, *, key: bool = False) -> tuple[int | None, int | None]:
        """``(line, col)`` of ``path`` (keys and list indices) in the file, or of
        the nearest enclosing node the file has; the key's position with ``key``
        (an unknown field), else the value's."""
        node = _nodes(self.text)[self.index] if self.text is not None else None
        if node is None:
            return (None, None)
        best = _mark(node)
        for step in path:
            child = None
            if node.id == "mapping" and isinstance(step, str):
                for k, v in node.value:
                    if str(k.value) == step:
                        child, knode = v, k
                        break
            elif node.id == "sequence" and isinstance(step, int) and 0 <= step < len(node.value):
                child, knode = node.value[step], None
            if child is None:
                return best
            node = child
            best = _mark(knode) if (key and knode is not None and step == path[-1]) else _mark(child)
        return best


@lru_cache(maxsize=8)
def _nodes(text: str) -> list[Any]:
    """The composed node of every document of ``text`` (None where empty)."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    loader = _LOADER(text)
    out: list[Any] = []
    try:
        while loader.check_node():
            out.append(loader.get_node())
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return out


def _mark(node: Any) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _loader_class():
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    cache: dict[str, str] = {}

    class Loader(base):  # type: ignore[misc, valid-type]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            # the composer asks once per scalar; plain scalars repeat (keys) and
            # resolve to the same tag every time
            if kind is yaml.ScalarNode and implicit[0]:
                tag = cache.get(value)
                if tag is None:
                    tag = cache[value] = base.resolve(self, kind, value, implicit)
                return tag
            return base.resolve(self, kind, value, implicit)

    return Loader


_LOADER = None
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


class _TooBig(Exception):
    def __init__(self, message: str, node: Any) -> None:
        super().__init__(message)
        self.node = node


class _Builder:
    """Plain data from a composed node tree, as sigs.k8s.io/yaml would give it
    (timestamps as strings, keys as strings); an aliased node is built once and
    shared. Duplicate keys are noted. Nesting depth and the size aliases expand
    to are bounded (limits of gpuplan.spec.loader): every later stage walks the
    data as a tree, so a "billion laughs" file must stop here."""

    def __init__(self, loader: Any, file: str) -> None:
        self.loader = loader
        self.file = file
        self.done: dict[int, Any] = {}
        self.sizes: dict[int, int] = {}
        self.diags: list[Diagnostic] = []

    def size(self, node: Any) -> int:
        """Values ``node`` expands to, aliases counted every time they are used."""
        return self.sizes[id(node)]

    def build(self, node: Any, depth: int = 0) -> Any:
        nid = id(node)
        if nid in self.done:
            return self.done[nid]
        if depth > MAX_DEPTH:
            raise _TooBig(f"nesting deeper than {MAX_DEPTH} levels", node)
        v = self._build(node, depth)
        n = 1
        if node.id == "sequence":
            n += sum(self.sizes[id(c)] for c in node.value)
        elif node.id == "mapping":
            n += sum(self.sizes[id(k)] + self.sizes[id(c)] for k, c in node.value)
        if n > MAX_EXPANDED_NODES:
            raise _TooBig(f"aliases expand to more than {MAX_EXPANDED_NODES:,} values", node)
        self.sizes[nid] = n
        return v

    def _build(self, node: Any, depth: int) -> Any:
        nid = id(node)
        tag = node.tag
        if node.id == "scalar":
            if tag == _STR:
                v: Any = node.value
            elif tag == "tag:yaml.org,2002:timestamp" or tag == "tag:yaml.org,2002:binary":
                v = node.value
            else:
                v = self.loader.construct_object(node)
            self.done[nid] = v
            return v
        if node.id == "sequence":
            out: list = []
            self.done[nid] = out
            out.extend(self.build(n, depth + 1) for n in node.value)
            return out
        data: dict = {}
        self.done[nid] = data
        if any(k.tag == _MERGE for k, _ in node.value):
            self.loader.flatten_mapping(node)
        for k, v in node.value:
            key = self.build(k, depth + 1)
            if not isinstance(key, str):
                key = ("true" if key else "false") if isinstance(key, bool) else ("null" if key is None else str(key))
            if key in data:
                line, col = _mark(k)
                self.diags.append(E_DUPLICATE.diag(f"duplicate key {key!r}", file=self.file, line=line, col=col,
                                                   hint="remove one of the two entries"))
            data[key] = self.build(v, depth + 1)
        return data


def load_text(text: str, file: str, *, check_duplicates: bool = True) -> tuple[list[Manifest], list[Diagnostic]]:
    """Every non-empty document of ``text``; a syntax error ends the file with GP830."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    out: list[Manifest] = []
    diags: list[Diagnostic] = []
    loader = _LOADER(text)
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            b = _Builder(loader, file)
            data = b.build(node)
            if check_duplicates:
                diags += b.diags
            if data is not None:
                out.append(Manifest(file, index, data, text))
            index += 1
    except _TooBig as exc:
        line, col = _mark(exc.node)
        diags.append(E_READ.diag(str(exc), file=file, line=line, col=col,
                                 hint="Kubernetes objects are never this deep or this large; remove the recursive "
                                      "anchors or nesting"))
    except RecursionError:
        diags.append(E_READ.diag(f"nesting deeper than {MAX_DEPTH} levels", file=file))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        diags.append(E_READ.diag(f"invalid YAML: {problem}", file=file, line=line, col=col))
    finally:
        loader.dispose()
    return out, diags


def read_file(path: Path, display: str) -> tuple[list[Manifest], list[Diagnostic]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], [E_READ.diag(f"cannot read {display}: {exc.strerror or exc}", file=display)]
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return [], [E_READ.diag("the file is not UTF-8 text", file=display, line=line, col=1)]
    return load_text(text, display)


def discover(paths: list[str]) -> tuple[list[tuple[Path, str]], list[Diagnostic]]:
    """The manifest files under ``paths``: files as given, directories walked
    (sorted, hidden entries skipped)."""
    files: list[tuple[Path, str]] = []
    diags: list[Diagnostic] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.endswith(YAML_SUFFIXES) and not n.startswith("."):
                        full = Path(root) / n
                        files.append((full, full.as_posix()))
        elif p.is_file():
            files.append((p, p.as_posix()))
        else:
            diags.append(E_READ.diag(f"no such file or directory: {arg}", file=arg))
    return files, diags


def identify(m: Manifest) -> tuple[str, str] | Diagnostic:
    """``(apiVersion, kind)`` of a document, or GP832."""
    d = m.data
    if not isinstance(d, dict):
        line, col = m.locate(())
        return E_NOT_OBJECT.diag(f"document {m.index + 1} is a {type(d).__name__}, not a mapping", file=m.file,
                                 line=line, col=col)
    api, kind = d.get("apiVersion"), d.get("kind")
    if api is None and kind is None:
        line, col = m.locate(())
        return I_PLAIN.diag(f"document {m.index + 1} has no apiVersion and no kind: plain data, not verified",
                            file=m.file, line=line, col=col)
    if not isinstance(api, str) or not isinstance(kind, str) or not api or not kind:
        line, col = m.locate(())
        return E_NOT_OBJECT.diag(f"document {m.index + 1} has no string apiVersion and kind", file=m.file,
                                 line=line, col=col, hint="every Kubernetes object names its apiVersion and kind")
    return api, kind
