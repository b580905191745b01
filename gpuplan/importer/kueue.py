"""Kueue and chart delivery in the cluster's objects: what ``spec.queueing``,
the tenants' ``queueing`` and the queued tiers' grants were.

With Kueue a queued tier's quota is its tenant's ClusterQueue (nominalQuota
per flavor and resource); the namespaces' ResourceQuotas only hold the
ceiling Kueue may admit (docs/kueue.md). So grants of queued tiers come from
the ClusterQueues, and the ceilings (Kueue's potentialAvailable, computed by
``gpuplan.queues`` as a build does) are taken out of the ResourceQuotas
before the unqueued grants are read from them.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer.read import Obj, yaml_payload

_INT = re.compile(r"[0-9]{1,9}\Z")


def _get(d: Any, *path: Any) -> Any:
    for p in path:
        if isinstance(d, dict):
            d = d.get(p)
        elif isinstance(d, list) and isinstance(p, int) and 0 <= p < len(d):
            d = d[p]
        else:
            return None
    return d


def _units(v: Any) -> int | None:
    text = str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else ""
    return int(text) if _INT.match(text) else None


def _quantity(v: Any) -> Any:
    """A nominalQuota as Kubernetes reads it (``512Gi``, ``"500m"``, ``1k``), or None."""
    from gpuplan.k8squantity import parse

    return parse(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else None


# ------------------------------------------------------------------------ chart delivery


@dataclass
class Chart:
    """A Helm chart as Argo CD or Flux delivers it."""

    obj: Obj
    version: str | None
    namespace: str | None
    values_file: str | None = None  # Argo CD: the `$values/...` file
    repo: tuple[str, str | None] | None = None  # Argo CD: the `ref: values` source (repoURL, revision)


# Where the GitOps engines' own objects live: Argo CD reconciles Applications in its
# control-plane namespace only, unless `application.namespaces` lists more
# (argoproj/argo-cd@v3.5.1 controller/appcontroller.go, isAppNamespaceAllowed); Flux's
# helm-controller runs in flux-system by default. An Application or HelmRelease elsewhere is a
# tenant's to write, never the fleet's configuration.
_ENGINE_HOMES = {"Application": ("argocd", ("argocd-application-controller",)),
                 "HelmRelease": ("flux-system", ("helm-controller",))}


def engine_namespace(objs: list[Obj], kind: str) -> str:
    """The namespace of the controller that reconciles ``kind`` (its workload in the export),
    else the engine's default."""
    default, names = _ENGINE_HOMES[kind]
    spaces = sorted({o.namespace for o in objs if o.api_group == "apps" and o.kind in ("Deployment", "StatefulSet")
                     and o.name in names and isinstance(o.namespace, str)})
    return spaces[0] if len(spaces) == 1 else default


def find_chart(objs: list[Obj], chart: str, diagnostics: list | None = None) -> Chart | None:
    """The Argo CD Application or Flux HelmRelease that installs ``chart``
    (by chart name, or an OCI repoURL ending in it), the first by name, from the
    engine's own namespace only (:func:`engine_namespace`); one elsewhere is a GP965
    in ``diagnostics``."""
    found = []
    homes = {kind: engine_namespace(objs, kind) for kind in _ENGINE_HOMES}
    for o in objs:
        if o.kind in homes and o.namespace != homes[o.kind] and o.api_group in ("argoproj.io", "helm.toolkit.fluxcd.io"):
            if diagnostics is not None and _installs(o, chart):
                diagnostics.append(_diag(C.W_NOT_TRUSTED, f"{o.kind} {show(o.namespace + '/' + o.name)} installs "
                                         f"{chart} outside {homes[o.kind]}, where its engine reads them: not "
                                         "configuration", o, "metadata", "namespace"))
            continue
        spec = o.data.get("spec") if isinstance(o.data.get("spec"), dict) else {}
        if o.kind == "Application" and o.api_group == "argoproj.io":
            sources = spec.get("sources") if isinstance(spec.get("sources"), list) else [spec.get("source")]
            sources = [s for s in sources if isinstance(s, dict)]
            for s in sources:
                url = s.get("repoURL") if isinstance(s.get("repoURL"), str) else ""
                if s.get("chart") == chart or url.rstrip("/").endswith("/" + chart):
                    files = _get(s, "helm", "valueFiles")
                    vf = files[0] if isinstance(files, list) and files and isinstance(files[0], str) else None
                    ref = next((r for r in sources if r.get("ref") == "values" and isinstance(r.get("repoURL"), str)),
                               None)
                    ns = _get(spec, "destination", "namespace")
                    rev = s.get("targetRevision")
                    found.append(Chart(o, rev if isinstance(rev, str) else None, ns if isinstance(ns, str) else None,
                                       vf, (ref["repoURL"], ref.get("targetRevision") if isinstance(
                                           ref.get("targetRevision"), str) else None) if ref else None))
        elif o.kind == "HelmRelease" and o.api_group == "helm.toolkit.fluxcd.io":
            if _get(spec, "chart", "spec", "chart") == chart:
                v, ns = _get(spec, "chart", "spec", "version"), spec.get("targetNamespace")
                found.append(Chart(o, v if isinstance(v, str) else None, ns if isinstance(ns, str) else None))
    return sorted(found, key=lambda c: (c.obj.namespace, c.obj.name))[0] if found else None


