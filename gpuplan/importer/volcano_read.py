"""Volcano in the cluster's objects: ``queueing: {engine: volcano}``, the tenants' ``queueing``
and the queued tiers' grants, from ``scheduling.volcano.sh/v1beta1`` Queues (docs/volcano.md).

A Volcano Queue holds per resource name a ``deserved`` (what it reclaims from borrowers), a
``capability`` (the hard ceiling) and a ``guarantee.resource`` (reserved: never lent). gpuplan
writes a leaf ``gpuplan-<tenant>.<pool>`` per tenant and pool (``affinity.nodeGroupAffinity``
= the pool's node group) under ``gpuplan-<tenant>``, under ``gpuplan.<cohort>`` or ``root``
(:mod:`gpuplan.queueing.volcano.queues`). Read back, per leaf and resource:

- the grant = ``deserved`` (split over the tenant's namespaces labelled for the pool's queued
  tiers, as :func:`gpuplan.importer.kueue.assign` splits a ClusterQueue's nominal quota);
- ``lendingLimit`` = ``deserved - guarantee`` where a guarantee is set;
- ``borrowingLimit`` = ``capability - deserved`` where the capability is below what the
  queue could reach with the cohort idle (the ledger's potential: ``gpuplan.queues.potentials``),
  or where the leaf deserves nothing (a tier the tenant only borrows);
- the tenant's ``cohort``: the nearest ancestor that is neither ``root`` nor the tenant's own
  queue (``gpuplan.<cohort>`` loses its prefix).

A hand-made shape reads the same way: a queue per team (the tenant: the queue's
``gpuplan.dev/tenant`` label, a tenant of that name, or the namespaces of the PodGroups that
name it), with or without ``parent``, with or without a node-group affinity (without one, the
pool that advertises the resource). The reading fills the same :class:`gpuplan.importer.kueue.Kueue`
record the Kueue reader does (``engine`` ``volcano``), so grants, limits and the namespaces'
ResourceQuota ceilings follow one path; the ceilings are the leaves' capabilities, which is what a
build writes into ``gpuplan-gpus``.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer.kueue import Kueue, Queue, Row, _diag, _get, _quantity, find_chart
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_dns_label
from gpuplan.queueing.volcano.names import NODE_GROUP_LABEL

_AFFINITY = ("spec", "affinity", "nodeGroupAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
# Queue fields gpuplan never writes (volcano-sh/volcano v1.15.1 staging/src/volcano.sh/apis/pkg/apis/
# scheduling/v1beta1/types.go QueueSpec): a value other than Volcano's default is not imported
_UNWRITTEN = {("spec", "weight"): 1, ("spec", "priority"): None, ("spec", "reclaimable"): True,
              ("spec", "affinity", "nodeGroupAntiAffinity"): None,
              ("spec", "affinity", "nodeGroupAffinity", "preferredDuringSchedulingIgnoredDuringExecution"): None,
              ("spec", "extendClusters"): None, ("spec", "type"): None}


def _resources(o: Obj, *path: str) -> dict[str, Any]:
    got = _get(o.data, *path)
    return got if isinstance(got, dict) else {}


def _group_pools(group: str, pools: list[dict]) -> list[str]:
    """The pools of a Volcano node group: the pool of that name, else those whose nodes (or NodePool
    template) all carry ``volcano.sh/nodegroup-name=<group>``."""
    names = [p["name"] for p in pools]
    if group in names:
        return [group]
    hits = []
    for p in pools:
        have = [n.labels for n in p.get("_nodes", ())]
        if p.get("_nodepool") is not None:
            tmpl = _get(p["_nodepool"].data, "spec", "template", "metadata", "labels")
            have = [tmpl if isinstance(tmpl, dict) else {}]
        if have and all(h.get(NODE_GROUP_LABEL) == group for h in have):
            hits.append(p["name"])
    return hits


def _tenants_of(o: Obj, namespaces: dict[str, Obj], tenant_of: Any, podgroups: dict[str, set[str]]) -> list[str]:
    """The tenants whose jobs a Queue takes: its gpuplan.dev/tenant label; else a tenant of its name
    (gpuplan's ``gpuplan-<tenant>``, or a team's queue named like its namespace or tenant); else the
    tenants of the namespaces whose PodGroups name it."""
    label = o.labels.get(V.TENANT_LABEL)
    known = {tenant_of(n) for n in namespaces}
    if label and is_dns_label(label):
        return [label]
    base = o.name.split(".", 1)[0]
    for cand in (base.removeprefix(V.PRIORITY_CLASS_PREFIX), base):
        if cand in known:
            return [cand]
    return sorted({tenant_of(ns) for ns in podgroups.get(o.name, ())})


def scan(objs: list[Obj], pools: list[dict], namespaces: dict[str, Obj], tenant_of: Any,
         advertisers: Any) -> Kueue | None:
    """The Volcano Queues of the input as the Kueue reader's record; None when there is none
    (Volcano's own ``root`` and ``default`` do not count). ``advertisers``: resource -> the pools
    that advertise it."""
    queues = sorted((o for o in objs if o.api_group == V.VOLCANO_GROUP and o.kind == "Queue" and o.name
                     and o.name not in V.VOLCANO_OWN_QUEUES), key=lambda o: o.name)
    if not queues:
        return None
    k = Kueue({}, [], None, {}, None, None, None, None, [], engine="volcano")
    k.chart = find_chart(objs, V.VOLCANO_CHART, k.diagnostics)
    by_name = {o.name: o for o in queues}
    parent = {o.name: p for o in queues if isinstance(p := _get(o.data, "spec", "parent"), str) and p}
    has_children = set(parent.values())
    podgroups: dict[str, set[str]] = {}
    for o in objs:
        if o.api_group == V.VOLCANO_GROUP and o.kind == "PodGroup" and isinstance(_get(o.data, "spec", "queue"), str):
            podgroups.setdefault(o.data["spec"]["queue"], set()).add(o.namespace)
    tenants_of = {o.name: _tenants_of(o, namespaces, tenant_of, podgroups) for o in queues}
    per_tenant: dict[str, Queue] = {}
    for o in queues:
        for path, default in _UNWRITTEN.items():
            v = _get(o.data, *path)
            if v is not None and v != default and str(v) != str(default):
                k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)}: {'.'.join(path)} "
                                           f"{show(v)} is not imported (gpuplan does not write it)", o, *path))
        if o.name in has_children:
            continue  # a parent: the sum of its children (a tenant's queue or a cohort)
        tenants = tenants_of[o.name]
        if not tenants:
            k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)} serves no imported tenant (no "
                                       f"{V.TENANT_LABEL} label, no tenant of its name, no PodGroup of the input "
                                       "names it); not imported", o, "metadata", "name"))
            continue
        rows = _rows(k, o, pools, advertisers)
        cohort = _cohort(o.name, tenants, parent, by_name, tenants_of, k, o)
        if len(tenants) > 1:
            k.diagnostics.append(_diag(
                C.I_TODO, f"Queue {show(o.name)} takes the PodGroups of tenants {', '.join(map(show, tenants))}: gpuplan "
                "writes a leaf per tenant and pool; the draft splits its deserved evenly and keeps them in one cohort",
                o, "spec", "deserved"))
            cohort = cohort or o.name
        up = by_name.get(parent.get(o.name, ""))
        own = up if up is not None and len(tenants) == 1 and tenants_of.get(up.name) == tenants else o
        for i, tenant in enumerate(tenants):
            q = per_tenant.get(tenant)
            if q is None:
                q = per_tenant[tenant] = Queue(own, tenant, sorted(n for n in namespaces if tenant_of(n) == tenant),
                                               cohort, None, None)
            elif cohort != q.cohort:
                k.diagnostics.append(_diag(C.I_TODO, f"Queue {show(o.name)} of tenant {show(tenant)} hangs under "
                                           f"{show(cohort or 'root')}, another of its queues under "
                                           f"{show(q.cohort or 'root')}; the draft keeps {show(q.cohort or 'root')}",
                                           o, "spec", "parent"))
            for r in rows:
                share = r.nominal // len(tenants) + (1 if i < r.nominal % len(tenants) else 0)
                q.rows.append(Row(r.pool, r.resource, share, r.borrowing if len(tenants) == 1 else None,
                                  r.lending if len(tenants) == 1 else None))
    k.queues = [per_tenant[t] for t in sorted(per_tenant)]
    _borrowing(k)
    return k


def _cohort(name: str, tenants: list[str], parent: dict[str, str], by_name: dict[str, Obj],
            tenants_of: dict[str, list[str]], k: Kueue, o: Obj) -> str | None:
    """The tenant's cohort: the nearest ancestor of a leaf that is not ``root`` and not the tenant's
    own queue (gpuplan's ``gpuplan.<cohort>`` without its prefix); None under ``root``."""
    seen = {name}
    up = parent.get(name)
    while up and up not in V.VOLCANO_OWN_QUEUES and up not in seen:
        seen.add(up)
        if up in by_name and len(tenants) == 1 and tenants_of.get(up) == tenants:
            up = parent.get(up)  # the tenant's own queue (gpuplan-<tenant>): the sum of its leaves
            continue
        cohort = up.removeprefix("gpuplan.") if up.startswith("gpuplan.") else up
        above = parent.get(up)
        if above and above not in V.VOLCANO_OWN_QUEUES:
            k.diagnostics.append(_diag(C.I_TODO, f"Queue {show(up)} hangs under {show(above)}, not root: gpuplan "
                                       f"writes one level of cohorts; the draft names cohort {show(cohort)} only",
                                       by_name.get(up, o), "spec", "parent"))
        if not is_dns_label(cohort):
            k.diagnostics.append(_diag(C.W_BAD_NAME, f"Queue {show(up)}: {show(cohort)} is not a DNS-1123 label, "
                                       "so it cannot name a cohort; left out", by_name.get(up, o), "metadata", "name"))
            return None
        return cohort
    return None


def _rows(k: Kueue, o: Obj, pools: list[dict], advertisers: Any) -> list[Row]:
    """A leaf's (pool, resource) rows: deserved, capability (kept in ``borrowing`` until
    :func:`_borrowing` turns it into a limit) and lending (deserved - guarantee)."""
    deserved = _resources(o, "spec", "deserved")
    capability = _resources(o, "spec", "capability")
    guarantee = _resources(o, "spec", "guarantee", "resource")
    groups = _get(o.data, *_AFFINITY)
    here: list[str] | None = None
    if groups is not None:
        groups = [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else []
        here = [p for g in groups for p in _group_pools(g, pools)]
        if not here:
            k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)}: its nodeGroupAffinity "
                                       f"{show(', '.join(groups))} names no imported pool's node group (no pool of "
                                       f"that name, no pool whose nodes all carry {NODE_GROUP_LABEL}); not imported",
                                       o, *_AFFINITY))
            return []
    rows: list[Row] = []
    other: list[tuple[str, str]] = []
    for name in sorted(set(deserved) | set(capability)):
        at = ("spec", "deserved" if name in deserved else "capability", name)
        raws = [deserved.get(name, 0), capability.get(name), guarantee.get(name, 0)]
        qty = [_quantity(v) if v is not None else None for v in raws]
        if any(v is not None and q is None for v, q in zip(raws, qty)):
            k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)}: {show(name)} is not a Kubernetes "
                                       "quantity; left out", o, *at))
            continue
        nominal, cap, kept = qty
        if not nominal and not cap:
            continue  # gpuplan lists every GPU name of the fleet, 0 where the tenant holds none
        if not str(name).startswith("nvidia.com/") and not advertisers(name):
            other.append((str(name), str(raws[0] if name in deserved else raws[1])))
            continue
        adv = list(advertisers(name))
        cands = [p for p in (here if here is not None else adv) if p in adv]
        if not cands:
            k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)}: no imported pool"
                                       f"{' of its node groups' if here is not None else ''} advertises {show(name)}; "
                                       "not imported", o, *at))
            continue
        if len(cands) > 1:
            k.diagnostics.append(_diag(C.I_TODO, f"Queue {show(o.name)}: {show(name)} is advertised by pools "
                                       f"{', '.join(cands)}; the draft puts its deserved {show(raws[0])} on {cands[0]}: "
                                       "split it between leaves per pool", o, *at))
        if any(q is not None and q.denominator != 1 for q in qty):
            k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(o.name)}: {show(name)} is not a whole "
                                       "number of units; left out", o, *at))
            continue
        nominal = int(nominal or 0)
        lending = nominal - int(kept) if kept else None
        rows.append(Row(cands[0], str(name), nominal, int(cap) if cap is not None else None,
                        max(0, lending) if lending is not None else None))
        k.read.setdefault(o.name, []).append((cands[0], str(name), raws[0], at))
        if (cands[0], str(name)) not in k.pairs:
            k.pairs.append((cands[0], str(name)))
    if other:
        k.diagnostics.append(_diag(
            C.W_VOLCANO_UNREAD, f"Queue {show(o.name)} also holds jobs to {', '.join(f'{n}: {v}' for n, v in other)}: "
            "gpuplan's queues cover the tiers' GPU resources only, so Volcano would no longer limit these (the round "
            "trip lists it)", o, "spec"))
    return rows


