"""Read what `kubectl get ... -o json` (or -o yaml) exported: files, directories
and stdin, flattened into objects that remember where they came from.

Limits (README "Hostile input"): 16 MiB a file (``MAX_FILE_BYTES``), 64 MiB on
stdin (``MAX_STDIN_BYTES``), 100,000 objects in all (``MAX_ITEMS``); only the
limit plus one byte is ever read. A file is one input as a whole: a `kind:
List` of 8,000 nodes is one YAML document of several MiB, so the API server's
3 MiB request limit that `gpuplan verify` puts on one document does not apply
(a document may expand through aliases to at most 4x its input's limit as
JSON). Files and directories are found as `gpuplan verify` finds them
(regular files only, links out of a directory refused).

JSON text (what `kubectl -o json` prints) is parsed by the json module after
a C-speed pass that bounds its nesting (100 levels, as the manifest reader)
and its values (``MAX_JSON_VALUES``); JSON the manifest reader would treat
differently (a duplicate key, a number of more than 4,300 digits, NaN, an
escaped surrogate) and any other text go through the bounded YAML manifest
reader of `gpuplan verify` (nesting, alias and value limits), which reports
the problem at its line. Either way positions are found in the text when a
diagnostic needs one.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from gpuplan.diagnostics import Diagnostic, show

MAX_FILE_BYTES = 16 * 1024 * 1024  # one file (the manifest reader's and the spec's limit)
MAX_STDIN_BYTES = 64 * 1024 * 1024  # as `verify-cluster --live`: ~20,000 nodes without managedFields
MAX_ITEMS = 100_000  # objects, all inputs together (the --live limit)
MAX_JSON_VALUES = 4_000_000  # keys, items and values of one JSON input (the --live limit)
MAX_JSON_DEPTH = 100  # the manifest reader's nesting limit
MAX_INT_DIGITS = 4_300  # the manifest reader's (Python's int() limit)
EXPANSION = 4  # a document, as JSON, may be at most this many times its input's limit


@dataclass(frozen=True)
class Obj:
    """One Kubernetes object of the input and where it is (``path``: keys and
    indices from its document's root, ``("items", 3)`` inside a List)."""

    data: dict
    file: str
    manifest: Any  # gpuplan.verify.manifests.Manifest
    path: tuple = ()

    @property
    def kind(self) -> str:
        return self.data.get("kind") if isinstance(self.data.get("kind"), str) else ""

    @property
    def api_group(self) -> str:
        api = self.data.get("apiVersion")
        return api.rpartition("/")[0] if isinstance(api, str) else ""

    @property
    def meta(self) -> dict:
        m = self.data.get("metadata")
        return m if isinstance(m, dict) else {}

    @property
    def name(self) -> str:
        n = self.meta.get("name")
        return n if isinstance(n, str) else ""

    @property
    def namespace(self) -> str:
        n = self.meta.get("namespace")
        return n if isinstance(n, str) else ""

    def strings(self, key: str) -> dict[str, str]:
        """``metadata.labels`` / ``annotations`` with only string values (nulls dropped)."""
        m = self.meta.get(key)
        if not isinstance(m, dict):
            return {}
        return {k: v for k, v in m.items() if isinstance(k, str) and isinstance(v, str)}

    @property
    def labels(self) -> dict[str, str]:
        return self.strings("labels")

    def at(self, *sub: Any) -> tuple[str, int | None, int | None]:
        """``(file, line, col)`` of a field of this object (the nearest node the file has)."""
        line, col = self.manifest.locate(self.path + tuple(sub)) if self.manifest is not None else (None, None)
        return self.file, line, col

    def where(self, *sub: Any) -> str:
        """The field as text for a provenance comment: ``Node gpu-01 metadata.labels[...]``."""
        out = ""
        for s in sub:
            out += f"[{s}]" if isinstance(s, int) else (f".{s}" if _plain(s) else f"[{s}]")
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}{':' if out else ''}{out.lstrip('.')}"


def _plain(s: str) -> bool:
    return s.replace("_", "a").replace("-", "a").isalnum()


@dataclass
class Input:
    objects: list[Obj] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for quoting
    full: bool = False  # MAX_ITEMS objects read: the rest are left out


def _unread(message: str, manifest: Any, file: str, sub: tuple = ()) -> Diagnostic:
    from gpuplan.importer.codes import W_UNREAD

    line, col = manifest.locate(sub) if manifest is not None else (None, None)
    return W_UNREAD.diag(message, file=file, line=line, col=col)


def _where(manifest: Any) -> str:
    """``document 2`` or ``items[3] of document 1`` (1-based documents)."""
    doc = f"document {manifest.index + 1}"
    pre = getattr(manifest, "prefix", ())
    return f"items[{pre[1]}] of {doc}" if len(pre) == 2 and pre[0] == "items" else doc