def _installs(o: Obj, chart: str) -> bool:
    spec = o.data.get("spec") if isinstance(o.data.get("spec"), dict) else {}
    if o.kind == "HelmRelease":
        return _get(spec, "chart", "spec", "chart") == chart
    sources = spec.get("sources") if isinstance(spec.get("sources"), list) else [spec.get("source")]
    return any(isinstance(s, dict) and (s.get("chart") == chart or (isinstance(s.get("repoURL"), str) and
               s["repoURL"].rstrip("/").endswith("/" + chart))) for s in sources)


def gitops_from(charts: list[Chart | None], values_path: dict[str, str]) -> tuple[dict, str] | None:
    """(spec.cluster.gitops, source) from a gpuplan chart Application: its
    ``ref: values`` source is the fleet's repository and its values file is
    ``$values/<path>/<values_path>``."""
    for c in charts:
        if c is None or c.repo is None or c.values_file is None:
            continue
        want = values_path.get(c.obj.name.rsplit("-", 1)[-1], "")
        vf = c.values_file
        if not (vf.startswith("$values/") and want and vf.endswith("/" + want)):
            continue
        path = vf[len("$values/"):-len("/" + want)]
        g: dict[str, Any] = {"engine": "argocd", "repoURL": c.repo[0]}
        if c.repo[1] and c.repo[1] != "main":
            g["revision"] = c.repo[1]
        if path and path != "generated":
            g["path"] = path
        return g, f"from Application {c.obj.namespace}/{c.obj.name} (its values source and file)"
    return None


# --------------------------------------------------------------------------------- Kueue


@dataclass
class Row:
    pool: str
    resource: str
    nominal: int
    borrowing: int | None
    lending: int | None
    capacity: str | None = None  # the flavor's karpenter.sh/capacity-type (a pool split by capacity type)


@dataclass
class Queue:
    obj: Obj
    tenant: str
    namespaces: list[str]
    cohort: str | None
    weight: int | None  # None: no fairSharing on the queue
    preemption: str | None
    rows: list[Row] = field(default_factory=list)


@dataclass
class Kueue:
    flavors: dict[str, str]  # ResourceFlavor -> pool
    queues: list[Queue]
    root: str | None  # the cohort every queue (or child cohort) joins
    children: dict[str, str]  # child Cohort -> parent
    topology: list[str] | None
    config: dict | None  # the manager Configuration
    config_obj: Obj | None
    chart: Chart | None
    pairs: list[tuple[str, str]]  # queued (pool, resource), in the queues' order
    diagnostics: list = field(default_factory=list)
    # filled by assign(): tenant -> ((pool, resource) -> potential); ns -> tier -> units; tenant limits
    ceilings: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    grants: dict[str, dict[str, int]] = field(default_factory=dict)
    limits: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    queued_tiers: list[str] = field(default_factory=list)
    capacity: dict[str, str] = field(default_factory=dict)  # ResourceFlavor -> its capacity type, if any
    pinned: set[str] = field(default_factory=set)  # tiers seen only on a guaranteed capacity-type flavor
    # ClusterQueue -> each quota row as read: (pool, or None where it is not imported; resource; the
    # nominalQuota as written; its path in the ClusterQueue), for the round trip (importer.kueue_compare)
    read: dict[str, list[tuple[str | None, str, Any, tuple]]] = field(default_factory=dict)
    # the queueing engine whose objects these are: "kueue", or "volcano" (gpuplan.importer.volcano_read
    # fills the same record from Volcano Queues); Volcano: tenant -> (pool, resource) -> capability
    engine: str = "kueue"
    capabilities: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)

    def tenant_of(self, ns: str) -> Queue | None:
        return next((q for q in self.queues if ns in q.namespaces), None)


