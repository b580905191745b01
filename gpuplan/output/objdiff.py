"""Object-level diff of two rendered trees, for people reviewing a pull request.

Every YAML file of both trees is parsed through the bounded manifest reader
(``gpuplan.verify.manifests.load_text``: nesting, alias expansion, integer
length and object size are capped, so a tree from a pull request cannot hang
or crash the diff; a file it refuses is compared as text); Kubernetes
objects are matched by (API group, kind, namespace, name) wherever they live,
so moving an object between files or bumping its apiVersion is a change, not a
removal plus an addition. A YAML document that is not an object (a Helm
values.yaml) and a file that is not YAML (README.md) is one object keyed by its
path. Changed objects list their changed fields as paths such as
``spec.hard["requests.nvidia.com/gpu"]`` with old → new values; an embedded
YAML payload (a ConfigMap's ``config.yaml``) is compared field by field too.
List items are matched by their natural key (``name``; a Prometheus rule's
``alert``/``record``; a toleration's ``key``, with its ``effect`` where one key
has several), e.g. ``spec.groups[name=gpu].rules[alert=GPUDown].expr``, and
lists without one are aligned by content, so adding one alert is one addition,
not a change of every alert after it. A long string that changed is shown
around where it changed (a cut at a fixed width could look identical on both
sides).

Stage: write (docs/architecture.md)."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

__all__ = ["FieldChange", "ObjectChange", "ObjectDiff", "ObjectKey", "diff_objects", "diff_trees", "render_markdown",
           "render_text", "tree_objects", "yaml_documents"]

_YAML_SUFFIXES = (".yaml", ".yml")
# Larger YAML is compared as text: the spec's own limit, and 4x the largest
# file gpuplan writes at 20,000 nodes.
YAML_MAX_BYTES = 16 * 1024 * 1024
_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<absent>"})()
VALUE_WIDTH = 80


@dataclass(frozen=True, order=True)
class ObjectKey:
    """Identity of an object: a Kubernetes object (``path`` empty) or a
    non-object document/file (``kind`` empty, keyed by ``path``)."""

    group: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # for non-objects: the file (and `#n` for its n-th document)

    @property
    def label(self) -> str:
        if not self.kind:
            return self.path
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{kind} {self.namespace}/{self.name}" if self.namespace else f"{kind} {self.name}"


@dataclass(frozen=True)
class FieldChange:
    path: str  # dotted path inside the object; "" for the whole value
    old: Any  # _MISSING when the field was added
    new: Any  # _MISSING when the field was removed

    @property
    def kind(self) -> str:
        return "added" if self.old is _MISSING else "removed" if self.new is _MISSING else "changed"


@dataclass(frozen=True)
class ObjectChange:
    key: ObjectKey
    old_file: str | None
    new_file: str | None
    fields: tuple[FieldChange, ...] = ()

    @property
    def file(self) -> str:
        if self.old_file and self.new_file and self.old_file != self.new_file:
            return f"{self.old_file} → {self.new_file}"
        return self.new_file or self.old_file or ""


@dataclass(frozen=True)
class ObjectDiff:
    added: tuple[ObjectChange, ...]
    removed: tuple[ObjectChange, ...]
    changed: tuple[ObjectChange, ...]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed"
            f" ({self.unchanged} unchanged)"
        )


# ------------------------------------------------------------------ objects of a tree


def _objects(files: Mapping[str, bytes]) -> dict[ObjectKey, tuple[str, Any]]:
    """ObjectKey → (file, value), in file order."""
    out: dict[ObjectKey, tuple[str, Any]] = {}
    for path in sorted(files):
        for key, value in _file_objects(path, files[path]):
            n, k = 1, key
            while k in out:  # the same object twice: keep both, distinguishable
                n += 1
                k = ObjectKey(key.group, key.kind, key.namespace, key.name, f"{key.path}#{n}")
            out[k] = (path, value)
    return out


def tree_objects(files: Mapping[str, bytes]) -> dict[ObjectKey, tuple[str, Any]]:
    """Every object of a tree: ObjectKey -> (file, value)."""
    return _objects(files)


def yaml_documents(text: str | bytes, file: str) -> list[Any] | None:
    """The non-empty documents of a YAML text, read by the bounded manifest
    reader; None when it refuses the text (a syntax error, nesting, an alias
    bomb, an integer of thousands of digits, an object over the API server's
    size) or the text is not UTF-8: the caller then treats it as text."""
    from gpuplan.verify.manifests import load_text

    if isinstance(text, bytes):
        if len(text) > YAML_MAX_BYTES:
            return None
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if len(text) > YAML_MAX_BYTES:
        return None
    try:
        manifests, diags = load_text(text, file, check_duplicates=False)
    except (ValueError, RecursionError):  # defence in depth: whatever the reader lets through is text
        return None
    if any(d.is_error for d in diags):
        return None
    return [m.data for m in manifests]


def _file_objects(path: str, data: bytes) -> Iterator[tuple[ObjectKey, Any]]:
    if path.endswith(_YAML_SUFFIXES):
        docs = yaml_documents(data, path)
        if docs is not None:
            keys = [_object_key(d) for d in docs]
            n_plain = keys.count(None)
            seen = 0
            for key, d in zip(keys, docs):
                if key is None:
                    seen += 1
                    key = ObjectKey(path=path if n_plain == 1 else f"{path}#{seen}")
                yield key, d
            return
    yield ObjectKey(path=path), data.decode("utf-8", errors="replace")


def _object_key(d: Any) -> ObjectKey | None:
    if not isinstance(d, dict):
        return None
    api, kind, meta = d.get("apiVersion"), d.get("kind"), d.get("metadata")
    if not (isinstance(api, str) and isinstance(kind, str) and isinstance(meta, dict)):
        return None
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    group = api.rpartition("/")[0]  # "v1" is the core group ""
    ns = meta.get("namespace")
    return ObjectKey(group, kind, ns if isinstance(ns, str) else "", name)


# ------------------------------------------------------------------- field changes

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _key_path(base: str, key: Any) -> str:
    if isinstance(key, str) and _IDENT.fullmatch(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key, ensure_ascii=False, default=str)}]"


def _rule_key(it: dict) -> str | None:
    """A Prometheus rule: ``alert=<name>`` or ``record=<name>``."""
    for field in ("alert", "record"):
        if isinstance(it.get(field), str):
            return f"{field}={it[field]}"
    return None


def _toleration_key(it: dict) -> str | None:
    if not isinstance(it.get("key"), str):
        return None
    effect = it.get("effect")
    return f"key={it['key']},effect={effect}" if isinstance(effect, str) else f"key={it['key']}"


# How a list's items are matched between two trees, first that fits both lists:
# by `name` (containers, rule groups, volumes, ports), by `alert`/`record`
# (Prometheus rules), by `key` (tolerations, taints, requirements; with the
# effect when one key has several). Every item must be a mapping with a unique
# key, else the next; lists none fits are aligned by content (_aligned).
_NATURAL_KEYS = (
    lambda it: f"name={it['name']}" if isinstance(it.get("name"), str) else None,
    _rule_key,
    lambda it: f"key={it['key']}" if isinstance(it.get("key"), str) else None,
    _toleration_key,
)


def _keyed(old: list, new: list) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both lists' items by their natural key (see _NATURAL_KEYS); None when no
    key identifies every item of both uniquely."""
    for keyf in _NATURAL_KEYS:
        out = []
        for items in (old, new):
            got: dict[str, Any] = {}
            for it in items:
                k = keyf(it) if isinstance(it, dict) else None
                if k is None or k in got:
                    break
                got[k] = it
            else:
                out.append(got)
                continue
            break
        if len(out) == 2 and (out[0] or out[1]):
            return out[0], out[1]
    return None


