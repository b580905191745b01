"""Model stage: plain data -> ``Fleet``, with every problem at its line.

pydantic reports errors by ``loc`` (model field path); this module maps each
one back to the YAML position through the loader's ``Document``, rewrites the
message in the spec's own words, and adds "did you mean" hints for misspelt
keys and values. It also checks what a type cannot: unique names and
references between pools, tiers and tenants.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any, Iterable, Iterator

from pydantic import BaseModel, ValidationError

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.spec.loader import Document
from gpuplan.spec.models import API_VERSION, Fleet, Why

E_UNKNOWN_KEY = Code(
    "GP101", "unknown key", Severity.ERROR,
    "A key the spec does not define. Misspelt keys are errors, never silently ignored "
    "(a device-plugin `renameByDefault` under `flags` is silently ignored upstream).",
    bad="sharing: {mode: time-slicing, replica: 4}",
    good="sharing: {mode: time-slicing, replicas: 4}",
    pain="#15 NVIDIA/k8s-device-plugin #1433",
)
E_MISSING = Code(
    "GP102", "missing required key", Severity.ERROR,
    "A required key is absent.",
    bad="pools:\n  - name: train\n    nodes: [gpu-1]", good="pools:\n  - name: train\n    gpu: A100-SXM4-80GB\n    gpusPerNode: 4\n    nodes: [gpu-1]",
)
E_TYPE = Code(
    "GP103", "wrong type", Severity.ERROR,
    "A value has the wrong type. Values are never coerced: \"4\" is a string, not a number.",
    bad='gpusPerNode: "4"', good="gpusPerNode: 4",
)
E_VALUE = Code(
    "GP104", "invalid value", Severity.ERROR,
    "A value is not one of those allowed, or not in the expected format.",
    bad="topology: {policy: strict}", good="topology: {policy: restricted}",
)
E_NAME = Code(
    "GP105", "invalid name", Severity.ERROR,
    "Names that become Kubernetes object names, label values or file names must be DNS-1123 labels.",
    bad="name: Train_A100", good="name: train-a100",
)
E_DUPLICATE = Code(
    "GP106", "duplicate name", Severity.ERROR,
    "Two pools, tiers, tenants or namespaces share a name, or a node is listed twice.",
    bad="pools:\n  - name: train ...\n  - name: train ...", good="pools:\n  - name: train ...\n  - name: infer ...",
)
E_REFERENCE = Code(
    "GP107", "unknown reference", Severity.ERROR,
    "A tier names a pool, or a quota names a tier or namespace, that does not exist.",
    bad="tiers:\n  - {name: training, pool: train-h100}  # no such pool",
    good="tiers:\n  - {name: training, pool: train-a100}",
)
E_API_VERSION = Code(
    "GP108", "unsupported apiVersion or kind", Severity.ERROR,
    f"The file is not a gpuplan fleet spec this version reads (apiVersion {API_VERSION}, kind Fleet).",
    bad="apiVersion: gpuplan.dev/v1", good=f"apiVersion: {API_VERSION}\nkind: Fleet",
)
E_RANGE = Code(
    "GP109", "value out of range", Severity.ERROR,
    "A number is outside its allowed range, or a list or string is too short or too long.",
    bad="gpusPerNode: 0", good="gpusPerNode: 8",
)
E_UNKNOWN_GPU = Code(
    "GP110", "unknown GPU model", Severity.ERROR,
    "The pool's GPU model is not in gpuplan's catalog.",
    bad="gpu: A100-90GB", good="gpu: A100-SXM4-80GB",
)
E_CONFLICT = Code(
    "GP113", "conflicting keys", Severity.ERROR,
    "Keys that exclude each other are both set, or neither of two alternatives is.",
    bad="pools:\n  - name: p\n    nodes: [a]\n    karpenter: {...}",
    good="pools:\n  - name: p\n    nodes: [a]",
)

E_REPO = Code(
    "GP116", "not a place in a Git repository", Severity.ERROR,
    "`gitops.repoURL`, `revision` and `path` are written into the Argo CD Applications and Flux "
    "objects that deliver the tree. A URL without a scheme or with spaces, a revision Git would not "
    "accept as a ref, or a path that leaves the repository (`..`, a leading `/`) gives delivery "
    "objects that never sync.",
    bad="gitops: {repoURL: git.example.com/fleet, path: ../generated}",
    good="gitops: {repoURL: https://git.example.com/fleet.git, path: generated}",
)

CODES = (
    E_UNKNOWN_KEY, E_MISSING, E_TYPE, E_VALUE, E_NAME, E_DUPLICATE, E_REFERENCE,
    E_API_VERSION, E_RANGE, E_UNKNOWN_GPU, E_CONFLICT, E_REPO,
)
_REPO_ERRORS = {"repo_url": "use https://host/org/repo.git, ssh://git@host/org/repo.git or git@host:org/repo.git",
                "repo_path": "a relative path inside the repository, e.g. generated",
                "git_revision": "a branch, tag or commit, e.g. main"}

_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "none_required": "nothing (null)",
}
_NAME_ERRORS = {"dns1123_label", "dns1123_subdomain", "label_key", "label_value"}
_VALUE_ERRORS = {"mig_profile_name", "duration", "string_pattern_mismatch", "enum"}
_RANGE_ERRORS = {
    "greater_than", "greater_than_equal", "less_than", "less_than_equal",
    "too_short", "too_long", "string_too_short", "string_too_long",
}
_CONFLICT_ERRORS = {"pool_provisioning", "mig_layout_form", "pool_gpus_per_node"}


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({_number(value)})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def generic_message(err: dict) -> str | None:
    """gpuplan's words for a pydantic error that needs no model knowledge (a
    missing or unknown key, a wrong type); None for the others. Messages never
    pass pydantic's own wording through: it changes between versions."""
    etype = err.get("type")
    loc = tuple(err.get("loc", ()))
    if etype == "missing" and loc:
        return f"missing required key {loc[-1]!r}"
    if etype == "extra_forbidden":
        return "unknown key"
    if etype in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[etype]}, got {describe(err.get('input'))}"
    return None


