"""GP683: the ResourceClaimTemplates gpuplan emits tie several MIG devices of one
claim to one GPU (``matchAttribute: gpu.nvidia.com/parentUUID``); without it the
scheduler allocates them from any GPUs of the node (docs/dra.md). Check-objects
stage: reads the templates lowering handed on.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.dra.claims import PARENT_UUID, any_dra, tier_claims
from gpuplan.resolve import ResolvedFleet

E_NO_PARENT = Code(
    "GP683", "multi-slice claim without the parent-GPU constraint", Severity.ERROR,
    "A ResourceClaim that asks for several MIG devices gets them from any GPUs of the node unless a "
    "`matchAttribute: gpu.nvidia.com/parentUUID` constraint ties them to one GPU. gpuplan writes the "
    "constraint on every such ResourceClaimTemplate; this rule checks the templates it emits.",
    bad="devices: {requests: [{name: gpus, exactly: {deviceClassName: gpuplan-infer, count: 2}}]}",
    good="devices:\n  requests: [...]\n  constraints: [{requests: [gpus], matchAttribute: gpu.nvidia.com/parentUUID}]",
)

CODES = (E_NO_PARENT,)


def needed(rf: ResolvedFleet) -> bool:
    return any_dra(rf)


def check_templates(templates: list[dict], mig_classes: frozenset[str]) -> list[str]:
    """``namespace/name`` of every ResourceClaimTemplate that asks for several
    devices of a MIG DeviceClass (``mig_classes``) without the parentUUID constraint."""
    bad = []
    for t in templates:
        devices = t["spec"]["spec"]["devices"]
        tied = {r for c in devices.get("constraints", ()) if c.get("matchAttribute") == PARENT_UUID
                for r in c.get("requests", ())}
        for req in devices["requests"]:
            ex = req.get("exactly", {})
            if ex.get("count", 1) > 1 and req["name"] not in tied and ex.get("deviceClassName") in mig_classes:
                bad.append(f"{t['metadata'].get('namespace')}/{t['metadata']['name']}")
    return bad


def check(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    """The ResourceClaimTemplates lowering emitted, namespace by namespace."""
    mig = frozenset({"mig.nvidia.com", *(c.class_name for c in tier_claims(rf) if c.device_type == "mig")})
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        if d.get("kind") == "ResourceClaimTemplate":
            by_ns.setdefault(d["metadata"].get("namespace", ""), []).append(d)
    for ti, tenant in enumerate(rf.fleet.spec.tenants):
        for ns in tenant.namespaces:
            for name in check_templates(by_ns.get(ns, []), mig):
                yield rf.diag(E_NO_PARENT, f"ResourceClaimTemplate {name} asks for several MIG devices "
                              "without matchAttribute gpu.nvidia.com/parentUUID",
                              ("spec", "tenants", ti, "quotas", ns))