def _aligned(path: str, old: list, new: list, out: list[FieldChange]) -> None:
    """Items without a natural key, aligned by content: an item inserted or
    removed in the middle is one addition or removal, not a change of every
    item after it. Replaced runs of equal length are compared field by field."""
    sa = [json.dumps(x, sort_keys=True, default=str) for x in old]
    sb = [json.dumps(x, sort_keys=True, default=str) for x in new]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sa, sb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for n in range(pairs):
            _fields(f"{path}[{i1 + n}]", old[i1 + n], new[j1 + n], out)
        for i in range(i1 + pairs, i2):
            out.append(FieldChange(f"{path}[{i}]", old[i], _MISSING))
        for j in range(j1 + pairs, j2):
            out.append(FieldChange(f"{path}[{j}]", _MISSING, new[j]))


def _embedded(text: Any) -> Any:
    """A multi-line string that is itself a YAML mapping/list (a ConfigMap
    payload) parsed, else None."""
    if not isinstance(text, str) or "\n" not in text:
        return None
    docs = yaml_documents(text, "<embedded>")
    if docs is None or len(docs) != 1:
        return None
    v = docs[0]
    return v if isinstance(v, (dict, list)) else None


def _fields(path: str, old: Any, new: Any, out: list[FieldChange]) -> None:
    if old == new and type(old) is type(new):
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            _fields(_key_path(path, k), old[k], new.get(k, _MISSING), out)
        for k in new:
            if k not in old:
                out.append(FieldChange(_key_path(path, k), _MISSING, new[k]))
        return
    if old is _MISSING:
        out.append(FieldChange(path, old, new))
        return
    if new is _MISSING:
        out.append(FieldChange(path, old, new))
        return
    if isinstance(old, list) and isinstance(new, list):
        keyed = _keyed(old, new)
        if keyed is not None:
            bo, bn = keyed
            for k in bo:
                _fields(f"{path}[{k}]", bo[k], bn.get(k, _MISSING), out)
            for k in bn:
                if k not in bo:
                    out.append(FieldChange(f"{path}[{k}]", _MISSING, bn[k]))
            return
        _aligned(path, old, new, out)
        return
    eo, en = _embedded(old), _embedded(new)
    if eo is not None and en is not None:
        before = len(out)
        _fields(path + "|", eo, en, out)  # `|` marks the step into the embedded document
        if len(out) > before:
            return
    out.append(FieldChange(path, old, new))


