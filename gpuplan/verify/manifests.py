"""Read Kubernetes manifests: files and directories, multi-document YAML,
positions on demand.

Scalars resolve as YAML 1.1 (libyaml through PyYAML's ``CSafeLoader``), as
sigs.k8s.io/yaml (go-yaml v2) resolves them for kubectl, Argo CD and Flux:
``yes``/``on`` are booleans there too. Timestamps stay strings and non-string
keys become strings, as they do when sigs.k8s.io/yaml turns YAML into JSON.
The composed node tree is kept, so a problem found later can be located at
the ``file:line:col`` of the field.

Stage: load (docs/architecture.md)."""

from __future__ import annotations

import os
import stat
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

E_TOO_LARGE_OBJECT = Code(
    "GP844", "object larger than the API server accepts", Severity.ERROR,
    "One object is larger, as JSON, than the 3 MiB request body the API server accepts "
    "(k8s.io/apiserver pkg/server/config.go, MaxRequestBodyBytes; etcd's own default limit, "
    "--max-request-bytes, is 1.5 MiB). It is not verified; the API server would refuse it.",
    bad="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {blob: \"<4 MiB>\"}",
    good="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {blob: \"<100 KiB>\"}",
)
E_OUTSIDE = Code(
    "GP845", "path outside the tree", Severity.ERROR,
    "A file or directory under a directory `gpuplan verify` walks is a symbolic link that resolves "
    "outside that directory, or sits on another filesystem (a mount point). It is not read: a tree "
    "from a pull request must not make verify read, or quote, files elsewhere on the machine.",
    bad="generated/leak.yaml -> /etc/kubernetes/admin.conf", good="generated/pools/a/nodepool.yaml (a regular file)",
)

E_SHAPE = Code(
    "GP839", "tree object of a shape no cluster runs", Severity.ERROR,
    "An object of a tree that `gpuplan diff` or `gpuplan plan --base` reads as the cluster's present "
    "state (the old tree: the base branch's, or the one at -o, which a pull request can edit) has a "
    "field of a type Kubernetes never gives it: `metadata.labels` that is a list, a `spec` that is a "
    "string, a `kind` that is not a Kubernetes kind, a null where an object belongs. No API server "
    "admitted it, so no change can be worked out from it: the report is not written.",
    bad="apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: gpu-a}\nspec:\n  rules: x",
    good="apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: gpu-a}\nspec:\n  rules: []",
)

CODES = (E_READ, E_DUPLICATE, E_NOT_OBJECT, I_PLAIN, E_TOO_LARGE_OBJECT, E_OUTSIDE, E_SHAPE)

YAML_SUFFIXES = (".yaml", ".yml", ".json")
MAX_DEPTH = 100  # a Kubernetes object nests ~20 levels; Helm values inline a few more
MAX_EXPANDED_NODES = 2_000_000
# Bytes read of one manifest file (the spec loader's limit too); only this much
# is ever read, whatever the file claims to be.
MAX_FILE_BYTES = 16 * 1024 * 1024
# One object, as JSON: the API server's request body limit, 3 MiB
# (k8s.io/apiserver pkg/server/config.go: MaxRequestBodyBytes = 3 * 1024 * 1024).
MAX_OBJECT_BYTES = 3 * 1024 * 1024


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
    prefix: tuple = ()  # path of the object inside the document (("items", 3) in a kind: List)

    def locate(self, path: tuple, *, key: bool = False) -> tuple[int | None, int | None]:
        """``(line, col)`` of ``path`` (keys and list indices) in the file, or of
        the nearest enclosing node the file has; the key's position with ``key``
        (an unknown field), else the value's."""
        node = _nodes(self.text)[self.index] if self.text is not None else None
        if node is None:
            return (None, None)
        path = self.prefix + tuple(path)
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


_BOUNDS_HINT = "Kubernetes objects are never this deep or this large; remove the recursive anchors or nesting"
_LONG_NUMBER = "no Kubernetes field holds a number this long; quote it if it is text"
# An integer's value, at most: decimal integers of more digits than Python turns into text
# (sys.get_int_max_str_digits(), 4,300) are refused as they are read; an integer in
# another base (0x..., 0o..., 0b..., YAML 1.1's 1:30:00) has no such limit, and one this
# large (over 3,800 decimal digits) would fail, as a ValueError, wherever it is shown.
MAX_INT_BITS = 12_800


