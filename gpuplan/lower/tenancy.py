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
from gpuplan.lower.common import engine, object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.spec.models import Tenant, Tier
from gpuplan.units import class_scoped
from gpuplan.identity import FLUX_CLASSES_DIR, PRIORITY_CLASSES_PATH, classes_app_name
from gpuplan.identity import OTHER_PRIORITIES_QUOTA, QUOTA_NAME, priority_class_name, kept_gpu_resources, quota_key, tier_namespace_label

SCHEDULING_API = "scheduling.k8s.io/v1"
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"


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


def _ceilings(rf: ResolvedFleet, tenant: Tenant) -> dict[tuple[str, str], int]:
    """(pool, resource) -> the most Kueue may admit for the tenant's queue; empty without one."""
    if rf.fleet.spec.queueing is None:
        return {}
    from gpuplan.queues import namespace_ceilings, queued_tiers

    out = namespace_ceilings(rf, tenant) or {}
    return out if queued_tiers(rf) else {}


def namespace_quotas(rf: ResolvedFleet, tenant: Tenant, ns: str) -> list[dict[str, Any]]:
    """The namespace's quotas. A tier is *held to its class* when it sets ``enforcePriority``
    or Kueue queues it: a ResourceQuota scoped to its PriorityClass holds it (to its grant;
    a queued tier to what Kueue may admit, nominal + borrowable, which only Kueue-held
    workloads reach: the admission policy admits a queued class's pods from them alone),
    and ``gpuplan-other-priorities`` holds every other class to the other tiers' grants.
    So no pod outside Kueue spends a borrow ceiling, and a namespace gets a ceiling only for
    the queued tiers granted to it."""
    from gpuplan.queues import queued_tiers

    from gpuplan.queues import namespace_grants

    grants = _grants(rf, tenant, ns)
    ceilings = _ceilings(rf, tenant)
    queued = set(queued_tiers(rf)) if ceilings else set()
    allowed = namespace_grants(rf).get(ns, frozenset())
    listed = {t.name for t, _, _ in grants}
    for name in sorted(allowed & queued - listed, key=lambda n: rf.tier_index[n]):
        tier = rf.tier_by_name[name]  # a tier the namespace's queue may borrow, granted no units
        grants.append((tier, rf.tier_resource(tier), 0))
    held: list[tuple[Tier, str, int]] = []  # (tier, resource, what its class quota allows)
    # names a change dropped stay at 0 until retired (identity.kept_gpu_resources)
    totals = {r: 0 for r in (*rf.gpu_resources, *kept_gpu_resources(rf))}
    flavors: set[tuple[str, str]] = set()
    for tier, res, units in grants:
        if tier.name in queued and tier.name in allowed and (tier.pool, res) in ceilings:
            held.append((tier, res, ceilings[(tier.pool, res)]))
            if (tier.pool, res) not in flavors:  # tiers on one flavor share its ceiling
                flavors.add((tier.pool, res))
                totals[res] = totals.get(res, 0) + ceilings[(tier.pool, res)]
            continue
        totals[res] = totals.get(res, 0) + units
        if class_scoped(rf, tier):
            held.append((tier, res, units))
    ann = object_annotations(rf, "ResourceQuota")
    extra = {TENANT_LABEL: tenant.name}
    from gpuplan.lower.dra import quota_hard as dra_quota_hard

    hard = {**_hard(totals), **dra_quota_hard(rf, tenant, ns)}
    # the namespace's GPU quota is never pruned: a namespace that leaves the spec (kept, lower/common.py
    # PROTECTED_KINDS) keeps its last quota, so no step of the sync that revokes its grants (the bindings,
    # wave 1) leaves its pods uncharged (docs/transitions.md "The tenancy boundary at every step")
    kept = object_annotations(rf, "ResourceQuota", protected=True)
    out = [obj("v1", "ResourceQuota", metadata(rf, QUOTA_NAME, namespace=ns, extra_labels=extra, annotations=kept),
               spec={"hard": dict(sorted(hard.items()))})]
    if not held:
        return out
    for tier, res, units in held:
        meta = metadata(rf, f"gpuplan-tier-{tier.name}", namespace=ns,
                        extra_labels={**extra, TIER_LABEL: tier.name}, annotations=ann)
        out.append(obj("v1", "ResourceQuota", meta, spec={
            "hard": {quota_key(res): str(units)},
            "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": [priority_class_name(tier)]},
            ]},
        }))
    held_names = {t.name for t, _, _ in held}
    others: dict[str, int] = {res: 0 for _, res, _ in held}
    for tier, res, units in grants:
        if tier.name not in held_names and res in others:
            others[res] += units
    pcs: list[str] = []
    for tier, _, _ in held:
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
    from gpuplan.queues import namespace_grants

    labels: dict[str, str] = {TENANT_LABEL: tenant.name}
    for tier in sorted(namespace_grants(rf).get(ns, ()), key=lambda n: rf.tier_index[n]):
        labels[tier_namespace_label(tier)] = "true"
    # Pod Security admission (built in, on since 1.25): baseline refuses privileged
    # containers, hostPath and host namespaces, each of which reaches every GPU of a node
    labels[POD_SECURITY_LABEL] = tenant.pod_security
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
        # a class exists only while its rules do (a pod of a missing class is refused): Argo CD
        # syncs it in the last wave (lower/common.py WAVES), Flux in a Kustomization that
        # dependsOn the root, whose one apply would otherwise create it first (fluxcd/pkg
        # ssa v0.76.1 manager_apply.go:390-401: kinds named *Class before every other object)
        flux = engine(rf) == "flux"
        yield Artifact(
            path=f"{FLUX_CLASSES_DIR}/priorityclasses.yaml" if flux else PRIORITY_CLASSES_PATH,
            documents=tuple(priority_class(rf, t) for t in first.values()),
            kustomize=not flux,
            description=f"PriorityClasses, one per tier ({len(first)})"
                        + (f" (synced by Flux Kustomization {classes_app_name(rf)}, after the tenancy objects)" if flux else ""),
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