def did_you_mean(word: Any, candidates: Iterable[str]) -> str | None:
    if not isinstance(word, str):
        return None
    cands = list(candidates)
    lowered = {c.lower(): c for c in cands}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f"did you mean {lowered[word.lower()]!r}?"
    match = difflib.get_close_matches(word, cands, n=1, cutoff=0.6)
    return f"did you mean {match[0]!r}?" if match else None


def format_path(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out:
            out += f".{p}" if p.replace("-", "").replace("_", "").isalnum() else f"[{p!r}]"
        else:
            out = str(p)
    return out


_SEGMENT = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]")


def parse_path(text: str) -> tuple:
    """The spec path ``format_path`` wrote as ``text`` (``()`` when it is not one)."""
    import ast

    head = re.match(r"[^.\[]*", text).group(0)
    out: list = [head]
    rest = text[len(head):]
    pos = 0
    while pos < len(rest):
        m = _SEGMENT.match(rest, pos)
        if m is None:
            return ()
        name, index, quoted = m.groups()
        out.append(name if name is not None else int(index) if index is not None else ast.literal_eval(quoted))
        pos = m.end()
    return tuple(out)


# --- finding the model behind a loc (for "did you mean" on keys) -------------


def _unwrap(tp: Any) -> list[Any]:
    """The concrete types an annotation may hold."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for a in typing.get_args(tp):
            out.extend(_unwrap(a))
        return out
    return [tp]


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that validated the mapping at ``loc`` (model field path)."""
    current: list[Any] = [Fleet]
    for elem in loc:
        nxt: list[Any] = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                for name, f in tp.model_fields.items():
                    if elem in (f.alias, name):
                        nxt.extend(_unwrap(f.annotation))
                if isinstance(elem, str) and not nxt:
                    # a discriminated-union tag: stay on the member it names
                    mode = tp.model_fields.get("mode")
                    if mode is not None and elem in typing.get_args(mode.annotation):
                        nxt.append(tp)
            else:
                origin = typing.get_origin(tp)
                args = typing.get_args(tp)
                if origin is list and isinstance(elem, int):
                    nxt.extend(_unwrap(args[0]))
                elif origin is dict and isinstance(elem, str):
                    nxt.extend(_unwrap(args[1]))
        current = nxt
        if not current:
            return None
    models = [t for t in current if isinstance(t, type) and issubclass(t, BaseModel)]
    return models[0] if len(models) == 1 else None