class _TooBig(Exception):
    def __init__(self, message: str, node: Any, hint: str = _BOUNDS_HINT) -> None:
        super().__init__(message)
        self.node = node
        self.hint = hint


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
        self.aliased = False  # a node was used twice: the text's length does not bound the data's

    def size(self, node: Any) -> int:
        """Values ``node`` expands to, aliases counted every time they are used."""
        return self.sizes[id(node)]

    def build(self, node: Any, depth: int = 0) -> Any:
        nid = id(node)
        if nid in self.done:
            self.aliased = True
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
                try:
                    v = self.loader.construct_object(node)
                except (ValueError, OverflowError) as exc:
                    # int() of more digits than sys.get_int_max_str_digits() (4,300)
                    raise _TooBig(f"{node.value[:20]}...: {str(exc).split(';')[0]}" if len(node.value) > 20
                                  else f"{node.value}: {exc}", node, hint=_LONG_NUMBER) from None
                if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
                    # a hexadecimal, octal, binary or sexagesimal (1:30:00) integer has no digit limit:
                    # its value would fail later, where anything turns it into text
                    raise _TooBig(f"{node.value[:20]}{'...' if len(node.value) > 20 else ''}: an integer of "
                                  f"{v.bit_length():,} bits, more than {MAX_INT_BITS:,} (any number gpuplan "
                                  "reads fits in 64)", node, hint=_LONG_NUMBER)
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