def _borrowing(k: Kueue) -> None:
    """A row's capability -> its borrowingLimit: none where the capability is what the queue reaches
    with the cohort idle (the ledger's potential without a limit), else capability - deserved; a leaf
    that deserves nothing keeps its capability as the limit (gpuplan writes it only for a tier the
    tenant borrows)."""
    from gpuplan.queues import FlavorQuota, QueuePlan, potentials

    plans = [QueuePlan(q.tenant, tuple(q.namespaces), q.cohort or "", 1, "",
                       tuple(FlavorQuota(r.pool, r.resource, ("_",), r.nominal, None, r.lending) for r in q.rows))
             for q in k.queues]
    for q, qp in zip(k.queues, potentials(plans)):
        for r, fq in zip(q.rows, qp.quotas):
            cap, r.borrowing = r.borrowing, None
            if cap is None:
                continue
            caps = k.capabilities.setdefault(q.tenant, {})
            caps[(r.pool, r.resource)] = caps.get((r.pool, r.resource), 0) + max(cap, r.nominal)
            if cap < r.nominal:
                k.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, f"Queue {show(q.obj.name)}: capability {cap} of "
                                           f"{r.resource} is below its deserved {r.nominal}; the draft borrows nothing "
                                           "there (gpuplan's ceiling is never below the grant)", q.obj, "spec",
                                           "capability"))
                r.borrowing = 0
            elif cap < fq.potential or not r.nominal:
                r.borrowing = cap - r.nominal