def _diag(code: Any, message: str, o: Obj | None, *sub: Any) -> Any:
    if o is None:
        return code.diag(message)
    f, line, col = o.at(*sub)
    return code.diag(message, file=f, line=line, col=col)


# a ResourceFlavor with no nodeLabels (Kueue's "default-flavor") puts no node selector on the pods it
# admits (sigs.k8s.io/kueue@v0.19.2 pkg/podset/podset.go:58,87 FromAssignment: the flavor's nodeLabels
# are the only selector it adds; pkg/scheduler/flavorassigner/flavorassigner.go:1247-1248 checks a
# flavor against the pod's selector and affinity through its nodeLabels alone): it stands for every node
ANY_NODE = "*"


def _flavor_pool(o: Obj, pools: list[dict]) -> str | None:
    """The pool a ResourceFlavor selects: gpuplan's pool label, else the one pool
    whose nodes (or NodePool template) carry all of its nodeLabels; :data:`ANY_NODE` for a
    flavor without nodeLabels (its quota's resource then says the pool)."""
    labels = _get(o.data, "spec", "nodeLabels")
    if labels is None or labels == {}:
        return ANY_NODE
    if not isinstance(labels, dict):
        return None
    names = {p["name"] for p in pools}
    if labels.get(V.POOL_LABEL) in names:
        return labels[V.POOL_LABEL]
    hits = []
    for p in pools:
        have = [n.labels for n in p.get("_nodes", ())]
        if p.get("_nodepool") is not None:
            have = [{k: v for k, v in (_get(p["_nodepool"].data, "spec", "template", "metadata", "labels") or {}).items()
                     if isinstance(v, str)}]
        if have and all(all(h.get(k) == v for k, v in labels.items()) for h in have):
            hits.append(p["name"])
    return hits[0] if len(hits) == 1 else None