def diff_trees(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> ObjectDiff:
    """Objects added, removed and changed from ``old`` to ``new``."""
    return diff_objects(_objects(old), _objects(new))


def diff_objects(a: Mapping[ObjectKey, tuple[str, Any]], b: Mapping[ObjectKey, tuple[str, Any]]) -> ObjectDiff:
    """:func:`diff_trees` of two trees already parsed by :func:`tree_objects`."""
    added = tuple(ObjectChange(k, None, b[k][0]) for k in sorted(b) if k not in a)
    removed = tuple(ObjectChange(k, a[k][0], None) for k in sorted(a) if k not in b)
    changed: list[ObjectChange] = []
    unchanged = 0
    for k in sorted(a):
        if k not in b:
            continue
        (fa, va), (fb, vb) = a[k], b[k]
        out: list[FieldChange] = []
        if isinstance(va, str) and isinstance(vb, str) and not k.kind:
            if va != vb:
                out.append(FieldChange("", _text_summary(va), _text_summary(vb, va)))
        else:
            _fields("", va, vb, out)
        if out or fa != fb:
            changed.append(ObjectChange(k, fa, fb, tuple(out)))
        else:
            unchanged += 1
    return ObjectDiff(added, removed, tuple(changed), unchanged)


def _text_summary(text: str, before: str | None = None) -> str:
    if before is None:
        return f"{len(text.splitlines())} lines"
    ops = difflib.SequenceMatcher(None, before.splitlines(), text.splitlines(), autojunk=False).get_opcodes()
    plus = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in ("insert", "replace"))
    minus = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in ("delete", "replace"))
    return f"{len(text.splitlines())} lines (+{plus} -{minus})"


# ------------------------------------------------------------------------ rendering


def _value(v: Any, width: int = VALUE_WIDTH) -> str:
    if v is _MISSING:
        return "(absent)"
    s = json.dumps(v, ensure_ascii=False, default=str, separators=(", ", ": "))
    return s if len(s) <= width else s[: width - 1] + "…"


def _changed_parts(old: str, new: str, width: int = VALUE_WIDTH) -> tuple[str, str]:
    """Two long values (JSON-quoted) cut around where they differ, so the parts
    shown differ too (two cuts at the same width of a long PromQL expression
    that changed near its end would look identical): some common context, the
    differing middle, ``…`` where text is left out on either side."""
    a = json.dumps(old, ensure_ascii=False)
    b = json.dumps(new, ensure_ascii=False)
    if len(a) <= width and len(b) <= width:
        return a, b
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    context = 16

    def window(t: str) -> str:
        start = max(0, p - context)
        end = min(len(t), len(t) - q + context)
        if end - start > width:  # the differing part alone is too long: its start
            end = start + width - 1
            return ("…" if start else "") + t[start:end] + "…"
        return ("…" if start else "") + t[start:end] + ("…" if end < len(t) else "")

    return window(a), window(b)