def _why_at(loc: tuple) -> str | None:
    """The documented reason for the bound of the number at ``loc`` (a ``Why`` in
    its annotation), found by walking the model types along the loc."""
    current: list[Any] = [Fleet]
    whys: list[str] = []
    for elem in loc:
        nxt: list[Any] = []
        whys = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                for name, f in tp.model_fields.items():
                    if elem in (f.alias, name):
                        whys += [m.text for m in f.metadata if isinstance(m, Why)]
                        nxt.append(f.annotation)
                if isinstance(elem, str) and not nxt:
                    mode = tp.model_fields.get("mode")
                    if mode is not None and elem in typing.get_args(mode.annotation):
                        nxt.append(tp)
                continue
            origin = typing.get_origin(tp)
            args = typing.get_args(tp)
            if origin is list and isinstance(elem, int):
                nxt.append(args[0])
            elif origin is dict and isinstance(elem, str):
                nxt.append(args[1])
        # unwrap Optional / Annotated, collecting Why markers
        flat: list[Any] = []
        stack = list(nxt)
        while stack:
            tp = stack.pop()
            origin = typing.get_origin(tp)
            if origin is typing.Annotated:
                args = typing.get_args(tp)
                whys += [m.text for m in args[1:] if isinstance(m, Why)]
                stack.append(args[0])
            elif origin in (typing.Union, types.UnionType):
                stack.extend(typing.get_args(tp))
            else:
                flat.append(tp)
        current = flat
        if not current:
            return None
    return whys[0] if whys else None


def _upper_bound_at(loc: tuple) -> float | None:
    """The ``le`` bound of the field at ``loc`` (top-level model fields only)."""
    parent = _model_at(loc[:-1])
    if parent is None:
        return None
    for name, f in parent.model_fields.items():
        if loc[-1] in (f.alias, name):
            stack = [f.annotation, *f.metadata]
            while stack:
                tp = stack.pop()
                le = getattr(tp, "le", None)
                if isinstance(le, (int, float)):
                    return le
                if typing.get_origin(tp) is typing.Annotated:
                    stack.extend(typing.get_args(tp))
                elif typing.get_origin(tp) in (typing.Union, types.UnionType):
                    stack.extend(typing.get_args(tp))
                stack.extend(getattr(tp, "metadata", ()) if not isinstance(tp, type) else ())
    return None


# Names users bring from other tools, mapped to where the spec says the same thing
# (difflib would offer a look-alike key with another meaning).
_SYNONYMS: dict[str, dict[str, str]] = {
    "Topology": {
        "topologyManagerPolicy": "policy", "topology-manager-policy": "policy",
        "topologyManagerScope": "scope", "topology-manager-scope": "scope",
        "topologyManagerPolicyOptions": "preferClosestNUMANodes",
    },
    "Pool": {
        "topologyManagerPolicy": "topology.policy", "topology-manager-policy": "topology.policy",
        "topologyManagerScope": "topology.scope", "topology-manager-scope": "topology.scope",
        "cpuManagerPolicy": "topology.cpuManagerPolicy", "reservedSystemCPUs": "topology.reservedSystemCPUs",
        "migLayout": "sharing.layout", "mig-devices": "sharing.layout", "replicas": "sharing.replicas",
    },
    "Mig": {"mig-devices": "layout", "migDevices": "layout", "profiles": "layout",
            "mig-enabled": "mode: exclusive (or omit layout in a device group)"},
    "MigDevices": {"mig-devices": "layout", "migDevices": "layout", "profiles": "layout",
                   "mig-enabled": "layout (omit it to leave these GPUs MIG-disabled)"},
    "GpuOperator": {"version": "chartVersion"},
}