def _rows(k: Kueue, o: Obj, spec: dict, advertisers: Any) -> list[Row]:
    """A ClusterQueue's quota rows on the flavors of imported pools. A GPU quota is a whole number
    of units; a quota on a resource no pool advertises (cpu, memory, ...) is named, not imported:
    gpuplan's queues cover the tiers' GPU resources, so Kueue no longer holds jobs to it."""
    rows: list[Row] = []
    other: list[tuple[str, str, tuple]] = []
    seen = k.read.setdefault(o.name, [])
    for gi, g in enumerate(spec.get("resourceGroups") if isinstance(spec.get("resourceGroups"), list) else ()):
        for fi, fl in enumerate(_get(g, "flavors") or ()):
            pool = k.flavors.get(_get(fl, "name"))
            if pool is None:  # a flavor of no imported pool (GP963 on the ResourceFlavor)
                seen += [(None, str(_get(r, "name")), _get(r, "nominalQuota"),
                          ("spec", "resourceGroups", gi, "flavors", fi, "resources", ri))
                         for ri, r in enumerate(_get(fl, "resources") or ())]
                continue
            for ri, r in enumerate(_get(fl, "resources") or ()):
                at = ("spec", "resourceGroups", gi, "flavors", fi, "resources", ri)
                name, raw = _get(r, "name"), _get(r, "nominalQuota")
                qty = _quantity(raw)
                seen.append((None, name if isinstance(name, str) else str(name), raw, at))
                if not isinstance(name, str) or qty is None:
                    k.diagnostics.append(_diag(C.W_KUEUE_UNREAD, f"ClusterQueue {show(o.name)}: quota {show(raw)} of "
                                               f"flavor {show(_get(fl, 'name'))} is not a Kubernetes quantity; left "
                                               "out", o, *at))
                    continue
                here = pool
                if pool == ANY_NODE:
                    found = list(advertisers(name)) if advertisers is not None else []
                    if not found:
                        other.append((name, str(raw), at))
                        continue
                    here = found[0]
                    if len(found) > 1:
                        k.diagnostics.append(_diag(
                            C.I_TODO, f"ClusterQueue {show(o.name)}: flavor {show(_get(fl, 'name'))} has no "
                            f"nodeLabels, and {name} is advertised by pools {', '.join(found)}; the draft puts its "
                            f"{raw} on {here}: split it between the pools' flavors", o, *at))
                elif not name.startswith("nvidia.com/") and not (advertisers and advertisers(name)):
                    other.append((name, str(raw), at))
                    continue
                if qty.denominator != 1:
                    k.diagnostics.append(_diag(C.W_KUEUE_UNREAD, f"ClusterQueue {show(o.name)}: quota {show(raw)} of "
                                               f"{name} is not a whole number of units; left out", o, *at))
                    continue
                b, ln = _get(r, "borrowingLimit"), _get(r, "lendingLimit")
                rows.append(Row(here, name, int(qty), _units(b) if b is not None else None,
                                _units(ln) if ln is not None else None, k.capacity.get(_get(fl, "name"))))
                seen[-1] = (here, name, raw, at)
                if (here, name) not in k.pairs:
                    k.pairs.append((here, name))
    if other:
        k.diagnostics.append(_diag(
            C.W_KUEUE_UNREAD, f"ClusterQueue {show(o.name)} also holds jobs to "
            f"{', '.join(f'{n}: {v}' for n, v, _ in other)}: gpuplan's queues cover the tiers' GPU resources only, so "
            "Kueue would no longer limit these (the round trip lists it); keep them with ResourceQuotas, or leave "
            "this ClusterQueue out of gpuplan", o, *other[0][2]))
    return rows