def ceilings(k: Kueue) -> None:
    """After :func:`gpuplan.importer.kueue.assign`: the namespaces' ResourceQuota ceilings are the
    leaves' capabilities where they set one (a build writes the same number, the ledger's potential,
    into gpuplan-gpus and the leaf's capability); the potential ``assign`` computed elsewhere."""
    for tenant, caps in k.capabilities.items():
        ceil = k.ceilings.setdefault(tenant, {})
        for key, cap in caps.items():
            ceil[key] = cap


def queueing_spec(k: Kueue, draft: Any) -> tuple[dict, dict[tuple, Any]]:
    """(spec.queueing, [source, todo] notes by sub-path) of a Volcano cluster."""
    q: dict[str, Any] = {"engine": "volcano"}
    notes: dict[tuple, Any] = {("engine",): [f"from the {V.VOLCANO_GROUP} Queues", None]}
    vin: dict[str, Any] = {}
    if k.chart is not None and k.chart.version:
        vin["chartVersion"] = k.chart.version
        notes[("volcano", "chartVersion")] = [f"from {k.chart.obj.kind} {k.chart.obj.name}", None]
        if k.chart.namespace and k.chart.namespace != V.VOLCANO_NAMESPACE:
            vin["namespace"] = k.chart.namespace
    q["volcano"] = vin
    if "chartVersion" not in vin:
        notes[("volcano",)] = [None, "no Argo CD Application or Flux HelmRelease of the volcano chart in the input: "
                               "set chartVersion (gpuplan's default otherwise) and namespace"]
    q["tiers"] = list(k.queued_tiers)
    notes[("tiers",)] = ["the tiers on the Queues' node groups and resources",
                         "tiers with workload training or batch (or gang) are queued by default: the list can go"]
    draft.note(("spec", "queueing"), None, "gang (nodesPerJob) of a tier lives on the jobs (PodGroup minMember), "
               "not in the Queues: add it to the tiers whose jobs span nodes")
    return q, notes