def _flatten(manifest: Any, file: str, out: Input) -> None:
    d = manifest.data
    if not isinstance(d, dict):
        out.diagnostics.append(_unread(f"{_where(manifest)} is {_kind_of(d)}, not a Kubernetes object; left out",
                                       manifest, file))
        return
    kind = d.get("kind")
    items = d.get("items")
    if isinstance(kind, str) and kind.endswith("List") and "items" in d:
        if not isinstance(items, list):
            out.diagnostics.append(_unread(f"{_where(manifest)}: the {show(kind)}'s items is {_kind_of(items)}, not a "
                                           "list; nothing read from it", manifest, file, ("items",)))
            return
        for i, it in enumerate(items):
            if isinstance(it, dict) and isinstance(it.get("kind"), str):
                _add(out, Obj(it, file, manifest, ("items", i)), file)
            else:
                out.diagnostics.append(_unread(
                    f"items[{i}] of {_where(manifest)} is {_kind_of(it)} without a kind, not a Kubernetes object; "
                    "left out", manifest, file, ("items", i)))
        return
    if isinstance(kind, str):
        _add(out, Obj(d, file, manifest, ()), file)
    else:
        out.diagnostics.append(_unread(f"{_where(manifest)} has no kind: not a Kubernetes object, left out"
                                       if kind is None else f"{_where(manifest)}: kind is {_kind_of(kind)}, not a "
                                       "string; not a Kubernetes object, left out", manifest, file,
                                       () if kind is None else ("kind",)))


def _add(out: Input, o: Obj, file: str) -> None:
    if len(out.objects) >= MAX_ITEMS:
        if not out.full:
            from gpuplan.spec.loader import E_TOO_MANY_VALUES

            out.full = True
            out.diagnostics.append(E_TOO_MANY_VALUES.diag(
                f"more than {MAX_ITEMS:,} objects in the input; the rest are not read", file=file,
                hint="import fewer objects: `kubectl get` only the kinds docs/import.md lists"))
        return
    out.objects.append(o)


def _kind_of(v: Any) -> str:
    from gpuplan.importer.shapes import type_name

    return type_name(v)  # "a mapping", "a list", "null", ...


# JSON text outside strings, found without a tokenizer (as gpuplan.drift reads --live):
# escapes are removed first (a backslash only occurs in strings), so `"[^"]*"` then
# matches each string exactly; linear time whatever the input.
_ESCAPE = re.compile(rb"\\.", re.S)
_STRING = re.compile(rb'"[^"]*"')
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET_OR_COMMA = bytes(c for c in range(256) if c not in b"[]{},")
_SURROGATE = re.compile(rb"\\u[dD][89abAB]")  # the YAML reader refuses an escaped surrogate


def _json_shape(raw: bytes) -> tuple[bool, int]:
    """(nested deeper than MAX_JSON_DEPTH?, values) of JSON text, before a Python object is made."""
    s = _STRING.sub(b"", _ESCAPE.sub(b"", raw)).translate(_BRACKETS, _NOT_BRACKET_OR_COMMA)
    values = s.count(b",") + s.count(b"[") + 1
    s = s.replace(b",", b"")
    for _ in range(MAX_JSON_DEPTH):
        t = s.replace(b"[]", b"")
        if len(t) == len(s):
            break
        s = t
    return b"[]" in s, values


class _NotPlainJSON(Exception):
    """JSON the YAML manifest reader would read differently, or report on."""


def _json_data(text: str, raw: bytes) -> Any:
    """The JSON text's data (its nesting already bounded); raises _NotPlainJSON
    for anything the YAML reader should see."""
    if _SURROGATE.search(raw):
        raise _NotPlainJSON

    def integer(s: str) -> int:
        if len(s.lstrip("-")) > MAX_INT_DIGITS:
            raise _NotPlainJSON
        return int(s)

    def number(s: str) -> float:
        v = float(s)
        if not math.isfinite(v):
            raise _NotPlainJSON
        return v

    def constant(s: str) -> Any:
        raise _NotPlainJSON

    def pairs(items: list) -> dict:
        d = dict(items)
        if len(d) != len(items):
            raise _NotPlainJSON  # a duplicate key: GP831 at its line
        return d

    try:
        return json.loads(text, parse_int=integer, parse_float=number, parse_constant=constant,
                          object_pairs_hook=pairs)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError: YAML, or broken JSON
        raise _NotPlainJSON from None


