"""What changes for the jobs of a cluster's ClusterQueue that gpuplan does not write as it is.

gpuplan writes one ClusterQueue per tenant (``gpuplan-<tenant>``), so a cluster's queue under
another name, or one shared by several tenants, is removed and others are added: the round trip
lists that, and this module says what the new queues do differently (quota per pool and resource,
limits, cohort, preemption, queueing strategy, fields gpuplan does not write), each at the line
of the cluster's object.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.importer import conventions as V
from gpuplan.importer.kueue import Kueue, _get, _quantity
from gpuplan.importer.read import Obj

# Kueue's defaults for the fields compared (sigs.k8s.io/kueue@v0.19.2
# apis/kueue/v1beta2/clusterqueue_types.go): queueingStrategy BestEffortFIFO (:105-107),
# stopPolicy None (:142-144), flavorFungibility whenCanBorrow MayStopSearch and whenCanPreempt
# TryNextFlavor (:465, :477), preemption reclaimWithinCohort Never (:535), borrowWithinCohort.policy
# Never (:582-585), withinClusterQueue Never (:557-560). A value left out is the default.
_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("queueingStrategy",): "BestEffortFIFO",
    ("preemption", "withinClusterQueue"): "Never",
    ("preemption", "reclaimWithinCohort"): "Never",
    ("preemption", "borrowWithinCohort", "policy"): "Never",
    ("preemption", "borrowWithinCohort", "maxPriorityThreshold"): None,
    ("fairSharing", "weight"): None,
    ("stopPolicy",): "None",
    ("flavorFungibility", "whenCanBorrow"): "MayStopSearch",
    ("flavorFungibility", "whenCanPreempt"): "TryNextFlavor",
}
# fields gpuplan never writes: any value the cluster sets is listed
_UNWRITTEN = ("admissionChecks", "admissionChecksStrategy", "admissionScope")


def _value(spec: dict, path: tuple[str, ...]) -> Any:
    v = _get(spec, *path)
    if v is None:
        return _DEFAULTS.get(path)
    return str(_quantity(v)) if path == ("fairSharing", "weight") and _quantity(v) is not None else v


def _amount(v: Any) -> Any:
    q = _quantity(v) if v is not None else None
    return None if q is None else (int(q) if q.denominator == 1 else q)


def _add(total: list[Any], row: Any) -> None:
    for i, key in enumerate(("nominalQuota", "borrowingLimit", "lendingLimit")):
        v = _amount(_get(row, key))
        if v is not None:
            total[i] = (total[i] or 0) + v


def _quota(spec: dict, flavor_pool: dict[str, str], pool: str, res: str) -> list[Any] | None:
    """[nominal, borrowingLimit, lendingLimit] of ``res`` over the flavors of ``pool`` (a pool's
    capacity-type flavors add up; a limit is None when no flavor sets one); None when no flavor of
    the pool lists ``res``."""
    total: list[Any] | None = None
    for g in _get(spec, "resourceGroups") or ():
        for fl in _get(g, "flavors") or ():
            for r in _get(fl, "resources") or () if flavor_pool.get(_get(fl, "name")) == pool else ():
                if _get(r, "name") == res:
                    total = total or [0, None, None]
                    _add(total, r)
    return total


def _show(v: Any) -> str:
    return "none" if v is None else str(v)


def _per(now: list[tuple[str, Any]]) -> str:
    """Values by the queues that have them: ``Any (gpuplan-a, gpuplan-b), Never (gpuplan-c)``."""
    by: dict[str, list[str]] = {}
    for n, v in now:
        by.setdefault(_show(v), []).append(n)
    return ", ".join(f"{v} ({', '.join(ns)})" for v, ns in by.items())


def queue_changes(k: Kueue, o: Obj, built: list[dict]) -> list[tuple[str, tuple]]:
    """(text, path in ``o``) for each way the ClusterQueues gpuplan builds for the tenants of the
    cluster's ClusterQueue ``o`` (removed: gpuplan does not write it) admit jobs differently.
    ``built``: the ClusterQueues and ResourceFlavors gpuplan builds."""
    mine = [q for q in k.queues if q.obj.name == o.name]
    if not mine:
        return []
    flavor_pool = {_get(d, "metadata", "name"): _get(d, "spec", "nodeLabels", V.POOL_LABEL)
                   for d in built if d.get("kind") == "ResourceFlavor"}
    by_tenant = {_get(d, "metadata", "labels", V.TENANT_LABEL): d for d in built if d.get("kind") == "ClusterQueue"}
    ours = [(by_tenant[q.tenant]["metadata"]["name"], by_tenant[q.tenant].get("spec") or {})
            for q in mine if q.tenant in by_tenant]
    spec = o.data.get("spec") if isinstance(o.data.get("spec"), dict) else {}
    names = ", ".join(n for n, _ in ours) or "no ClusterQueue"
    out: list[tuple[str, tuple]] = []

    # quota: per pool and resource, the cluster's rows (as read onto pools) against gpuplan's queues
    theirs: dict[tuple[str, str], list[Any]] = {}
    for pool, res, raw, at in k.read.get(o.name, ()):
        each = [(n, _quota(s, flavor_pool, pool, res)) for n, s in ours] if pool is not None else []
        if not any(q is not None for _, q in each):
            why = "the draft does not carry it" if res.startswith(V.GPU.split("/")[0] + "/") else \
                "gpuplan's queues hold the tiers' GPU quota only, with quotaCheckStrategy IgnoreUndeclared"
            out.append((f"{res}: {raw} is no longer held by Kueue ({why}): jobs of its namespaces are not limited "
                        "on it", at))
            continue
        _add(theirs.setdefault((pool, res), [0, None, None, at]), _get(o.data, *at))
    for (pool, res), (nominal, borrowing, lending, at) in theirs.items():
        each = [(n, _quota(s, flavor_pool, pool, res) or [0, None, None]) for n, s in ours]
        if len(ours) > 1:
            # a queue's jobs use its nominal quota, and more only by borrowing the unused quota of
            # queues in its cohort (sigs.k8s.io/kueue@v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go:78-91,
            # :320-330), which a lender with reclaimWithinCohort takes back by preemption (:520-537)
            cohort = next((s.get("cohortName") for _, s in ours if s.get("cohortName")), None)
            reclaim = sorted({_value(s, ("preemption", "reclaimWithinCohort")) for _, s in ours} - {"Never"})
            out.append((f"one queue of {nominal} {res} on pool {pool} shared by tenants "
                        f"{', '.join(q.tenant for q in mine)} becomes {len(ours)} queues "
                        f"({', '.join(f'{n} {q[0]}' for n, q in each)}): where any of them could use all {nominal}, "
                        "a tenant's jobs now fit its own nominal quota and get more only by borrowing what the others "
                        f"leave idle in cohort {_show(cohort)}"
                        + (f", which they take back by preemption (reclaimWithinCohort {'/'.join(reclaim)})"
                           if reclaim else ""), at))
        elif sum(q[0] for _, q in each) != nominal:
            out.append((f"{res} on pool {pool}: nominalQuota {nominal} -> {sum(q[0] for _, q in each)} ({names})", at))
        for i, (key, was) in enumerate((("borrowingLimit", borrowing), ("lendingLimit", lending)), start=1):
            if any(str(q[i]) != str(was) for _, q in each):
                out.append((f"{res} on pool {pool}: {key} {_show(was)} -> {_per([(n, q[i]) for n, q in each])}", at))

    # the rest of the spec: cohort, preemption, queueing strategy, fair sharing, what gpuplan does not write
    theirs_cohort = spec.get("cohortName") or None
    now = [(n, s.get("cohortName") or None) for n, s in ours]
    if any(v != theirs_cohort for _, v in now):
        why = ": its quota is now lent to the cohort's other queues while idle, and its jobs borrow theirs" \
            if theirs_cohort is None else ""
        out.append((f"spec.cohortName {_show(theirs_cohort)} -> {_per(now)}{why}",
                    ("spec", "cohortName") if theirs_cohort else ("spec",)))
    for path in _DEFAULTS:
        was = _value(spec, path)
        now = [(n, _value(s, path)) for n, s in ours]
        if any(str(v) != str(was) for _, v in now):
            out.append((f"spec.{'.'.join(path)} {_show(was)} -> {_per(now)}",
                        ("spec", *path) if _get(spec, *path) is not None else ("spec",)))
    for key in _UNWRITTEN:
        if spec.get(key) and not any(s.get(key) for _, s in ours):
            out.append((f"spec.{key} removed: gpuplan does not write it", ("spec", key)))
    return out

