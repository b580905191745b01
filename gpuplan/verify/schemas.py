"""Structural validation: pinned strict CRD schemas (jsonschema) and core
Kubernetes kinds (the strict schemas of the PyPI package kubernetes-validate,
for one Kubernetes minor version).

Validators are built once per schema and kept for the process.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

E_NOT_SERVED = Code(
    "GP833", "version or kind not served by the pinned CRD", Severity.ERROR,
    "The object's kind is one gpuplan pins (Karpenter, GPU Operator, NFD, Argo CD, Flux, Kueue), "
    "but the pinned CRD does not serve it at this version: the API server would answer "
    "`no matches for kind`. The message lists the versions the pinned release serves (each is "
    "verified against its own schema; a deprecated one is GP848). (A kind of a pinned group that gpuplan does not pin at all, such as "
    "Karpenter's NodeClaim, is GP834: listed, not verified.)",
    bad="apiVersion: karpenter.sh/v1beta1\nkind: NodePool", good="apiVersion: karpenter.sh/v1\nkind: NodePool",
)
W_DEPRECATED = Code(
    "GP848", "deprecated API version", Severity.WARNING,
    "The pinned release still serves this version, so the object was verified against that "
    "version's own schema and CEL rules, but the CRD marks it `deprecated`: the API server answers "
    "every request at it with the CRD's deprecation warning, and a later release may stop serving "
    "it. The message quotes the warning and names the version gpuplan writes.",
    bad="apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue",
    good="apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue",
)
W_UNKNOWN_KIND = Code(
    "GP834", "kind not verified", Severity.WARNING,
    "No pinned schema knows this apiVersion/kind (a CRD gpuplan does not pin, including kinds of a "
    "pinned group such as Karpenter's NodeClaim or NFD's NodeFeature, or a core kind "
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

E_CORE_VALIDATION = Code(
    "GP846", "object breaks the API server's validation of its kind", Severity.ERROR,
    "A built-in object matches its OpenAPI schema but breaks a rule of the kind's Go validation in the "
    "API server (kubernetes pkg/apis/*/validation): a negative or fractional quota for a counted "
    "resource, a PriorityClass named `system-...` or above 1,000,000,000, a changed PriorityClass "
    "`value` (with --base), a binding with both Deny and Warn, a ConfigMap key with a `/`.",
    bad="apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: system-gpu}\nvalue: 1000",
    good="apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: gpu-high}\nvalue: 1000",
)

CODES = (E_NOT_SERVED, W_DEPRECATED, W_UNKNOWN_KIND, E_CRD_SCHEMA, E_CORE_SCHEMA, E_K8S_VERSION, W_PATTERN, E_CORE_VALIDATION)

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


# --- x-kubernetes-list-type: set and map --------------------------------------------------
#
# apiextensions-apiserver pkg/apiserver/schema/listtype/validation.go,
# ValidateListSetsAndMaps (run by pkg/registry/customresource/validator.go with the
# schema): a `set` holds no element twice, a `map` no two elements with the same
# values of x-kubernetes-list-map-keys (a missing key counts as its own value).
# Elements compare as Go compares them after json.Marshal: 1 and true differ, and
# so do 1 and 1.0 (int64 and float64 once decoded).


def _list_key(x: Any) -> Any:
    if isinstance(x, (dict, list)):
        import json

        return ("json", json.dumps(x, sort_keys=True, separators=(",", ":")))
    return (type(x).__name__, x)


_UNSPECIFIED = ("unspecified",)


def _list_type(validator: Any, list_type: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not isinstance(instance, list) or len(instance) < 2 or list_type not in ("set", "map"):
        return
    if list_type == "map":
        if not all(isinstance(x, dict) or x is None for x in instance):
            return  # validateListMap: "must be an object", which the schema's items type reports too
        names = schema.get("x-kubernetes-list-map-keys") or []
        keys = [tuple((k, _list_key(x[k])) if k in x else (k, _UNSPECIFIED) for k in names) if x else ()
                for x in instance]
    else:
        keys = [_list_key(x) for x in instance]
    seen: dict[Any, int] = {}
    for i, k in enumerate(keys):
        seen[k] = seen.get(k, 0) + 1
        if seen[k] == 2:  # reported once per value, at its second appearance (validateListSet)
            if list_type == "set":
                what = f"Duplicate value: {instance[i]!r}"
            else:
                what = "Duplicate value: " + ", ".join(
                    f"{n}={instance[i][n]!r}" for n in names if isinstance(instance[i], dict) and n in instance[i])
            yield ValidationError(what + f" (x-kubernetes-list-type: {list_type})", path=(i,))


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Core kinds: their list types are merge strategies for server-side apply,
    not uniqueness rules (the Go validation of each kind says what is unique)."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties})


@lru_cache(maxsize=1)
def _crd_validator_class() -> Any:
    from jsonschema import Draft202012Validator, validators

    return validators.extend(Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties,
                                                    "x-kubernetes-list-type": _list_type})


@lru_cache(maxsize=None)
def crd_validator(group: str, kind: str, version: str) -> Any | None:
    from gpuplan.upstream.pins import crd_schema

    schema = crd_schema(group, kind, version)
    return None if schema is None else _crd_validator_class()(schema)


# --- the API server's steps before validation ------------------------------------------
#
# apiextensions-apiserver decodes a custom resource, then (pkg/apiserver/
# customresource_handler.go, unstructuredDefaulter.Default) runs
# structuraldefaulting.PruneNonNullableNullsWithoutDefaults and then
# structuraldefaulting.Default (pkg/apiserver/schema/defaulting/prunenulls.go,
# algorithm.go); the strategy's PrepareForCreate / PrepareForUpdate
# (pkg/registry/customresource/strategy.go) drop or keep the old `status` when the
# version has a status subresource; only then is the object validated (schema,
# list types, CEL: customResourceStrategy.Validate). No pinned schema is
# `nullable`, so every null without a default goes, every null with one is defaulted.


def apply_defaults(schema: dict | None, value: Any) -> Any:
    """``value`` as the API server validates it: nulls pruned where the schema
    has no default for them (PruneNonNullableNullsWithoutDefaults), and
    ``default``s filled in where a field is absent or null (Default). Where
    the schema says nothing (x-kubernetes-preserve-unknown-fields, metadata)
    values are left as they are, as there. ``value`` is changed in place."""
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else None
        if None in value.values():
            for k in [k for k, v in value.items() if v is None]:
                sub = props.get(k, extra if k not in props else None)
                if sub is not None and "default" not in sub:
                    del value[k]  # prunenulls.go: non-nullable, no default
        for name, sub in props.items():
            if "default" in sub and value.get(name) is None:
                value[name] = copy.deepcopy(sub["default"])  # algorithm.go: absent or null
        for k, v in value.items():
            sub = props.get(k, extra if k not in props else None)
            if sub is not None:
                if v is None and "default" in sub:
                    value[k] = v = copy.deepcopy(sub["default"])
                if isinstance(v, (dict, list)):
                    apply_defaults(sub, v)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                if v is None and "default" in items:
                    value[i] = v = copy.deepcopy(items["default"])
                if isinstance(v, (dict, list)):
                    apply_defaults(items, v)
    return value


# Versions whose CRD declares `subresources: {status: {}}` (kubebuilder's
# +kubebuilder:subresource:status on the type). There, create and update through
# the main endpoint ignore `status` (strategy.go PrepareForCreate deletes it,
# PrepareForUpdate keeps the old one), so it is not validated either. Argo CD's
# Application and AppProject have no status subresource: their status is validated.
# Recorded from the pinned CRD files (gpuplan/upstream/sources.json names them);
# the pinned JSON schemas do not carry `subresources`.
STATUS_SUBRESOURCE = frozenset({
    ("karpenter.sh", "NodePool"), ("karpenter.sh", "NodeClaim"), ("karpenter.sh", "NodeOverlay"),
    ("karpenter.k8s.aws", "EC2NodeClass"), ("karpenter.azure.com", "AKSNodeClass"),
    ("containerservice.azure.com", "ManagedClustersAgentPool"),
    ("nvidia.com", "ClusterPolicy"), ("nvidia.com", "NVIDIADriver"),
    ("kustomize.toolkit.fluxcd.io", "Kustomization"), ("helm.toolkit.fluxcd.io", "HelmRelease"),
    ("source.toolkit.fluxcd.io", "HelmRepository"), ("source.toolkit.fluxcd.io", "OCIRepository"),
    ("kueue.x-k8s.io", "ClusterQueue"), ("kueue.x-k8s.io", "LocalQueue"), ("kueue.x-k8s.io", "Cohort"),
    ("monitoring.coreos.com", "ServiceMonitor"), ("monitoring.coreos.com", "PrometheusRule"),
    # Volcano v1.15.1: Queue and Job have one; PodGroup declares `subresources: {}` (its status is validated)
    ("scheduling.volcano.sh", "Queue"), ("batch.volcano.sh", "Job"),
})


def prepare(group: str, kind: str, schema: dict, obj: dict) -> dict:
    """A copy of ``obj`` as the API server validates it on create or update:
    nulls pruned, defaults applied, ``status`` dropped where the version has a
    status subresource."""
    obj = copy.deepcopy(obj)
    if (group, kind) in STATUS_SUBRESOURCE:
        obj.pop("status", None)
    return apply_defaults(schema, obj)


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