def _key_hint(model: type[BaseModel] | None, key: Any) -> str | None:
    if model is not None and isinstance(key, str):
        target = _SYNONYMS.get(model.__name__, {}).get(key)
        if target is not None:
            return f"did you mean {target!r}?" if " " not in target else f"use {target}"
    return did_you_mean(key, _allowed_keys(model))


def _allowed_keys(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    # a field's YAML key is its alias; where pydantic has not resolved it yet (a forward
    # reference defers it), the model's alias generator gives it: the schema's key, never the
    # Python name (fleet.yaml refuses snake_case keys: validate(by_name=False))
    gen = model.model_config.get("alias_generator")
    return [f.alias or (gen(n) if callable(gen) else n) for n, f in model.model_fields.items()]


# --- error mapping -----------------------------------------------------------


def _data_path(doc: Document, loc: tuple) -> tuple[tuple, bool]:
    """Turn a pydantic loc into a path through the YAML data, dropping union tags.
    Returns (path, points_at_key)."""
    node: Any = doc.data
    path: list[Any] = []
    at_key = False
    for elem in loc:
        if elem == "[key]":
            at_key = True
            break
        if isinstance(node, dict) and elem in node:
            node = node[elem]
            path.append(elem)
        elif isinstance(node, list) and isinstance(elem, int) and 0 <= elem < len(node):
            node = node[elem]
            path.append(elem)
        elif isinstance(node, dict) and isinstance(elem, str) and node.get("mode") == elem:
            continue  # discriminator tag
        else:
            path.append(elem)
            break
    return tuple(path), at_key


def _diag_for(doc: Document, err: dict) -> Diagnostic:
    etype = err["type"]
    loc = tuple(err["loc"])
    path, at_key = _data_path(doc, loc)
    value = err.get("input")
    spec_path = format_path(path)
    hint = None

    def at(p: tuple, key: bool = False) -> dict:
        line, col = doc.locate(p, key=key)
        return {"file": doc.file, "line": line, "col": col, "path": format_path(p) or None}

    if etype == "extra_forbidden":
        key = loc[-1]
        parent = loc[:-1]
        model = _model_at(parent)
        allowed = _allowed_keys(model)
        hint = _key_hint(model, key)
        if hint is None and allowed:
            hint = "allowed keys: " + ", ".join(allowed)
        return E_UNKNOWN_KEY.diag(f"unknown key {key!r}", hint=hint, **at(path, key=True))
    if etype in ("missing", "union_tag_not_found"):
        key = loc[-1] if etype == "missing" else err.get("ctx", {}).get("discriminator", "'mode'").strip("'")
        parent = path[:-1] if etype == "missing" else path
        where = format_path(parent)
        msg = f"missing required key {key!r}" + (f" in {where}" if where else "")
        return E_MISSING.diag(msg, **at(parent, key=True))
    if etype == "union_tag_invalid":
        ctx = err.get("ctx", {})
        tag = ctx.get("tag")
        expected = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
        hint = did_you_mean(tag, expected) or ("expected one of: " + ", ".join(expected))
        return E_VALUE.diag(f"unknown sharing mode {tag!r}", hint=hint, **at(path + ("mode",)))
    if etype == "literal_error":
        expected = [e.strip().strip("'") for e in str(err.get("ctx", {}).get("expected", "")).replace(" or ", ",").split(",") if e.strip()]
        if path in (("apiVersion",), ("kind",)):
            return E_API_VERSION.diag(
                f"unsupported {path[0]} {value!r}; this gpuplan reads apiVersion {API_VERSION}, kind Fleet",
                **at(path))
        hint = did_you_mean(value, expected) or ("expected one of: " + ", ".join(expected))
        return E_VALUE.diag(f"invalid value {value!r} for {_field_name(path)}", hint=hint, **at(path, at_key))
    if etype in _REPO_ERRORS:
        return E_REPO.diag(err["msg"], hint=_REPO_ERRORS[etype], **at(path, at_key))
    if etype in _NAME_ERRORS:
        return E_NAME.diag(err["msg"], **at(path, at_key))
    if etype in _VALUE_ERRORS:
        return E_VALUE.diag(err["msg"], **at(path, at_key))
    if etype in _RANGE_ERRORS:
        why = _why_at(loc)
        bound = _range_text(etype, err.get("ctx", {}))
        if bound and isinstance(value, (int, float)) and not isinstance(value, bool):
            msg = f"{spec_path or 'value'} must be {bound} (got {_number(value)})"
        else:
            msg = f"{spec_path or 'value'}: {err['msg'][0].lower()}{err['msg'][1:]}"
        if why and etype in ("less_than", "less_than_equal"):
            msg += f": {why}"
        return E_RANGE.diag(msg, hint=f"use a value {bound}" if bound else None, **at(path, at_key))
    if etype == "finite_number":
        return E_RANGE.diag(f"{spec_path or 'value'} must be a finite number, not {value!r}",
                            hint="write a plain number such as 2.5", **at(path, at_key))
    if etype in _CONFLICT_ERRORS:
        return E_CONFLICT.diag(err["msg"], **at(path))
    if etype in ("float_type", "float_parsing") and isinstance(value, int) and not isinstance(value, bool):
        # an int too large for a float: out of range, whatever the field's bound is
        why, le = _why_at(loc), _upper_bound_at(loc)
        return E_RANGE.diag(f"{spec_path or 'value'} is far too large ({_number(value)})" + (f": {why}" if why else ""),
                            hint=f"use a value at most {le:,}" if le is not None else "use a plain number such as 2.5",
                            **at(path, at_key))
    if etype in _TYPE_WORDS:
        msg = f"expected {_TYPE_WORDS[etype]}, got {describe(value)}"
        if etype in ("int_type", "float_type") and isinstance(value, str):
            hint = "write the number without quotes"
        elif etype == "int_type" and isinstance(value, float):
            hint = (f"write {int(value)} (an integer, without a decimal point)" if value == value and
                    abs(value) < 1e18 and value == int(value) else "write a whole number")
        elif etype == "string_type" and value is not None and not isinstance(value, (dict, list)):
            hint = "quote the value to make it a string"
        return E_TYPE.diag(msg, hint=hint, **at(path, at_key))
    return E_VALUE.diag(err["msg"], **at(path, at_key))


def _field_name(path: tuple) -> str:
    """The field a path ends in, with a list index on its field: `capacityTypes[0]`."""
    if not path:
        return ""
    if isinstance(path[-1], int):
        tail = [p for p in path if not isinstance(p, int)]
        return f"{tail[-1] if tail else ''}[{path[-1]}]"
    return str(path[-1])


def _number(v: int | float) -> str:
    if isinstance(v, int):
        # never str() a huge int: Python refuses more than 4300 digits (and it costs quadratic time)
        if v.bit_length() <= 128:
            return f"{v:,}"
        return f"an integer of about {int(v.bit_length() * 0.30103) + 1:,} digits"
    return repr(v)


def _range_text(etype: str, ctx: dict) -> str | None:
    for key, word in (("le", "at most"), ("lt", "below"), ("ge", "at least"), ("gt", "above"),
                      ("max_length", "at most"), ("min_length", "at least")):
        if key in ctx:
            bound = ctx[key]
            shown = f"{bound:,}" if isinstance(bound, int) and not isinstance(bound, bool) else f"{bound}"
            unit = ""
            if key.endswith("length"):
                unit = " characters" if "string" in etype else " items"
            return f"{word} {shown}{unit}"
    return None


def _drop_misspelt_missing(errors: list[dict]) -> list[dict]:
    """`replica: 4` is one mistake, not two: when an unknown key is a close
    misspelling of a missing required key, report only the unknown key."""
    misspelt = set()
    for e in errors:
        if e["type"] == "extra_forbidden":
            parent = tuple(e["loc"][:-1])
            hint = did_you_mean(e["loc"][-1], _allowed_keys(_model_at(parent)))
            if hint and _key_hint(_model_at(parent), e["loc"][-1]) == hint:
                misspelt.add(parent + (hint.split("'")[1],))
    return [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) in misspelt)]


