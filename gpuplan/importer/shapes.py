"""The shapes of the fields `gpuplan import` reads, checked before any stage
reads them.

The export is hostile input: a hand-edited file, or objects tenants wrote.
Every object of a kind the importer reads is checked against the shape below
(``SHAPES``: the fields infer, kueue and the round trip read, with the types the
Kubernetes API gives them). An object with a field of another type is left
out with one GP962 naming its kind, namespace/name, the field and the file
position; the stages after this one may then index what they read without a
type check. Fields the importer does not read are not checked (the round trip
compares them as plain data), except a Deployment's containers: one is read
only as the GPU Operator's, and only one the API server could have returned
counts. A null is an absent field, as the API server
treats it, except in a list (the API never writes a null item) and where a
value is required (``apiVersion``, ``kind``, ``metadata``, ``metadata.name``).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.diagnostics import Diagnostic, show


@dataclass(frozen=True)
class Req:
    """A field that must be present (and not null)."""

    shape: Any


@dataclass(frozen=True)
class MapOf:
    """A mapping of any keys whose values have ``shape`` (null values allowed: absent)."""

    shape: Any


@dataclass(frozen=True)
class ListOf:
    """A list whose every item has ``shape`` (no null items)."""

    shape: Any


@dataclass(frozen=True)
class Scalar:
    types: tuple[type, ...]
    name: str


STR = Scalar((str,), "a string")
INT = Scalar((int,), "an integer")
BOOL = Scalar((bool,), "a boolean")
INT_OR_STR = Scalar((int, str), "an integer or a string")
QUANTITY = Scalar((int, float, str), "a quantity (a string or a number)")
ANY_MAP = MapOf(None)  # a mapping, its values unchecked

# --------------------------------------------------------------------------- the shapes

BASE = {
    "apiVersion": Req(STR),
    "kind": Req(STR),
    "metadata": Req({"name": Req(STR), "namespace": STR, "labels": MapOf(STR), "annotations": MapOf(STR)}),
}
_TAINT = {"key": STR, "value": STR, "effect": STR}
_REQUIREMENT = {"key": STR, "operator": STR, "values": ListOf(STR)}
_CONFIG_REF = {"name": STR, "default": STR}
_ARGO_SOURCE = {"repoURL": STR, "chart": STR, "targetRevision": STR, "ref": STR,
                "helm": {"valueFiles": ListOf(STR)}}
_RESOURCES = {"limits": MapOf(QUANTITY), "requests": MapOf(QUANTITY)}
_CONTAINER = {"name": STR, "image": STR, "resources": _RESOURCES}
_SELECTOR_TERMS = ListOf({"tags": MapOf(STR), "alias": STR})

# (API group, kind) -> the fields of the object beside BASE
SHAPES: dict[tuple[str, str], dict] = {
    ("", "Node"): {"spec": {"taints": ListOf(_TAINT)}, "status": {"nodeInfo": {"kubeletVersion": STR}}},
    ("", "ConfigMap"): {"data": MapOf(STR)},
    ("", "Namespace"): {},
    ("", "ResourceQuota"): {"spec": {
        "hard": MapOf(QUANTITY), "scopes": ListOf(STR),
        "scopeSelector": {"matchExpressions": ListOf({"scopeName": STR, "operator": STR, "values": ListOf(STR)})}}},
    # only the GPU Operator's is read (its namespace), and only one the API server could have returned counts
    ("apps", "Deployment"): {"spec": {"template": {"spec": {"containers": ListOf(_CONTAINER)}}}},
    ("scheduling.k8s.io", "PriorityClass"): {"value": INT, "preemptionPolicy": STR, "description": STR,
                                             "globalDefault": BOOL},
    ("nvidia.com", "ClusterPolicy"): {
        "spec": {"mig": {"strategy": STR}, "devicePlugin": {"config": _CONFIG_REF},
                 "migManager": {"config": _CONFIG_REF}, "driver": {"enabled": BOOL, "version": STR},
                 "toolkit": {"enabled": BOOL}, "dcgmExporter": {"enabled": BOOL}},
        "status": {"namespace": STR}},
    ("karpenter.sh", "NodePool"): {"spec": {
        "template": {"metadata": {"labels": MapOf(STR)},
                     "spec": {"requirements": ListOf(_REQUIREMENT), "taints": ListOf(_TAINT),
                              "nodeClassRef": {"name": STR}, "expireAfter": STR, "terminationGracePeriod": STR}},
        "limits": MapOf(QUANTITY), "disruption": {"consolidateAfter": STR}, "weight": INT}},
    ("karpenter.sh", "NodeOverlay"): {"spec": {"capacity": MapOf(QUANTITY), "requirements": ListOf(_REQUIREMENT)}},
    ("karpenter.k8s.aws", "EC2NodeClass"): {"spec": {
        "role": STR, "amiSelectorTerms": _SELECTOR_TERMS, "subnetSelectorTerms": _SELECTOR_TERMS,
        "securityGroupSelectorTerms": _SELECTOR_TERMS}},
    ("resource.k8s.io", "DeviceClass"): {"spec": {"extendedResourceName": STR}},
    ("resource.k8s.io", "ResourceClaimTemplate"): {},
    ("argoproj.io", "Application"): {"spec": {"source": _ARGO_SOURCE, "sources": ListOf(_ARGO_SOURCE),
                                              "destination": {"namespace": STR}}},
    ("helm.toolkit.fluxcd.io", "HelmRelease"): {"spec": {"chart": {"spec": {"chart": STR, "version": STR}},
                                                         "targetNamespace": STR}},
    ("kueue.x-k8s.io", "ResourceFlavor"): {"spec": {"nodeLabels": MapOf(STR)}},
    ("kueue.x-k8s.io", "Cohort"): {"spec": {"parentName": STR}},
    ("kueue.x-k8s.io", "LocalQueue"): {"spec": {"clusterQueue": STR}},
    ("kueue.x-k8s.io", "ClusterQueue"): {"spec": {
        "namespaceSelector": {"matchLabels": MapOf(STR)}, "cohortName": STR, "fairSharing": {"weight": QUANTITY},
        "preemption": {"withinClusterQueue": STR},
        "resourceGroups": ListOf({"flavors": ListOf({"name": STR, "resources": ListOf({
            "name": STR, "nominalQuota": QUANTITY, "borrowingLimit": QUANTITY, "lendingLimit": QUANTITY})})})}},
    ("kueue.x-k8s.io", "Topology"): {"spec": {"levels": ListOf({"nodeLabel": STR})}},
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): {},
}
# kinds matched by name alone somewhere (a Namespace, a ResourceQuota of any group): BASE at least
BASE_KINDS = {kind for _, kind in SHAPES}


_ABSENT = type("_Absent", (), {})()


def type_name(v: Any) -> str:
    if v is _ABSENT:
        return "missing"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "a mapping"
    return type(v).__name__


def mismatch(v: Any, shape: Any, path: tuple = ()) -> tuple[tuple, str, Any] | None:
    """(path, what was expected, the value) of the first field of ``v`` that
    does not have ``shape``; None when all do. ``v`` None is an absent field."""
    if shape is None or v is None:
        return None
    if isinstance(shape, Req):
        return mismatch(v, shape.shape, path)
    if isinstance(shape, Scalar):
        if isinstance(v, bool) and bool not in shape.types:
            return path, shape.name, v
        return None if isinstance(v, shape.types) else (path, shape.name, v)
    if isinstance(shape, ListOf):
        if not isinstance(v, list):
            return path, "a list", v
        for i, item in enumerate(v):
            if item is None:
                return path + (i,), "a value (not null)", item
            found = mismatch(item, shape.shape, path + (i,))
            if found:
                return found
        return None
    if not isinstance(v, dict):
        return path, "a mapping", v
    if isinstance(shape, MapOf):
        for k, item in v.items():
            found = mismatch(item, shape.shape, path + (k,))
            if found:
                return found
        return None
    for k, sub in shape.items():
        item = v.get(k)
        if item is None and isinstance(sub, Req):
            return path + (k,), sub.shape.name if isinstance(sub.shape, Scalar) else "a mapping", \
                item if k in v else _ABSENT
        found = mismatch(item, sub, path + (k,))
        if found:
            return found
    return None


def dotted(path: tuple) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p.replace("_", "a").replace("-", "a").isalnum():
            out += f".{p}"
        else:
            out += f"[{p}]"
    return out.lstrip(".")


def _kubectl(o: Any) -> str:
    resource = o.kind.lower() + (f".{o.api_group}" if o.api_group else "")
    return " ".join(["kubectl get", show(resource)] + ([show(o.name)] if o.name else []) +
                    ([f"-n {show(o.namespace)}"] if o.namespace else []) + ["-o json"])


def check(objs: list) -> tuple[list, list[Diagnostic]]:
    """(the objects whose read fields have their types, a GP962 for each other
    object of a kind the importer reads)."""
    from gpuplan.importer import codes as C

    kept: list = []
    diags: list[Diagnostic] = []
    for o in objs:
        shape = SHAPES.get((o.api_group, o.kind))
        if shape is None and o.kind not in BASE_KINDS:
            kept.append(o)
            continue
        found = mismatch(o.data, BASE) or (mismatch(o.data, shape) if shape else None)
        if found is None:
            kept.append(o)
            continue
        path, want, got = found
        f, line, col = o.at(*path)
        ns = o.namespace
        who = f"{o.kind} {show(ns) + '/' if ns else ''}{show(o.name) if o.name else '(no name)'}"
        diags.append(C.W_UNREAD.diag(
            f"{who}: {show(dotted(path))} is " + ("missing" if got is _ABSENT else f"{type_name(got)}, not {want}")
            + "; object left out",
            file=f, line=line, col=col, path=show(dotted(path)),
            hint=f"export it as the API server returns it: {_kubectl(o)} ({show(dotted(path))} is {want} there)"))
    return kept, diags
