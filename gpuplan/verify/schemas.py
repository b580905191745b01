"""Structural validation: pinned strict CRD schemas (jsonschema) and core
Kubernetes kinds (the strict schemas of the PyPI package kubernetes-validate,
for one Kubernetes minor version).

Validators are built once per schema and kept for the process.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

E_NOT_SERVED = Code(
    "GP833", "version or kind not served by the pinned CRD", Severity.ERROR,
    "The object's API group is one gpuplan pins (Karpenter, GPU Operator, NFD, Argo CD, Flux, Kueue), "
    "but no pinned CRD of that group serves this kind at this version: the API server would answer "
    "`no matches for kind`.",
    bad="apiVersion: karpenter.sh/v1beta1\nkind: NodePool", good="apiVersion: karpenter.sh/v1\nkind: NodePool",
)
W_UNKNOWN_KIND = Code(
    "GP834", "kind not verified", Severity.WARNING,
    "No pinned schema knows this apiVersion/kind (a CRD gpuplan does not pin, or a core kind "
    "kubernetes-validate does not have at this Kubernetes version). It is listed, not verified.",
    bad="apiVersion: cert-manager.io/v1\nkind: Certificate", good="apiVersion: v1\nkind: ConfigMap",
)
E_CRD_SCHEMA = Code(
    "GP835", "object breaks its CRD schema", Severity.ERROR,
    "The object does not match the strict upstream CRD schema pinned in gpuplan/upstream/crds: an "
    "unknown field (the API server drops it, or rejects it under strict field validation), a wrong "
    "type, a value outside an enum or pattern, a missing required field.",
    bad="apiVersion: karpenter.sh/v1\nkind: NodePool\nspec:\n  template:\n    spec:\n      expireAfter: 720h"
        "\n      kubelet: {maxPods: 110}   # not a v1 NodePool field",
    good="apiVersion: karpenter.sh/v1\nkind: NodePool\nspec:\n  template:\n    spec:\n      expireAfter: 720h",
)
E_CORE_SCHEMA = Code(
    "GP836", "object breaks its Kubernetes schema", Severity.ERROR,
    "A core object (Namespace, ResourceQuota, PriorityClass, ConfigMap, ValidatingAdmissionPolicy, ...) "
    "does not match the strict OpenAPI schema of its Kubernetes version (from kubernetes-validate).",
    bad="apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: x}\nspec: {value: 1}",
    good="apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: x}\nvalue: 1",
)
E_K8S_VERSION = Code(
    "GP837", "Kubernetes version has no schemas", Severity.ERROR,
    "The Kubernetes version asked for is outside what the installed kubernetes-validate carries, so "
    "core kinds cannot be verified.",
    bad="gpuplan verify --kubernetes-version 1.12 generated/",
    good="gpuplan verify --kubernetes-version 1.33 generated/",
)

W_PATTERN = Code(
    "GP847", "schema pattern not checked", Severity.WARNING,
    "A `pattern` of the pinned schema is not valid RE2 syntax, the regular expressions the API server "
    "evaluates (Go's regexp package), so gpuplan cannot check the value against it. The value is "
    "listed, not checked; the rest of the object is verified.",
    bad="pattern: '^(?=a)b$'   # a lookahead: Python syntax, not RE2", good="pattern: '^[a-z]+$'",
)

CODES = (E_NOT_SERVED, W_UNKNOWN_KIND, E_CRD_SCHEMA, E_CORE_SCHEMA, E_K8S_VERSION, W_PATTERN)

# Marks the ValidationError of a pattern RE2 cannot compile (a warning, not a refusal).
_NOT_RE2 = "not RE2 syntax"


# --- `pattern` with RE2 semantics -------------------------------------------------------
#
# The API server checks `pattern` with Go's regexp (RE2 syntax and semantics,
# linear time: k8s.io/kube-openapi pkg/validation/validate, Pattern ->
# regexp.MatchString). jsonschema's own keyword uses Python's backtracking `re`,
# where a 403-character value can take longer than any CI job runs (the pinned
# NodePool budget `schedule` pattern). The two also disagree where Go is
# ASCII-only (\d, \w, \s) and on `$` (end of text in Go; in Python also before a
# final newline). google-re2 gives both the semantics and the bound.


@lru_cache(maxsize=4096)
def _re2(pattern: str) -> Any:
    """The compiled pattern, or the error text when RE2 cannot compile it."""
    import re2

    try:
        return re2.compile(pattern)
    except Exception as exc:  # noqa: BLE001 - re2.error, and whatever a future version raises
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    rx = _re2(patrn)
    if isinstance(rx, str):
        yield ValidationError(f"pattern {patrn!r} is {_NOT_RE2} ({rx}): the value was not checked against it")
    elif rx.search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, props: dict, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for patrn, sub in props.items():
        rx = _re2(patrn)
        if isinstance(rx, str):
            yield ValidationError(f"pattern {patrn!r} is {_NOT_RE2} ({rx}): keys were not checked against it")
            continue
        for k, v in instance.items():
            if rx.search(k) is not None:
                yield from validator.descend(v, sub, path=k, schema_path=patrn)


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties})


@lru_cache(maxsize=None)
def crd_validator(group: str, kind: str, version: str) -> Any | None:
    from gpuplan.upstream import crd_schema

    schema = crd_schema(group, kind, version)
    return None if schema is None else _validator_class()(schema)


# --- structural defaults ----------------------------------------------------------------


def apply_defaults(schema: dict, value: Any) -> Any:
    """``value`` with the schema's ``default``s filled in where a field is absent,
    as the API server defaults an object before it validates the schema and the
    CEL rules (a required field with a default is then present)."""
    if isinstance(value, dict):
        props = schema.get("properties")
        if props:
            for name, sub in props.items():
                if name not in value and "default" in sub:
                    value[name] = copy.deepcopy(sub["default"])
                if name in value:
                    value[name] = apply_defaults(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for k in value:
                value[k] = apply_defaults(extra, value[k])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], v) for v in value]
    return value


# --- core kinds through kubernetes-validate ---------------------------------------------


def core_versions() -> list[str]:
    from kubernetes_validate.utils import all_versions

    return all_versions()


def core_version(wanted: str) -> str | None:
    """The newest schema version kubernetes-validate has that is not newer than
    ``wanted`` (its own rule in ``kubernetes_validate.validate``), or None."""
    mm = _major_minor(wanted.lstrip("v"))
    fit = [v for v in core_versions() if mm is not None and _major_minor(v) == mm]
    return fit[-1] if fit else None


def older(a: str, b: str) -> bool:
    """Version ``a`` is an older minor than ``b`` (unparsable: False)."""
    x, y = _major_minor(a.lstrip("v")), _major_minor(b.lstrip("v"))
    return x is not None and y is not None and x < y


def _major_minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)(\.\d+)?$", version)
    return (int(m[1]), int(m[2])) if m else None


@lru_cache(maxsize=None)
def _definitions(version: str) -> Any:
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    defs = schema_contents(f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version)
    return Resource.from_contents(defs) @ Registry()


@lru_cache(maxsize=None)
def core_validator(version: str, api_version: str, kind: str) -> Any | None:
    """A strict validator for a core kind, or None when kubernetes-validate has no
    schema for it. File naming as kubernetes_validate.validate:
    ``<kind>-<group's first label>-<version>.json`` (``rbac.authorization.k8s.io/v1`` -> ``rbac-v1``)."""
    from kubernetes_validate.utils import schema_contents
    from referencing import Resource

    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    if not re.fullmatch(r"[A-Za-z0-9]+", kind) or not re.fullmatch(r"[a-z0-9-]+", short):
        return None  # names from a manifest never become paths outside the schema directory
    try:
        schema = schema_contents(f"kubernetes-json-schema/v{version}-local-strict/{kind.lower()}-{short}.json",
                                 version)
    except FileNotFoundError:
        return None
    registry = Resource.from_contents(schema) @ _definitions(version)
    return _validator_class()(schema, registry=registry)