def _documents(text: str, raw: bytes, file: str, limit: int) -> tuple[list[Any], list[Diagnostic]]:
    """The manifests of one input's text (``limit``: its byte limit)."""
    from gpuplan.spec.loader import E_TOO_LARGE, E_TOO_MANY_VALUES
    from gpuplan.verify.manifests import Manifest, load_text

    if text.lstrip()[:1] in ("{", "["):
        deep, values = _json_shape(raw)
        if values > MAX_JSON_VALUES:
            return [], [E_TOO_MANY_VALUES.diag(
                f"the input holds more than {MAX_JSON_VALUES:,} keys, items and values", file=file,
                hint="export fewer objects per file: one `kubectl get` per kind, or per namespace (-n)")]
        try:
            if deep:
                raise _NotPlainJSON  # the YAML reader says where
            data = _json_data(text, raw)
        except _NotPlainJSON:
            pass
        else:
            if isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"].endswith("List") \
                    and isinstance(data.get("items"), list) and isinstance(data.get("apiVersion"), str):
                return [Manifest(file, 0, it, text, ("items", i)) for i, it in enumerate(data["items"])], []
            return [Manifest(file, 0, data, text)], []
    manifests, diags = load_text(text, file, max_object_bytes=EXPANSION * limit)
    out = []
    for d in diags:
        if d.code == "GP844":  # the document expands (aliases) past the input's limit
            d = E_TOO_LARGE.diag(f"a document of {file} expands to more than {EXPANSION * limit // (1 << 20)} MiB "
                                 "as JSON", file=file, line=d.line, col=d.col,
                                 hint="remove the anchors and aliases: kubectl never writes them")
        out.append(d)
    return manifests, out


def _too_large(file: str, limit: int, what: str) -> Diagnostic:
    from gpuplan.spec.loader import E_TOO_LARGE

    return E_TOO_LARGE.diag(
        f"{what} is larger than {limit // (1 << 20)} MiB, the most `gpuplan import` reads of it", file=file,
        hint=f"split the export under {MAX_FILE_BYTES // (1 << 20)} MiB a file (one `kubectl get` per kind, or per "
             f"namespace with -n), or pipe up to {MAX_STDIN_BYTES // (1 << 20)} MiB on stdin")


def _decode(raw: bytes, file: str, what: str) -> tuple[str | None, Diagnostic | None]:
    from gpuplan.verify.manifests import E_READ

    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return None, E_READ.diag(f"{what} is not UTF-8 text", file=file, line=line, col=1)


def read_inputs(args: Iterable[str], *, stdin: bytes | None = None) -> Input:
    """Every object of every argument: a file, a directory (its ``*.yaml``,
    ``*.yml`` and ``*.json``, walked as `gpuplan verify` walks one: links that
    leave it and other filesystems refused) or ``-`` (stdin; ``stdin`` bytes
    given by a caller instead)."""
    from gpuplan.spec.loader import E_TOO_LARGE, LoadError, read_bytes, read_stdin
    from gpuplan.verify.manifests import E_READ, discover

    out = Input()

    def take(raw: bytes, name: str, what: str, limit: int) -> None:
        text, bad = _decode(raw, name, what)
        if bad is not None:
            out.diagnostics.append(bad)
            return
        out.sources[name] = text
        manifests, diags = _documents(text, raw, name, limit)
        out.diagnostics.extend(diags)
        for m in manifests:
            _flatten(m, name, out)

    for arg in args:
        if arg == "-":
            name = "<stdin>"
            try:
                raw = stdin if stdin is not None else read_stdin(max_bytes=MAX_STDIN_BYTES, display=name)
            except LoadError as exc:
                out.diagnostics.append(_too_large(name, MAX_STDIN_BYTES, "stdin")
                                       if exc.diag.code == E_TOO_LARGE.code else exc.diag)
                continue
            if len(raw) > MAX_STDIN_BYTES:
                out.diagnostics.append(_too_large(name, MAX_STDIN_BYTES, "stdin"))
                continue
            take(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw, name, "stdin", MAX_STDIN_BYTES)
            continue
        files, diags = discover([arg])
        out.diagnostics += diags
        for path, shown in files:
            try:
                raw = read_bytes(path, display=shown, max_bytes=MAX_FILE_BYTES)
            except LoadError as exc:
                d = exc.diag
                out.diagnostics.append(_too_large(shown, MAX_FILE_BYTES, shown) if d.code == E_TOO_LARGE.code else
                                       E_READ.diag(d.message, file=shown, line=d.line, col=d.col, hint=d.hint))
                continue
            take(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw, shown, "the file", MAX_FILE_BYTES)
    return out


def yaml_payload(text: Any) -> Any:
    """A ConfigMap value parsed by the bounded reader (None when it is not YAML)."""
    if not isinstance(text, str):
        return None
    from gpuplan.output.objdiff import yaml_documents

    docs = yaml_documents(text, "<configmap value>")
    return docs[0] if docs and len(docs) == 1 else None