def _field_line(f: FieldChange) -> str:
    name = f.path or "(content)"
    if f.kind == "added":
        return f"{name}: + {_value(f.new)}"
    if f.kind == "removed":
        return f"{name}: - {_value(f.old)}"
    if not f.path and isinstance(f.old, str) and isinstance(f.new, str):  # a text file
        return f"(content): {f.old} → {f.new}"
    if isinstance(f.old, str) and isinstance(f.new, str):
        a, b = _changed_parts(f.old, f.new)
        return f"{name}: {a} → {b}"
    return f"{name}: {_value(f.old)} → {_value(f.new)}"


def render_text(diff: ObjectDiff) -> str:
    lines = [diff.summary()]
    for sign, group in (("+", diff.added), ("-", diff.removed), ("~", diff.changed)):
        for c in group:
            lines.append(f"{sign} {c.key.label}  ({c.file})")
            for f in c.fields:
                lines.append(f"    {_field_line(f)}")
    return "\n".join(lines) + "\n"


def _code(s: str, *, cell: bool = True) -> str:
    """A Markdown code span (safe inside a table cell when ``cell``: GitHub
    needs `\\|` there, and shows the backslash elsewhere)."""
    s = s.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    if cell:
        s = s.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _cells(c: ObjectChange) -> str:
    k = c.key
    if not k.kind:
        return f"| file | | {_code(k.path)} | {_code(c.file)} |"
    kind = f"{k.kind}.{k.group}" if k.group else k.kind
    if not re.fullmatch(r"[A-Za-z0-9.-]+", kind):  # a hand-edited tree's kind: inert, as code
        kind = _code(kind)
    return f"| {kind} | {_code(k.namespace) if k.namespace else ''} | {_code(k.name)} | {_code(c.file)} |"


def render_markdown(diff: ObjectDiff, *, max_chars: int = 60_000, details_over: int = 5) -> str:
    """A pull-request comment: a summary line, a table per change kind, field
    lists folded in ``<details>`` when longer than ``details_over``. Cut (and
    said so) before ``max_chars``, below GitHub's 65,536-character limit."""
    head = [f"**gpuplan diff**: {diff.summary()}", ""]
    if diff.empty:
        return "\n".join(head + ["No object changes."]) + "\n"
    body: list[str] = []
    omitted = 0
    size = sum(len(x) + 1 for x in head)

    def add(block: list[str]) -> bool:
        nonlocal size
        n = sum(len(x) + 1 for x in block)
        if size + n > max_chars - 200:
            return False
        body.extend(block)
        size += n
        return True

    for title, group in (("Added", diff.added), ("Removed", diff.removed)):
        if not group:
            continue
        add([f"#### {title} ({len(group)})", "", "| Kind | Namespace | Name | File |", "|---|---|---|---|"])
        for i, c in enumerate(group):
            if not add([_cells(c)]):
                omitted += len(group) - i
                break
        add([""])
    if diff.changed:
        add(
            [
                f"#### Changed ({len(diff.changed)})",
                "",
                "| Kind | Namespace | Name | File | Fields |",
                "|---|---|---|---|---|",
            ]
        )
        rows = [f"{_cells(c)} {len(c.fields)} |" for c in diff.changed]
        for i, row in enumerate(rows):
            if not add([row]):
                omitted += len(rows) - i
                break
        add([""])
        for i, c in enumerate(diff.changed):
            if not c.fields:
                continue
            items = [f"- {_code(_field_line(f), cell=False)}" for f in c.fields]
            if len(items) > details_over:
                block = [
                    "<details>",
                    f"<summary>{_html(c.key.label)}: {len(items)} changed fields</summary>",
                    "",
                    *items,
                    "",
                    "</details>",
                    "",
                ]
            else:
                block = [_code(c.key.label, cell=False), "", *items, ""]
            if not add(block):
                omitted += 1
    if omitted:
        body.append(f"_… {omitted} more entries not shown; run `gpuplan diff` locally for all of them._")
    return "\n".join(head + body).rstrip("\n") + "\n"


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