def parse_fleet(doc: Document) -> tuple[Fleet | None, list[Diagnostic]]:
    """Validate loaded data against the models, then names and references."""
    if not isinstance(doc.data, dict):
        from gpuplan.spec.loader import E_NOT_MAPPING

        return None, [E_NOT_MAPPING.diag(
            f"the document is {describe(doc.data)}, not a mapping", file=doc.file, line=1, col=1,
            hint="a fleet spec starts with apiVersion, kind, metadata and spec")]
    try:
        fleet = Fleet.model_validate(doc.data, by_alias=True, by_name=False)
    except ValidationError as exc:
        return None, _schema_diags(doc, exc)
    return fleet, list(check_names(fleet, doc))


# Schema errors turned into diagnostics (with positions and "did you mean"
# hints) per run. A hostile spec of a million misspelt keys yields a million
# pydantic errors; mapping each costs far more than finding it, so only the
# first ones are mapped and the rest are counted in one line.
MAX_SCHEMA_DIAGS = 100


def _schema_diags(doc: Document, exc: ValidationError) -> list[Diagnostic]:
    from gpuplan.codes import E_MORE

    total = exc.error_count()
    if total <= 10 * MAX_SCHEMA_DIAGS:
        errors = exc.errors(include_url=False)
    else:
        # Turning a million pydantic errors into dicts costs gigabytes; the
        # first ones come as well from the data with every long list and
        # mapping cut short (the keys any model knows are kept, so a required
        # key is never cut off). The count stays the full one.
        del exc
        errors = _first_errors(doc.data)
    shown = _drop_misspelt_missing(errors[:MAX_SCHEMA_DIAGS])
    out = [_diag_for(doc, e) for e in shown]
    rest = total - min(total, MAX_SCHEMA_DIAGS)  # errors never looked at
    if rest > 0:
        first = out[-1] if len(errors) <= MAX_SCHEMA_DIAGS else _diag_for(doc, errors[MAX_SCHEMA_DIAGS])
        out.append(E_MORE.diag(
            f"{rest:,} more schema errors not listed", file=doc.file, line=first.line, col=first.col,
            severity=Severity.ERROR, hint="fix the errors shown and run again"))
    return out