def scan(objs: list[Obj], pools: list[dict], namespaces: dict[str, Obj], tenant_of: Any,
         advertisers: Any = None) -> Kueue | None:
    """The Kueue objects of the input; None when there is no ClusterQueue. ``advertisers``:
    resource -> the names of the pools that advertise it (for flavors without nodeLabels)."""
    group = [o for o in objs if o.api_group == V.KUEUE_GROUP]
    cqs = sorted((o for o in group if o.kind == "ClusterQueue"), key=lambda o: o.name)
    if not cqs:
        return None
    k = Kueue({}, [], None, {}, None, None, None, None, [])
    k.chart = find_chart(objs, V.KUEUE_CHART, k.diagnostics)
    for o in sorted((o for o in group if o.kind == "ResourceFlavor"), key=lambda o: o.name):
        pool = _flavor_pool(o, pools)
        if pool is None:
            k.diagnostics.append(_diag(C.W_KUEUE_UNREAD, f"ResourceFlavor {show(o.name)}: its nodeLabels select no "
                                       "one imported pool; its quotas are not imported", o, "spec", "nodeLabels"))
        else:
            k.flavors[o.name] = pool
            ctype = (_get(o.data, "spec", "nodeLabels") or {}).get(V.KARPENTER_CAPACITY_TYPE)
            if isinstance(ctype, str):  # gpuplan's flavor per capacity type (gpuplan.queues.flavor_types)
                k.capacity[o.name] = ctype
    for o in sorted((o for o in group if o.kind == "Cohort"), key=lambda o: o.name):
        parent = _get(o.data, "spec", "parentName")
        if isinstance(parent, str) and parent:
            k.children[o.name] = parent
        elif k.root is None:
            k.root = o.name
    local: dict[str, list[str]] = {}
    for o in group:
        if o.kind == "LocalQueue" and isinstance(_get(o.data, "spec", "clusterQueue"), str):
            local.setdefault(o.data["spec"]["clusterQueue"], []).append(o.namespace)
    for o in cqs:
        spec = o.data.get("spec") if isinstance(o.data.get("spec"), dict) else {}
        sel = _get(spec, "namespaceSelector", "matchLabels")
        sel = sel if isinstance(sel, dict) else {}
        nss = sorted({n for n, ns in namespaces.items() if sel and all(ns.labels.get(a) == b for a, b in sel.items())}
                     | set(local.get(o.name, ())))
        tenants = sorted({tenant_of(n) for n in nss} | ({sel[V.TENANT_LABEL]} if V.TENANT_LABEL in sel else set()))
        if not tenants:
            k.diagnostics.append(_diag(C.W_KUEUE_UNREAD, f"ClusterQueue {show(o.name)} serves no tenant (no "
                                       "LocalQueue points at it and its namespaceSelector selects no namespace of the "
                                       "input); not imported", o, "spec", "namespaceSelector"))
            continue
        cohort = spec.get("cohortName") if isinstance(spec.get("cohortName"), str) else None
        fs = spec.get("fairSharing")
        weight = _units(fs.get("weight", "1")) if isinstance(fs, dict) else None
        pre = _get(spec, "preemption", "withinClusterQueue")
        rows = _rows(k, o, spec, advertisers)
        if len(tenants) > 1:
            # one ClusterQueue for the teams of several tenants (Kueue's single-ClusterQueue setup):
            # gpuplan writes a queue per tenant, each with a share of the quota, in one cohort
            # so each may still borrow what the others leave idle
            k.diagnostics.append(_diag(
                C.I_TODO, f"ClusterQueue {show(o.name)} is shared by tenants {', '.join(map(show, tenants))}: gpuplan "
                f"writes one ClusterQueue per tenant; the draft splits its quota evenly "
                f"({'; '.join(f'{r.nominal} {r.resource} on pool {r.pool}' for r in rows) or 'no quota'}) and keeps "
                "them in one cohort, where each may borrow what the others leave idle (Kueue admits a job over its "
                "queue's nominal quota only by borrowing: set each tenant's share, and borrowingLimit to bound it)",
                o, "spec", "namespaceSelector"))
        for i, tenant in enumerate(tenants):
            mine = [n for n in nss if tenant_of(n) == tenant]
            q = Queue(o, tenant, mine, cohort, weight, pre if isinstance(pre, str) else None)
            for r in rows:
                share = r.nominal // len(tenants) + (1 if i < r.nominal % len(tenants) else 0)
                q.rows.append(Row(r.pool, r.resource, share, r.borrowing if len(tenants) == 1 else None,
                                  r.lending if len(tenants) == 1 else None, r.capacity))
            k.queues.append(q)
    if k.root is None:
        roots = sorted({q.cohort for q in k.queues if q.cohort and q.cohort not in k.children})
        k.root = roots[0] if roots else None
    topo = sorted((o for o in group if o.kind == "Topology"), key=lambda o: o.name)
    if topo:
        levels = [_get(lv, "nodeLabel") for lv in _get(topo[0].data, "spec", "levels") or ()]
        levels = [lv for lv in levels if isinstance(lv, str)]
        # gpuplan adds the hostname level itself, as the lowest
        k.topology = levels[:-1] if levels and levels[-1] == V.HOSTNAME_LABEL else levels
    ns = k.chart.namespace if k.chart and k.chart.namespace else V.KUEUE_NAMESPACE
    for o in objs:
        if o.kind == "ConfigMap" and not o.api_group and o.name == V.KUEUE_CONFIGMAP and o.namespace == ns:
            cfg = yaml_payload(_get(o.data, "data", V.KUEUE_CONFIG_KEY))
            if isinstance(cfg, dict):
                k.config, k.config_obj = cfg, o
            else:
                k.diagnostics.append(_diag(C.W_UNREAD, f"ConfigMap {show(o.namespace)}/{show(o.name)}: "
                                           f"{V.KUEUE_CONFIG_KEY} is not a Kueue Configuration; left out", o, "data"))
    return k


def _kind(k: Kueue) -> str:
    return "ClusterQueue" if k.engine == "kueue" else "Volcano Queue"


def _unread(k: Kueue) -> Any:
    return C.W_KUEUE_UNREAD if k.engine == "kueue" else C.W_VOLCANO_UNREAD


