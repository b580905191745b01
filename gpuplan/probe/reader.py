"""Reading inventories: files named by the spec, and texts pulled from ConfigMaps.

Inventories come from nodes, and a node can be compromised: every inventory,
read from a file or pulled from a ConfigMap, goes through the spec's bounded
loader (``gpuplan.spec.loader``) with ``INVENTORY_LIMITS``: regular files only,
at most 1 MiB read, nesting, values and alias expansion bounded, and at most
``MAX_DIAGS_PER_DOCUMENT`` diagnostics per document. One bad file or document
never stops the others.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pydantic import ValidationError

from gpuplan.diagnostics import Diagnostic
from gpuplan.probe.codes import GP701, GP702, GP703, GP704, GP705, GP706, GP707
from gpuplan.probe.inventory import API_VERSION, KIND, FieldError, NodeInventory
from gpuplan.spec.loader import INVENTORY_LIMITS, Document, Limits, LoadError, load_all, load_text, read_source
from gpuplan.spec.validate import generic_message

INVENTORY_SUFFIXES = (".yaml", ".yml", ".json")
MAX_DIAGS_PER_DOCUMENT = 20


def inventory_files(directory: Path) -> list[Path]:
    """The inventory files of a directory (not recursive, no hidden files),
    sorted. A FIFO or device with such a name is listed too, so that reading
    it is refused with a message instead of skipped in silence."""
    return sorted(f for f in directory.iterdir()
                  if f.suffix in INVENTORY_SUFFIXES and not f.name.startswith(".") and not f.is_dir())


def _expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[Diagnostic]]:

    files: list[Path] = []
    diags: list[Diagnostic] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = inventory_files(p)
            if not found:
                diags.append(GP706.diag(f"no inventory files (*.yaml, *.yml, *.json) in {p}", file=str(p)))
            files.extend(found)
        elif os.path.lexists(p):
            files.append(p)  # read_source refuses what is not a regular file
        else:
            diags.append(GP701.diag(f"inventory file not found: {p}", file=str(p)))
    return files, diags


def _loc_text(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _loader_diag(d: Diagnostic) -> Diagnostic:
    """A loader problem (GP0xx) in an inventory file, as the inventory code
    that says which kind of file it was: GP701 unreadable, GP702 unparsable."""

    unreadable = {"GP007", "GP008", "GP010", "GP013"}
    code = GP701 if d.code in unreadable else GP702
    return code.diag(f"{d.message} [{d.code}]", file=d.file, line=d.line, col=d.col, hint=d.hint)


def _json_shape_problem(data: Any, limits: Limits) -> str | None:
    """Depth and value count of parsed JSON (which has no aliases), walked
    iteratively so no input can exhaust the stack."""
    stack = [(data, 1)]
    values = 0
    while stack:
        node, depth = stack.pop()
        values += 1
        if values > limits.max_values:
            return f"the document holds more than {limits.max_values:,} keys, items and values"
        if depth > limits.max_depth:
            return f"nesting deeper than {limits.max_depth} levels"
        if isinstance(node, dict):
            values += len(node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return None


def parse_documents(text: str, file: str, *, json_format: bool = False) -> tuple[list[Any], list[Diagnostic]]:
    """The documents of one inventory text as ``Document``s (plain data plus
    positions), within INVENTORY_LIMITS. JSON goes through ``json`` (13x
    faster than YAML at a thousand nodes), checked for depth and size."""

    if json_format:
        try:
            data = json.loads(text)
        except RecursionError:
            return [], [GP702.diag(f"nesting deeper than {INVENTORY_LIMITS.max_depth} levels", file=file)]
        except ValueError as exc:
            line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
            return [], [GP702.diag(f"JSON syntax error: {getattr(exc, 'msg', exc)}", file=file, line=line, col=col)]
        why = _json_shape_problem(data, INVENTORY_LIMITS)
        if why:
            return [], [GP702.diag(why, file=file, line=1, col=1)]
        return [Document(file=file, data=data, text=text)], []
    try:
        return load_all(text, file, INVENTORY_LIMITS), []
    except LoadError as exc:
        return [], [_loader_diag(exc.diag)]


def _positions(doc: Any) -> Any:
    """A document with positions: JSON is parsed again, as YAML, only when it
    is invalid (its diagnostics then get lines)."""

    if doc.value_pos or not doc.text:
        return doc
    try:
        return load_text(doc.text, doc.file, INVENTORY_LIMITS)
    except LoadError:
        return doc


def validate_document(doc: Any) -> tuple[NodeInventory | None, list[Diagnostic]]:
    """One loaded document as a ``NodeInventory``, or its problems (at most
    MAX_DIAGS_PER_DOCUMENT, then one line counting the rest)."""

    data, file = doc.data, doc.file
    if not isinstance(data, dict):
        line, col = _positions(doc).locate(())
        return None, [GP703.diag("an inventory document must be a mapping", file=file, line=line, col=col)]
    if data.get("kind") != KIND or data.get("apiVersion") != API_VERSION:
        key = "kind" if data.get("kind") != KIND else "apiVersion"
        line, col = _positions(doc).locate((key,) if key in data else ())
        return None, [GP703.diag(
            f"not a NodeInventory document (want apiVersion: {API_VERSION}, kind: {KIND}; "
            f"got {_short(data.get('apiVersion'))}, {_short(data.get('kind'))})",
            file=file, line=line, col=col)]
    try:
        return NodeInventory.model_validate(data), []
    except ValidationError as exc:
        located = _positions(doc)
        diags = []
        for err in exc.errors(include_url=False)[:MAX_DIAGS_PER_DOCUMENT]:
            loc = tuple(err.get("loc", ()))
            line, col = located.locate(loc, key=err.get("type") == "extra_forbidden")
            where = _loc_text(loc)
            msg = generic_message(err) or err.get("msg", "invalid")
            # a missing key is named in the message: prefix the mapping that lacks it
            prefix = _loc_text(loc[:-1]) if err.get("type") == "missing" else where
            diags.append(GP704.diag(f"{prefix + ': ' if prefix else ''}{msg}", file=file, line=line, col=col,
                                    path=where or None))
        more = exc.error_count() - MAX_DIAGS_PER_DOCUMENT
        if more > 0:
            diags.append(GP704.diag(f"{more:,} more problems in this document not listed", file=file,
                                    line=diags[-1].line, col=diags[-1].col))
        return None, diags


def _short(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


@dataclass
class InventoryRead:
    nodes: list[NodeInventory] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every file read, in order
    sources: dict[str, str] = field(default_factory=dict)  # text of files with diagnostics


def load_inventory(paths: Iterable[str | Path]) -> tuple[list[NodeInventory], list[Diagnostic]]:
    """Read inventory files (see ``read_inventory``): (valid inventories, problems)."""
    r = read_inventory(paths)
    return r.nodes, r.diagnostics


def read_inventory(paths: Iterable[str | Path], *, display: Callable[[Path], str] = str) -> InventoryRead:
    """Read inventory files (YAML or JSON; a directory means its *.yaml, *.yml
    and *.json files; a file may hold several ``---`` documents).

    Returns the valid inventories in file order and the problems found as
    GP7xx diagnostics with file:line:col. Never raises for bad input; invalid
    documents are left out, and one bad file never stops the others. Also
    warns (GP707) about fields the probe could not read, so rules know a fact
    may be missing. ``display`` names a file in diagnostics.
    """
    import gc

    # Parsing builds only acyclic trees of dicts and lists; the cyclic GC
    # would rescan all of them again and again (~40% of the time at 1,000
    # inventories), so it is paused and restored.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_inventory(paths, display)
    finally:
        if was_enabled:
            gc.enable()


def _read_inventory(paths: Iterable[str | Path], display: Callable[[Path], str]) -> InventoryRead:

    files, diags = _expand(paths)
    res = InventoryRead(diagnostics=diags)
    seen: dict[str, str] = {}
    for path in files:
        file = display(path)
        res.files.append(file)
        try:
            text = read_source(path, display=file, max_bytes=INVENTORY_LIMITS.max_bytes)
        except LoadError as exc:
            diags.append(_loader_diag(exc.diag))
            continue
        docs, errs = parse_documents(text, file, json_format=path.suffix == ".json")
        had = len(diags)
        diags.extend(errs)
        for doc in docs:
            inv, errs = validate_document(doc)
            diags.extend(errs)
            if inv is None:
                continue
            name = inv.metadata.name
            if name in seen:
                line, col = _positions(doc).locate(("metadata", "name"))
                diags.append(GP705.diag(f"node {name!r} has a second inventory (first in {seen[name]})",
                                        file=file, line=line, col=col, path="metadata.name"))
                continue
            seen[name] = file
            res.nodes.append(inv)
            if inv.system.errors or inv.topology.errors or any(g.errors for g in inv.gpus):
                diags.extend(_field_error_warnings(inv, file, _positions(doc)))
        if len(diags) > had:
            res.sources[file] = text
    return res


def _field_error_warnings(inv: NodeInventory, file: str, doc: Any) -> list[Diagnostic]:

    out: list[Diagnostic] = []
    node = inv.metadata.name
    groups: list[tuple[tuple, str, list[FieldError]]] = [(("system",), "system", inv.system.errors)]
    for i, g in enumerate(inv.gpus):
        groups.append((("gpus", i), f"GPU {g.index}", g.errors))
    groups.append((("topology",), "topology", inv.topology.errors))
    for loc, what, errors in groups:
        for e in errors:
            line, col = doc.locate((*loc, "errors"))
            out.append(
                GP707.diag(
                    f"node {node}: {what}: {e.field} was not read ({e.nvml_error})",
                    file=file,
                    line=line,
                    col=col,
                    path=_loc_text((*loc, "errors")),
                )
            )
    return out