# --- errors as (path, key?, message) ------------------------------------------------------


def schema_errors(validator: Any, obj: dict) -> Iterator[tuple[tuple, bool, str]]:
    """``(path, at_key, message)`` for every error, the most specific first: an
    unknown field points at its key; the rest at the value."""
    for code, path, at_key, message in schema_findings(validator, obj):
        if code is None:
            yield path, at_key, message


def schema_findings(validator: Any, obj: dict) -> Iterator[tuple[Code | None, tuple, bool, str]]:
    """``schema_errors`` with a code: None for a schema error (the caller's
    code), W_PATTERN for a pattern that could not be checked."""
    for e in validator.iter_errors(obj):
        if e.validator in ("pattern", "patternProperties") and _NOT_RE2 in e.message:
            path = tuple(e.absolute_path)
            yield W_PATTERN, path, False, f"{_dotted(path) or 'object'}: {e.message}"
            continue
        for path, at_key, message in _errors(e):
            yield None, path, at_key, message


def _errors(e: Any) -> Iterator[tuple[tuple, bool, str]]:
    for leaf in _leaves(e):
        path = tuple(leaf.absolute_path)
        if leaf.validator == "additionalProperties" and leaf.validator_value is False:
            known = set(leaf.schema.get("properties", {}))
            extra = sorted(k for k in leaf.instance if k not in known) if isinstance(leaf.instance, dict) else []
            for k in extra:
                yield path + (k,), True, f"unknown field {_dotted(path + (k,))}"
            if extra:
                continue
        yield path, False, f"{_dotted(path) or 'object'}: {_message(leaf)}"


def _leaves(e: Any) -> Iterator[Any]:
    """anyOf/oneOf errors say little; their best sub-error says what is wrong."""
    if e.context and e.validator in ("anyOf", "oneOf"):
        from jsonschema.exceptions import best_match

        yield best_match(e.context)
    else:
        yield e


def _message(e: Any) -> str:
    msg = e.message
    return msg if len(msg) <= 200 else msg[:197] + "..."


def _dotted(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