def _first_errors(data: Any) -> list[dict]:
    keep = _all_field_keys()
    limit = MAX_SCHEMA_DIAGS + 1

    def cut(node: Any) -> Any:
        if isinstance(node, list):
            return [cut(v) for v in node[:limit]]
        if isinstance(node, dict):
            out = {}
            others = 0
            for k, v in node.items():
                if k in keep:
                    out[k] = cut(v)
                elif others < limit:
                    out[k] = cut(v)
                    others += 1
            return out
        return node

    try:
        Fleet.model_validate(cut(data), by_alias=True, by_name=False)
    except ValidationError as exc:
        return exc.errors(include_url=False)[: MAX_SCHEMA_DIAGS + 1]
    return []


def _all_field_keys() -> set[str]:
    """Every key (alias or name) of every model the spec can hold."""
    seen: set[type] = set()
    keys: set[str] = set()
    stack: list[Any] = [Fleet]
    while stack:
        tp = stack.pop()
        for t in _unwrap(tp):
            origin = typing.get_origin(t)
            if origin in (list, dict, tuple, set, frozenset):
                stack.extend(typing.get_args(t))
            elif isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                seen.add(t)
                for name, f in t.model_fields.items():
                    keys.update(k for k in (name, f.alias) if k)
                    stack.append(f.annotation)
    return keys


def _dupes(items: Iterable[tuple[str, tuple]]) -> Iterator[tuple[str, tuple, tuple]]:
    seen: dict[str, tuple] = {}
    for name, path in items:
        if name in seen:
            yield name, path, seen[name]
        else:
            seen[name] = path