def assign(k: Kueue, tiers: dict[str, dict], ns_tiers: Any, draft: Any) -> None:
    """Queued tiers, their grants (ClusterQueue nominal quota split over the
    tenant's namespaces labelled for each tier), the tenants' limits and the
    ResourceQuota ceilings Kueue makes."""
    from gpuplan.queues import FlavorQuota, QueuePlan, potentials

    at: dict[tuple[str, str], list[str]] = {}
    for name, t in tiers.items():
        if (t.get("pool"), t.get("_res")) in k.pairs:
            at.setdefault((t["pool"], t["_res"]), []).append(name)
            k.queued_tiers.append(name)
    # on a pool split by capacity type, a row's tiers are those of its type: a tier alone on a
    # guaranteed row with quota is pinned (must not be interrupted), alone on a spot row preemptible
    def alone(q: Queue, r: Row) -> set[str]:
        return {tn for ns in q.namespaces for tn in at.get((r.pool, r.resource), []) if tn in ns_tiers(ns)}

    spot_tiers: set[str] = set()
    for q in k.queues:
        for r in q.rows:
            one = alone(q, r) if r.capacity is not None else set()
            if len(one) == 1 and r.capacity == "spot":
                spot_tiers |= one
            elif len(one) == 1 and r.nominal:
                k.pinned |= one
    k.pinned -= spot_tiers
    plans = []
    for q in k.queues:
        lim: dict[str, dict[str, int]] = {}
        fqs = []
        for r in q.rows:
            here = at.get((r.pool, r.resource), [])
            if r.capacity is not None:
                mine = [tn for tn in here if (tn in k.pinned) == (r.capacity != "spot")]
                here = mine or here
            if not here:
                draft.diagnostics.append(_diag(_unread(k), f"{_kind(k)} {q.obj.name}: no tier hands out "
                                               f"{r.resource} on pool {r.pool}; that quota is not imported", q.obj,
                                               "spec", "resourceGroups"))
                continue
            cands = [(ns, tn) for ns in q.namespaces for tn in here if tn in ns_tiers(ns)]
            if not cands and r.nominal:
                cands = [(q.namespaces[0], here[0])] if q.namespaces else []
            if len(cands) > 1:
                draft.diagnostics.append(_diag(
                    C.I_TODO, f"{_kind(k)} {q.obj.name}: {r.nominal} {r.resource} on pool {r.pool} are shared by "
                    f"{', '.join(f'{ns}/{tn}' for ns, tn in cands)}; the draft splits them evenly", q.obj,
                    "spec", "resourceGroups"))
            for i, (ns, tn) in enumerate(cands):
                share = r.nominal // len(cands) + (1 if i < r.nominal % len(cands) else 0)
                if not share:
                    continue  # a tier the queue may only borrow: labelled on the namespace, granted nothing
                g = k.grants.setdefault(ns, {})
                g[tn] = g.get(tn, 0) + share
            owner = next((tn for _, tn in cands), here[0])  # a limit names one tier of the flavor
            for key, v in (("borrowingLimit", r.borrowing), ("lendingLimit", r.lending)):
                if v is not None:
                    lim.setdefault(key, {})[owner] = v
            fqs.append(FlavorQuota(r.pool, r.resource, tuple(here), r.nominal, r.borrowing, r.lending,
                                   capacity_type=r.capacity))
        k.limits[q.tenant] = lim
        plans.append(QueuePlan(q.tenant, tuple(q.namespaces), q.cohort or "", q.weight or 1, q.preemption or "",
                               tuple(fqs)))
    # the same potentialAvailable a build writes into the ResourceQuotas
    for qp in potentials(plans):
        ceil: dict[tuple[str, str], int] = {}
        for fq in qp.quotas:  # a pool's capacity-type flavors add up (gpuplan.queues.namespace_ceilings)
            ceil[(fq.pool, fq.resource)] = ceil.get((fq.pool, fq.resource), 0) + fq.potential
        k.ceilings[qp.tenant] = ceil