def _too_large(node: Any, data: Any, aliased: bool, limit: int) -> int | None:
    """The JSON size of ``data`` when over ``limit``, else None. Without aliases
    JSON is at most a few times the YAML text (quotes, ``null`` for an empty
    value), so only a document whose text is over an eighth of the limit, or
    that uses aliases, is measured."""
    if data is None or (not aliased and node.end_mark.index - node.start_mark.index <= limit // 8):
        return None
    n = _json_size(data, {})
    return n if n > limit else None


def _json_size(v: Any, memo: dict[int, int]) -> int:
    """Bytes of ``v`` as compact JSON (string escapes aside), an aliased value
    counted every time it is used (as kubectl sends it), computed once per
    distinct value: a small file of aliases is never expanded to measure it."""
    if isinstance(v, str):
        return len(v.encode("utf-8", "surrogatepass")) + 2
    if isinstance(v, (dict, list)):
        n = memo.get(id(v))
        if n is None:
            if isinstance(v, dict):
                n = 1 + sum(len(k.encode("utf-8", "surrogatepass")) + 4 + _json_size(x, memo) for k, x in v.items())
            else:
                n = 1 + sum(1 + _json_size(x, memo) for x in v)
            memo[id(v)] = n = max(n, 2)
        return n
    if v is None or isinstance(v, bool):
        return 5
    return len(repr(v))


def _is_list(data: Any) -> bool:
    """A list of objects as the API returns it (metav1.List, or a typed <Kind>List)."""
    return (isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"].endswith("List")
            and isinstance(data.get("items"), list) and isinstance(data.get("apiVersion"), str))


def load_text(text: str, file: str, *, check_duplicates: bool = True,
              max_object_bytes: int = MAX_OBJECT_BYTES) -> tuple[list[Manifest], list[Diagnostic]]:
    """Every non-empty document of ``text``; a syntax error ends the file with
    GP830, a document over ``max_object_bytes`` as JSON is left out with GP844.
    Bounded whatever the text: nesting (MAX_DEPTH, and libyaml's own limit of
    1,000), values after alias expansion (MAX_EXPANDED_NODES), integer length."""
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
            too_big = _too_large(node, data, b.aliased, max_object_bytes)
            if too_big is not None:
                line, col = _mark(node)
                diags.append(E_TOO_LARGE_OBJECT.diag(
                    f"document {index + 1} is {too_big:,} bytes as JSON: more than the {max_object_bytes:,} "
                    "the API server accepts in one request; not verified", file=file, line=line, col=col,
                    hint="split the data over several objects (a ConfigMap holds at most 1 MiB)"))
            elif _is_list(data):
                # `kubectl get -o yaml|json` of several objects: kind: List (or <Kind>List)
                # with items; the API server never receives the List, only each item
                out += [Manifest(file, index, item, text, ("items", i)) for i, item in enumerate(data["items"])]
            elif data is not None:
                out.append(Manifest(file, index, data, text))
            index += 1
    except _TooBig as exc:
        line, col = _mark(exc.node)
        diags.append(E_READ.diag(str(exc), file=file, line=line, col=col, hint=exc.hint))
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


def read_file(path: Path, display: str, *, max_bytes: int = MAX_FILE_BYTES,
              sources: dict[str, str] | None = None) -> tuple[list[Manifest], list[Diagnostic]]:
    """The documents of one file, read through the spec loader's bounded reader:
    only a regular file is read (a FIFO, a device such as ``/dev/zero``, a
    directory is refused before a byte is read), and at most ``max_bytes``.
    ``sources`` gets the file's text (``display`` -> text) even when it does not
    parse, so a report quotes it without opening the file again."""
    from gpuplan.spec.loader import LoadError, read_bytes

    try:
        raw = read_bytes(path, display=display, max_bytes=max_bytes)
    except LoadError as exc:
        hint = (f"gpuplan verify reads at most {max_bytes // (1024 * 1024)} MiB of a manifest file"
                if exc.diag.code == "GP007" else exc.diag.hint)
        return [], [E_READ.diag(exc.diag.message, file=display, line=exc.diag.line, col=exc.diag.col, hint=hint)]
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return [], [E_READ.diag("the file is not UTF-8 text", file=display, line=line, col=1)]
    if sources is not None:
        sources[display] = text
    return load_text(text, display)


def discover(paths: list[str]) -> tuple[list[tuple[Path, str]], list[Diagnostic]]:
    """The manifest files under ``paths``: files as given, directories walked
    (sorted, hidden entries skipped). A tree from a pull request is hostile:

    * a symbolic link under a directory is followed only when it resolves
      inside that directory (the file it names is then read, shown by the link's
      name); one that leads outside (``leak.yaml -> /etc/...``,
      ``zero.yaml -> /dev/zero``) is refused with GP845 and never opened;
    * a directory on another filesystem than the directory argument (a mount
      point) is not entered, GP845;
    * what cannot be listed becomes GP830, never an exception.

    The path returned for each file is the resolved one, so what is opened is
    what was checked. Files given by name are read wherever they are (the
    reader still refuses anything but a regular file)."""
    files: list[tuple[Path, str]] = []
    diags: list[Diagnostic] = []
    for arg in paths:
        p = Path(arg)
        try:
            is_dir = p.is_dir()
            exists = is_dir or os.path.lexists(p)
        except OSError:  # a name too long, a loop of links
            is_dir, exists = False, False
        if is_dir:
            _walk(p, files, diags)
        elif exists:
            files.append((p, p.as_posix()))  # the reader refuses a FIFO or device with its own message
        else:
            diags.append(E_READ.diag(f"no such file or directory: {arg}", file=arg))
    return files, diags


def _walk(top: Path, files: list[tuple[Path, str]], diags: list[Diagnostic]) -> None:
    try:
        root = os.path.realpath(top)
        dev = os.stat(root).st_dev
    except OSError as exc:
        diags.append(E_READ.diag(f"cannot read {top.as_posix()}: {exc.strerror or exc}", file=top.as_posix()))
        return

    def inside(real: str) -> bool:
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def refuse(shown: str, why: str) -> None:
        diags.append(E_OUTSIDE.diag(f"{shown}: {why}; not read", file=shown,
                                    hint=f"keep the manifests under {top.as_posix()} as regular files"))

    def onerror(exc: OSError) -> None:
        name = Path(exc.filename).as_posix() if exc.filename else top.as_posix()
        diags.append(E_READ.diag(f"cannot read {name}: {exc.strerror or exc}", file=name))

    # os.walk does not descend into linked directories (followlinks=False): a
    # link to a directory is checked below and, when it stays inside, skipped
    # (its files are verified where they really are).
    for dirpath, dirs, names in os.walk(top, onerror=onerror):
        keep = []
        for d in sorted(x for x in dirs if not x.startswith(".")):
            full = os.path.join(dirpath, d)
            shown = Path(full).as_posix()
            try:
                if os.path.islink(full):
                    if not inside(os.path.realpath(full)):
                        refuse(shown, f"a symbolic link to {os.path.realpath(full)}, outside {top.as_posix()}")
                    continue
                if os.lstat(full).st_dev != dev:
                    refuse(shown, "another filesystem (a mount point)")
                    continue
            except OSError as exc:
                onerror(exc)
                continue
            keep.append(d)
        dirs[:] = keep
        for n in sorted(names):
            if not n.endswith(YAML_SUFFIXES) or n.startswith("."):
                continue
            full = os.path.join(dirpath, n)
            shown = Path(full).as_posix()
            try:
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):  # directories walked are real: only the file's own link counts
                    full = os.path.realpath(full)
                    if not inside(full):
                        refuse(shown, f"a symbolic link to {full}, outside {top.as_posix()}")
                        continue
                    st = os.stat(full)
                if st.st_dev != dev:
                    refuse(shown, "another filesystem (a mount point)")
                    continue
            except OSError as exc:
                onerror(exc)
                continue
            files.append((Path(full), shown))


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