def check_names(fleet: Fleet, doc: Document) -> Iterator[Diagnostic]:
    """Unique names and resolvable references."""
    spec = fleet.spec

    def diag(code: Code, msg: str, path: tuple, hint: str | None = None, key: bool = False) -> Diagnostic:
        line, col = doc.locate(path, key=key)
        return code.diag(msg, file=doc.file, line=line, col=col, path=format_path(path), hint=hint)

    def first_line(path: tuple) -> int | None:
        return doc.locate(path)[0]

    for kind, items in (("pool", spec.pools), ("tier", spec.tiers), ("tenant", spec.tenants)):
        field = kind + "s"
        for name, path, first in _dupes((it.name, ("spec", field, i, "name")) for i, it in enumerate(items)):
            yield diag(E_DUPLICATE, f"{kind} {name!r} is defined twice (first on line {first_line(first)})", path)
    nodes = ((n, ("spec", "pools", i, "nodes", j)) for i, p in enumerate(spec.pools) for j, n in enumerate(p.nodes or ()))
    for name, path, first in _dupes(nodes):
        yield diag(E_DUPLICATE, f"node {name!r} is listed twice (first on line {first_line(first)})", path,
                   hint="a node belongs to exactly one pool")
    namespaces = ((ns, ("spec", "tenants", i, "namespaces", j)) for i, t in enumerate(spec.tenants) for j, ns in enumerate(t.namespaces))
    for name, path, first in _dupes(namespaces):
        yield diag(E_DUPLICATE, f"namespace {name!r} is listed twice (first on line {first_line(first)})", path,
                   hint="a namespace belongs to exactly one tenant")
    for i, p in enumerate(spec.pools):
        if p.sharing.mode == "mig" and p.sharing.devices:
            idx = [(str(d), ("spec", "pools", i, "sharing", "devices", g, "devices", k))
                   for g, grp in enumerate(p.sharing.devices) for k, d in enumerate(grp.devices)]
            for name, path, first in _dupes(idx):
                yield diag(E_DUPLICATE, f"GPU index {name} appears in two device groups", path)

    # Sets for membership, and "did you mean" (a scan of every name) only for
    # the first few misses: the checks stay linear in the spec's size.
    pools = [p.name for p in spec.pools]
    tiers = [t.name for t in spec.tiers]
    pool_set, tier_set = set(pools), set(tiers)
    hints = _HintBudget()
    for i, t in enumerate(spec.tiers):
        if t.pool not in pool_set:
            yield diag(E_REFERENCE, f"tier {t.name!r} names pool {t.pool!r}, which is not defined",
                       ("spec", "tiers", i, "pool"),
                       hint=hints.did_you_mean(t.pool, pools) or f"pools: {_some(pools)}")
    for i, tn in enumerate(spec.tenants):
        namespaces = set(tn.namespaces)
        for ns, per_tier in tn.quotas.items():
            if ns not in namespaces:
                yield diag(E_REFERENCE, f"quota for namespace {ns!r}, which tenant {tn.name!r} does not list",
                           ("spec", "tenants", i, "quotas", ns),
                           hint=hints.did_you_mean(ns, tn.namespaces) or "add it to the tenant's namespaces", key=True)
            for tier in per_tier:
                if tier not in tier_set:
                    yield diag(E_REFERENCE, f"quota names tier {tier!r}, which is not defined",
                               ("spec", "tenants", i, "quotas", ns, tier),
                               hint=hints.did_you_mean(tier, tiers) or (
                                   f"define tier {tier!r} under spec.tiers"
                                   + (f" (defined: {_some(tiers)})" if tiers else "")),
                               key=True)


class _HintBudget:
    """``did_you_mean`` for the first ``n`` misses only."""

    def __init__(self, n: int = MAX_SCHEMA_DIAGS) -> None:
        self.left = n

    def did_you_mean(self, word: Any, candidates: list[str]) -> str | None:
        if self.left <= 0:
            return None
        self.left -= 1
        return did_you_mean(word, candidates)


def _some(names: list[str], n: int = 10) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")