def queueing_spec(k: Kueue, fleet_name: str, draft: Any) -> tuple[dict, dict[tuple, Any]]:
    """(spec.queueing, [source, todo] notes by sub-path)."""
    from gpuplan.spec.models import KUEUE_INTEGRATIONS

    def Note(source: str | None, todo: str | None = None) -> list:  # noqa: N802 - (source, todo), as infer.Note
        return [source, todo]

    q: dict[str, Any] = {}
    notes: dict[tuple, Any] = {}
    kin: dict[str, Any] = {}
    if k.chart is not None and k.chart.version:
        kin["chartVersion"] = k.chart.version
        notes[("kueue", "chartVersion")] = Note(f"from {k.chart.obj.kind} {k.chart.obj.name}")
        if k.chart.namespace and k.chart.namespace != V.KUEUE_NAMESPACE:
            kin["namespace"] = k.chart.namespace
    q["kueue"] = kin
    if "chartVersion" not in kin:
        notes[("kueue",)] = Note(None, "no Argo CD Application or Flux HelmRelease of the kueue chart in the input: "
                                 "set chartVersion (gpuplan's default otherwise) and namespace")
    q["tiers"] = list(k.queued_tiers)
    notes[("tiers",)] = Note("the tiers on the ClusterQueues' flavors and resources",
                             "tiers with workload training or batch (or gang) are queued by default: the list can go")
    if k.root and k.root != f"gpuplan-{fleet_name}":
        q["cohort"] = k.root
        notes[("cohort",)] = Note("from the ClusterQueues' cohortName")
    fair = any(x.weight is not None for x in k.queues)
    q["fairSharing"] = fair
    notes[("fairSharing",)] = Note("from the ClusterQueues' spec.fairSharing")
    cfg = k.config
    if cfg is None:
        notes[("fairSharing",)][1] = (f"no ConfigMap {V.KUEUE_NAMESPACE}/{V.KUEUE_CONFIGMAP} in the input: "
                                        "gangAdmission and integrations are gpuplan's defaults")
    else:
        src = f"from ConfigMap {k.config_obj.namespace}/{k.config_obj.name}"
        w = _get(cfg, "waitForPodsReady")
        if isinstance(w, dict):
            ga: dict[str, Any] = {}
            if isinstance(w.get("timeout"), str):
                ga["timeout"] = w["timeout"]
            if w.get("blockAdmission") is True:  # false is gpuplan's default
                ga["blockAdmission"] = True
            blc = _get(w, "requeuingStrategy", "backoffLimitCount")
            if isinstance(blc, int) and not isinstance(blc, bool):
                ga["backoffLimitCount"] = blc
            q["gangAdmission"] = ga
            notes[("gangAdmission",)] = Note(src + " waitForPodsReady")
        fw = _get(cfg, "integrations", "frameworks")
        if isinstance(fw, list) and fw:
            known = [f for f in fw if f in KUEUE_INTEGRATIONS]
            if known:
                q["integrations"] = known
            notes[("integrations",)] = Note(src + " integrations.frameworks",
                                            None if len(known) == len(fw) else
                                            "frameworks gpuplan does not know were left out: "
                                            + show([f for f in fw if f not in known]))
    if k.topology:
        q["topologyLevels"] = list(k.topology)
        notes[("topologyLevels",)] = Note("from the Kueue Topology's levels (gpuplan adds kubernetes.io/hostname)")
    draft.note(("spec", "queueing"), None, "gang (nodesPerJob, topologyLevel) of a tier lives on the jobs, not in "
               "the cluster's objects: add it to the tiers whose jobs span nodes")
    return q, notes


def tenant_queueing(k: Kueue, tenant: str) -> tuple[dict | None, str | None]:
    """A tenant's ``queueing`` (None when it has gpuplan's defaults), and its source."""
    q = next((x for x in k.queues if x.tenant == tenant), None)
    if q is None:
        return None, None
    out: dict[str, Any] = {}
    lim = k.limits.get(tenant, {})
    for key in ("borrowingLimit", "lendingLimit"):
        if lim.get(key):
            out[key] = dict(lim[key])
    if q.weight is not None and q.weight != 1:
        out["fairSharingWeight"] = q.weight
    if q.cohort and q.cohort != k.root:
        out["cohort"] = q.cohort
    granted = any(tn in k.queued_tiers for ns in q.namespaces for tn in k.grants.get(ns, {}))
    if not out and granted:
        return None, None
    return out, f"from {_kind(k)} {q.obj.name}"
