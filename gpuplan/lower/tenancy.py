"""Tenancy: PriorityClasses per tier, Namespaces and ResourceQuotas per tenant.

PriorityClass (``scheduling.k8s.io/v1``): one per tier, named
``gpuplan-<tier>`` — a *stable* name, because pods, Deployments, Jobs and
scoped quotas refer to it by name. ``value`` and ``preemptionPolicy`` are
immutable, so the object carries the GitOps engine's replace marker (Argo CD
``Force=true,Replace=true``, Flux ``force: enabled``): a changed priority
deletes and recreates the class under the same name. Running pods keep the
integer priority they were admitted with; new pods get the new value.
(A value-suffixed name would never get stuck either, but would break every
workload that names the old class the moment GitOps prunes it.)

ResourceQuota (``v1``): per namespace, only ``requests.<resource>`` keys
(``limits.`` on extended resources is accepted by the API server and never
enforced), quantities as strings:

- ``gpuplan-gpus``: every GPU resource the fleet advertises, with the sum of
  the namespace's tier units on it and ``"0"`` for resources it was not
  granted (a namespace gpuplan manages gets no GPU it was not given). Tiers on
  the same resource add up: a quota counts a resource name, not a pool;
- for tiers with ``enforcePriority: true``: ``gpuplan-tier-<tier>``, scoped to
  the tier's PriorityClass (``scopeSelector`` PriorityClass In), and one
  ``gpuplan-other-priorities`` (PriorityClass NotIn the enforced classes) that
  holds pods of any other class to the units of the non-enforced tiers, so the
  enforced tiers' units can only be spent by pods of their class.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import TENANT_LABEL, TIER_LABEL
from gpuplan.lower.common import object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.spec.models import Tenant, Tier
from gpuplan.identity import OTHER_PRIORITIES_QUOTA, QUOTA_NAME, priority_class_name, quota_key, tier_namespace_label

SCHEDULING_API = "scheduling.k8s.io/v1"


# --- PriorityClasses ---------------------------------------------------------------


def _tier_description(rf: ResolvedFleet, tier: Tier) -> str:
    if tier.description is not None:
        return tier.description
    res = rf.tier_resource(tier) or "GPUs"
    return f"gpuplan tier {tier.name}: {res} on pool {tier.pool}"


def priority_class(rf: ResolvedFleet, tier: Tier) -> dict[str, Any]:
    meta = metadata(rf, priority_class_name(tier), extra_labels={TIER_LABEL: tier.name},
                    annotations=object_annotations(rf, "PriorityClass", recreate=True))
    return obj(
        SCHEDULING_API, "PriorityClass", meta,
        value=tier.priority,
        globalDefault=False,
        preemptionPolicy=tier.preemption,
        description=_tier_description(rf, tier),
    )


# --- quotas --------------------------------------------------------------------------


def _grants(rf: ResolvedFleet, tenant: Tenant, ns: str) -> list[tuple[Tier, str, int]]:
    """(tier, resource, units) the namespace is granted, in spec order of its quotas."""
    out = []
    for tier_name, units in tenant.quotas.get(ns, {}).items():
        tier = rf.tier_by_name.get(tier_name)
        if tier is None:
            continue  # rules report unknown tiers
        res = rf.tier_resource(tier)
        if res is None:
            continue  # rules report tiers without a resource
        out.append((tier, res, units))
    return out


def _hard(totals: dict[str, int]) -> dict[str, str]:
    return {quota_key(r): str(totals[r]) for r in sorted(totals)}


def _queued_grants(rf: ResolvedFleet, tenant: Tenant, ns: str) -> tuple[list[tuple[Tier, str, int]], dict[str, int]] | None:
    """With Kueue (docs/kueue.md), a queued tier's quota is its ClusterQueue's, shared by
    every namespace of the tenant and able to borrow: the namespace's ResourceQuota allows
    what Kueue may admit (nominal + borrowable), so it never refuses a pod Kueue admitted.
    Returns (grants with those ceilings, totals per resource), or None without a queue."""
    from gpuplan.queues import namespace_ceilings

    ceilings = namespace_ceilings(rf, tenant)
    if ceilings is None:
        return None
    grants = []
    totals = {r: 0 for r in rf.gpu_resources}
    shared: set[tuple[str, str]] = set()  # non-enforced tiers on one flavor share its ceiling once
    for tier, res, units in _grants(rf, tenant, ns):
        if (tier.pool, res) in ceilings:
            units = ceilings[(tier.pool, res)]
            if not tier.enforce_priority:
                units = 0 if (tier.pool, res) in shared else units
                shared.add((tier.pool, res))
        else:
            totals[res] = totals.get(res, 0) + units
        grants.append((tier, res, units))
    for (_, res), units in ceilings.items():
        totals[res] = totals.get(res, 0) + units
    return grants, totals


def namespace_quotas(rf: ResolvedFleet, tenant: Tenant, ns: str) -> list[dict[str, Any]]:
    grants = _grants(rf, tenant, ns)
    totals = {r: 0 for r in rf.gpu_resources}
    for _, res, units in grants:
        totals[res] = totals.get(res, 0) + units
    queued = _queued_grants(rf, tenant, ns) if rf.fleet.spec.queueing is not None else None
    if queued is not None:
        grants, totals = queued
    ann = object_annotations(rf, "ResourceQuota")
    extra = {TENANT_LABEL: tenant.name}
    from gpuplan.lower.dra import quota_hard as dra_quota_hard

    hard = {**_hard(totals), **dra_quota_hard(rf, tenant, ns)}
    out = [obj("v1", "ResourceQuota", metadata(rf, QUOTA_NAME, namespace=ns, extra_labels=extra, annotations=ann),
               spec={"hard": dict(sorted(hard.items()))})]
    enforced = [(t, r, u) for t, r, u in grants if t.enforce_priority]
    if not enforced:
        return out
    for tier, res, units in enforced:
        meta = metadata(rf, f"gpuplan-tier-{tier.name}", namespace=ns,
                        extra_labels={**extra, TIER_LABEL: tier.name}, annotations=ann)
        out.append(obj("v1", "ResourceQuota", meta, spec={
            "hard": {quota_key(res): str(units)},
            "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": [priority_class_name(tier)]},
            ]},
        }))
    others: dict[str, int] = {}
    for _, res, _ in enforced:
        others[res] = 0
    for tier, res, units in grants:
        if not tier.enforce_priority and res in others:
            others[res] += units
    pcs: list[str] = []
    for tier, _, _ in enforced:
        if priority_class_name(tier) not in pcs:
            pcs.append(priority_class_name(tier))
    meta = metadata(rf, OTHER_PRIORITIES_QUOTA, namespace=ns, extra_labels=extra, annotations=ann)
    out.append(obj("v1", "ResourceQuota", meta, spec={
        "hard": _hard(others),
        "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "NotIn", "values": pcs},
        ]},
    }))
    return out


# --- namespaces ------------------------------------------------------------------------


def namespace(rf: ResolvedFleet, tenant: Tenant, ns: str) -> dict[str, Any]:
    labels: dict[str, str] = {TENANT_LABEL: tenant.name}
    for tier, _, units in _grants(rf, tenant, ns):
        if units > 0:
            labels[tier_namespace_label(tier.name)] = "true"
    for key in sorted(tenant.labels):
        if key not in labels and not key.startswith("app.kubernetes.io/"):
            labels[key] = tenant.labels[key]
    meta = metadata(rf, ns, extra_labels=labels, annotations=object_annotations(rf, "Namespace"))
    return obj("v1", "Namespace", meta)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    tiers = rf.fleet.spec.tiers
    if tiers:
        # tiers that adopt one class share it (GP524 checks they agree on its value)
        first = {}
        for t in tiers:
            first.setdefault(priority_class_name(t), t)
        yield Artifact(
            path="cluster/priorityclasses.yaml",
            documents=tuple(priority_class(rf, t) for t in first.values()),
            description=f"PriorityClasses, one per tier ({len(first)})",
        )
    for tenant in rf.fleet.spec.tenants:  # one tenant's files at a time: a large fleet's objects never all live at once
        yield Artifact(
            path=f"tenants/{tenant.name}/namespaces.yaml",
            documents=tuple(namespace(rf, tenant, ns) for ns in tenant.namespaces),
            description=f"Namespaces of tenant {tenant.name}",
        )
        yield Artifact(
            path=f"tenants/{tenant.name}/resourcequotas.yaml",
            documents=tuple(q for ns in tenant.namespaces for q in namespace_quotas(rf, tenant, ns)),
            description=f"ResourceQuotas (requests.* only) of tenant {tenant.name}",
        )
