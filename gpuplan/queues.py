"""The Kueue ledger: the tiers' quotas as ClusterQueue quotas, on the capacity report's numbers.

``queue_ledger(rf)`` is a pure function of a resolved fleet with ``spec.queueing``.
It reads the grants from the capacity report (``rf.capacity``), so the ResourceQuotas,
the capacity rules (GP410) and the ClusterQueues count the same units of the same
resource names:

- a *flavor* is a pool (``ResourceFlavor`` ``gpuplan-<pool>``); its resources are the
  resources of the queued tiers on that pool;
- a *ClusterQueue* per tenant that holds quota on a queued tier (or declares
  ``queueing``); ``nominalQuota`` of (flavor, resource) = the sum of the tenant's
  grants on the tiers that hand out that resource on that pool. A queue covers the
  (flavor, resource) pairs of the tiers it was granted (0 units included) or names in
  its borrowing/lending limits, and only those: Kueue lets a ClusterQueue use, and
  borrow, only resources it lists (kueue v0.19.2
  ``pkg/scheduler/flavorassigner/flavorassigner.go:1069-1071``: "resource %s
  unavailable in ClusterQueue");
- per flavor and resource the nominal quotas of all queues add up to exactly the
  tier report's ``pool_resource_quota`` (the number GP410 holds against capacity);
- ``potential``: the most a queue can ever be admitted on (flavor, resource), Kueue's
  ``potentialAvailable`` with no usage (kueue v0.19.2
  ``pkg/cache/scheduler/resource_node.go:64-71,129-141,217-222``): a queue keeps
  ``nominal - lendingLimit`` to itself, puts ``min(nominal, lendingLimit)`` into its
  cohort, and may take from the cohort at most ``nominal + borrowingLimit``.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuplan.provisioning.pools import static_nodes

if TYPE_CHECKING:
    from gpuplan.capacity import CapacityReport
    from gpuplan.resolve import ResolvedFleet
    from gpuplan.spec.models import Tenant, Tier

QUEUED_WORKLOADS = ("training", "batch")


def flavor_name(pool: str, capacity_type: str | None = None) -> str:
    """``gpuplan-<pool>``; on a pool split by capacity type, ``gpuplan-<pool>-<type>``."""
    return f"gpuplan-{pool}" + (f"-{capacity_type}" if capacity_type else "")


def flavor_types(rf: "ResolvedFleet", pool: str) -> tuple[str | None, ...]:
    """The capacity types the pool's flavors stand for, in the order queues try them: on a
    pool that allows spot and a guaranteed type, ``("spot", <guaranteed>)`` - one flavor each,
    whose ``nodeLabels`` add ``karpenter.sh/capacity-type`` -, else ``(None,)``: one flavor."""
    from gpuplan.units import guaranteed_capacity_type

    pv = rf.pool_by_name.get(pool)
    pin = guaranteed_capacity_type(pv) if pv is not None else None
    return ("spot", pin) if pin is not None else (None,)


def tier_capacity(rf: "ResolvedFleet", tier: "Tier") -> str | None:
    """The flavor capacity type that holds the tier's quota: on a split pool the tier's pin
    (``identity.capacity_pin``: tiers that must not be interrupted) or ``spot``; else None."""
    from gpuplan.units import capacity_pin

    types = flavor_types(rf, tier.pool)
    if types == (None,):
        return None
    return capacity_pin(rf, tier) or "spot"


def cluster_queue_name(tenant: str) -> str:
    return f"gpuplan-{tenant}"


@dataclass(frozen=True)
class FlavorQuota:
    """One (flavor, resource) of one ClusterQueue."""

    pool: str
    resource: str
    tiers: tuple[str, ...]  # the tenant's queued tiers behind it (granted, or named in its limits); never empty
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    potential: int = 0  # the most Kueue can admit here, with the cohort idle
    capacity_type: str | None = None  # the flavor's capacity type, on a pool split by capacity type

    @property
    def flavor(self) -> str:
        return flavor_name(self.pool, self.capacity_type)

    @property
    def lendable(self) -> int:
        return self.nominal if self.lending_limit is None else min(self.nominal, self.lending_limit)


@dataclass(frozen=True)
class QueuePlan:
    tenant: str
    namespaces: tuple[str, ...]
    cohort: str  # the cohort the ClusterQueue names (root or the tenant's child cohort)
    weight: int
    preemption: str  # withinClusterQueue
    quotas: tuple[FlavorQuota, ...]

    @property
    def name(self) -> str:
        return cluster_queue_name(self.tenant)

    def quota(self, pool: str, resource: str, capacity_type: str | None = None) -> FlavorQuota | None:
        index = self.__dict__.get("_index")
        if index is None:
            index = {(q.pool, q.resource, q.capacity_type): q for q in self.quotas}
            object.__setattr__(self, "_index", index)
        return index.get((pool, resource, capacity_type))


@dataclass(frozen=True)
class FlavorLedger:
    """One queued (flavor, resource): the cohort's nominal quota against the pool."""

    pool: str
    resource: str
    capacity: int
    max_oversubscription: float
    nominal: int  # sum over every ClusterQueue
    resource_quota: int  # the same number as the ResourceQuotas (capacity report)
    capacity_types: tuple[str | None, ...] = (None,)  # flavor_types: one flavor per type

    @property
    def flavor(self) -> str:
        return " + ".join(flavor_name(self.pool, c) for c in self.capacity_types)


@dataclass(frozen=True)
class QueueLedger:
    cohort: str
    child_cohorts: tuple[str, ...]
    queued_tiers: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]  # queued (pool, resource), in spec order
    queues: tuple[QueuePlan, ...]
    flavors: tuple[FlavorLedger, ...]
    split: tuple[tuple[str, tuple[str, ...]], ...] = ()  # pools with a flavor per capacity type (flavor_types)
    engine: str = "kueue"  # queueing.engine: whose queues these numbers are written into

    def flavor_types(self, pool: str) -> tuple[str | None, ...]:
        return dict(self.split).get(pool, (None,))

    def flavors_of(self) -> list[tuple[str, str | None]]:
        """Every ResourceFlavor: (pool, capacity type), pools in spec order."""
        return [(p, c) for p in self.pools() for c in self.flavor_types(p)]

    def queue(self, tenant: str) -> QueuePlan | None:
        by_tenant = self.__dict__.get("_by_tenant")
        if by_tenant is None:
            by_tenant = {q.tenant: q for q in self.queues}
            object.__setattr__(self, "_by_tenant", by_tenant)
        return by_tenant.get(tenant)

    def pools(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p, _ in self.pairs))

    def resource_groups(self) -> list[tuple[list[str], list[str]]]:
        """The ClusterQueues' resource groups: [(sorted resources, pools in spec order)].
        Kueue: a flavor belongs to one resource group, a resource to one group, and each
        flavor of a group lists every covered resource (CEL on ClusterQueue), so resources
        that share a flavor are joined; a flavor lacking one of them gets 0."""
        cached = self.__dict__.get("_groups")
        if cached is not None:
            return cached
        groups: list[tuple[list[str], list[str]]] = []  # (resources, pools)
        for pool, res in self.pairs:
            hit = [g for g in groups if res in g[0] or pool in g[1]]
            merged = (list(dict.fromkeys(r for g in hit for r in g[0])),
                      list(dict.fromkeys(p for g in hit for p in g[1])))
            for g in hit:
                groups.remove(g)
            if res not in merged[0]:
                merged[0].append(res)
            if pool not in merged[1]:
                merged[1].append(pool)
            groups.append(merged)
        order = {p: i for i, p in enumerate(self.pools())}
        cached = [(sorted(resources), sorted(pools, key=order.__getitem__))
                  for resources, pools in sorted(groups, key=lambda g: min(order[p] for p in g[1]))]
        object.__setattr__(self, "_groups", cached)
        return cached

    def queue_groups(self, qp: QueuePlan) -> list[tuple[list[str], list[tuple[str, str | None]]]]:
        """The resource groups of one queue: the ledger's, with the flavors it covers, as
        (pool, capacity type) in the order Kueue tries them: the ClusterQueue's order
        (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go:1088-1091), spot first."""
        out = []
        for resources, pools in self.resource_groups():
            mine = [(p, c) for p in pools for c in self.flavor_types(p)
                    if any(qp.quota(p, r, c) is not None for r in resources)]
            if mine:
                out.append((resources, mine))
        return out


def queued_tiers(rf: "ResolvedFleet") -> tuple[str, ...]:
    """Tiers whose quota the queueing engine manages, in spec order."""
    q = rf.fleet.spec.queueing
    if q is None:
        return ()
    tiers = rf.fleet.spec.tiers
    if q.tiers is not None:
        chosen = set(q.tiers)
        return tuple(t.name for t in tiers if t.name in chosen)
    return tuple(t.name for t in tiers if t.workload in QUEUED_WORKLOADS or t.gang is not None)


def kueue_on(rf: "ResolvedFleet") -> bool:
    """The fleet queues with Kueue (``queueing.engine: kueue``, the default)."""
    q = rf.fleet.spec.queueing
    return q is not None and q.engine == "kueue"


def cohort_name(rf: "ResolvedFleet") -> str:
    q = rf.fleet.spec.queueing
    assert q is not None
    return q.cohort or f"gpuplan-{rf.fleet.metadata.name}"


def _preemption(tiers: list["Tier"]) -> str:
    """withinClusterQueue from the tiers' PriorityClass preemption. Kueue preempts by the
    workloads' priority (kueue v0.19.2 pkg/scheduler/preemption/preemption.go, candidates of
    ``LowerPriority`` have a strictly lower priority): a ``preemption: Never`` tier that is the
    lowest queued tier of its queue has nobody lower to evict, so the others may preempt it
    (``LowerPriority``); a ``Never`` tier above another tier of the queue would evict it, so
    the queue preempts nothing (``Never``)."""
    if not tiers:
        return "Never"
    lowest = min(t.priority for t in tiers)
    if all(t.preemption == "PreemptLowerPriority" or t.priority == lowest for t in tiers):
        return "LowerPriority"
    return "Never"


def reclaim_within_cohort(ledger: "QueueLedger", rf: "ResolvedFleet", qp: "QueuePlan") -> str:
    """reclaimWithinCohort of a queue: ``Any`` (a tenant always gets its nominal quota back,
    from borrowers of any priority) unless the queue holds a ``preemption: Never`` tier; then
    ``LowerPriority`` when every such tier is the lowest queued priority of the whole cohort
    (it can evict no one), else ``Never``."""
    tiers = {t for q in qp.quotas for t in q.tiers}
    never = [rf.tier_by_name[t] for t in tiers if rf.tier_by_name[t].preemption == "Never"]
    if not never:
        return "Any"
    lowest = min(rf.tier_by_name[t].priority for t in ledger.queued_tiers)
    return "LowerPriority" if all(t.priority == lowest for t in never) else "Never"


def tas_pools(rf: "ResolvedFleet") -> frozenset[str]:
    """Pools whose Kueue flavor is topology-aware: with ``queueing.topologyLevels``, the static
    pools. Kueue's TAS counts capacity only from existing Nodes that carry every level's label
    (kueue v0.19.2 pkg/util/tas/node.go:21-33); a Karpenter pool can be empty and its NodePool
    does not set those labels, so a topology-aware flavor there would never admit a job (and no
    pod would ask Karpenter for a node)."""
    q = rf.fleet.spec.queueing
    if q is None or not q.topology_levels or not kueue_on(rf):
        return frozenset()
    return frozenset(p.name for p in rf.fleet.spec.pools if static_nodes(p))


def _has_queue(tn: "Tenant", queued: set[str]) -> bool:
    if tn.queueing is not None:
        return True
    return any(tier in queued for per_tier in tn.quotas.values() for tier in per_tier)


def potentials(queues: list[QueuePlan]) -> list[QueuePlan]:
    """Kueue's potentialAvailable per queue and (flavor, resource), for a root cohort
    with optional child cohorts (resource_node.go: accumulateFromChild, localQuota)."""
    # the root's subtree quota is every queue's lendable part; a child cohort has no
    # quota or limits of its own, so all of its subtree reaches the root and a queue
    # sees its own local part plus the whole root subtree, wherever it hangs
    root_subtree: dict[tuple[str, str, str | None], int] = {}
    for qp in queues:
        for fq in qp.quotas:
            key = (fq.pool, fq.resource, fq.capacity_type)
            root_subtree[key] = root_subtree.get(key, 0) + fq.lendable
    out = []
    for qp in queues:
        quotas = []
        for fq in qp.quotas:
            avail = fq.nominal - fq.lendable + root_subtree[(fq.pool, fq.resource, fq.capacity_type)]
            if fq.borrowing_limit is not None:
                avail = min(avail, fq.nominal + fq.borrowing_limit)
            quotas.append(FlavorQuota(fq.pool, fq.resource, fq.tiers, fq.nominal, fq.borrowing_limit,
                                      fq.lending_limit, avail, fq.capacity_type))
        out.append(QueuePlan(qp.tenant, qp.namespaces, qp.cohort, qp.weight, qp.preemption, tuple(quotas)))
    return out


def queue_ledger(rf: "ResolvedFleet") -> QueueLedger | None:
    """The ledger of a fleet with ``spec.queueing`` (None without it): part of the
    capacity report, computed once with it."""
    return rf.capacity.queues


def build_ledger(rf: "ResolvedFleet", report: "CapacityReport") -> QueueLedger:
    """The ledger from the capacity report's grants (called by ``gpuplan.capacity.capacity``)."""
    spec = rf.fleet.spec
    root = cohort_name(rf)
    queued = queued_tiers(rf)
    qset = set(queued)
    pairs: list[tuple[str, str]] = []
    tier_pair: dict[str, tuple[str, str]] = {}
    for name in queued:
        t = rf.tier_by_name[name]
        res = rf.tier_resource(t)
        if res is None or t.pool not in rf.pool_by_name:
            continue  # GP401 / reference rules report these
        tier_pair[name] = (t.pool, res)
        if (t.pool, res) not in pairs:
            pairs.append((t.pool, res))

    split = {pool: flavor_types(rf, pool) for pool in dict.fromkeys(p for p, _ in pairs)}
    split = {pool: types for pool, types in split.items() if types != (None,)}
    cap_of = {name: tier_capacity(rf, rf.tier_by_name[name]) for name in tier_pair}
    tiers_at: dict[tuple[str, str], list[str]] = {p: [] for p in pairs}
    for name, p in tier_pair.items():
        tiers_at[p].append(name)
    # the capacity report's grants, by tenant, in tier order
    grants_of: dict[str, list[tuple[str, int]]] = {}
    for tr in report.tiers:
        if tr.name in tier_pair:
            for g in tr.grants:
                grants_of.setdefault(g.tenant, []).append((tr.name, g.units))
    queues: list[QueuePlan] = []
    for tn in spec.tenants:
        if not _has_queue(tn, qset):
            continue
        tq = tn.queueing
        tiers_of: dict[tuple[str, str], list[str]] = {p: [] for p in pairs}
        for tier_name, _ in grants_of.get(tn.name, ()):
            if tier_name not in tiers_of[tier_pair[tier_name]]:
                tiers_of[tier_pair[tier_name]].append(tier_name)
        for limits in ((tq.borrowing_limit, tq.lending_limit) if tq is not None else ()):
            for name in limits or {}:
                if name in tier_pair and name not in tiers_of[tier_pair[name]]:
                    tiers_of[tier_pair[name]].append(name)
        quotas = []
        for p in pairs:
            types = split.get(p[0], (None,))
            spot_tiers = [n for n in tiers_of[p] if cap_of[n] == "spot"]
            for ctype in types:
                tiers_here = [n for n in tiers_at[p] if cap_of[n] == ctype]
                mine = [n for n in tiers_of[p] if cap_of[n] == ctype]
                borrow = lend = None
                if tq is not None:
                    bl = [tq.borrowing_limit[n] for n in tiers_here if tq.borrowing_limit and n in tq.borrowing_limit]
                    ll = [tq.lending_limit[n] for n in tiers_here if tq.lending_limit and n in tq.lending_limit]
                    borrow = sum(bl) if bl else None
                    lend = sum(ll) if ll else None
                units = sum(u for n, u in grants_of.get(tn.name, ()) if n in mine)
                if ctype not in (None, "spot") and spot_tiers:
                    # preemptible tiers try spot first, then the guaranteed flavor: there they hold no
                    # quota of their own and run on what the cohort lends (Kueue tries the queue's
                    # flavors in order, flavorassigner.go:1088-1091; whenCanBorrow MayStopSearch)
                    mine = mine + spot_tiers
                if mine:  # the flavors and resources the tenant was granted (or names in its limits)
                    quotas.append(FlavorQuota(p[0], p[1], tuple(mine), units, borrow, lend, capacity_type=ctype))
        granted = [rf.tier_by_name[n] for ns in tn.quotas.values() for n in ns if n in tier_pair]
        queues.append(QueuePlan(
            tenant=tn.name, namespaces=tuple(tn.namespaces),
            cohort=(tq.cohort if tq is not None and tq.cohort else root),
            weight=tq.fair_sharing_weight if tq is not None else 1,
            preemption=_preemption(granted or [rf.tier_by_name[n] for n in tier_pair]),
            quotas=tuple(quotas),
        ))
    queues = potentials(queues)

    totals: dict[tuple[str, str], int] = {p: 0 for p in pairs}
    for qp in queues:
        for q in qp.quotas:
            totals[(q.pool, q.resource)] += q.nominal
    flavors = []
    for pool, res in pairs:
        trs = [tr for tr in report.tiers if (tr.pool, tr.resource) == (pool, res)]
        flavors.append(FlavorLedger(
            pool=pool, resource=res, capacity=trs[0].capacity if trs else 0,
            max_oversubscription=min((tr.max_oversubscription for tr in trs), default=1.0),
            nominal=totals[(pool, res)], resource_quota=trs[0].pool_resource_quota if trs else 0,
            capacity_types=split.get(pool, (None,)),
        ))
    children = tuple(dict.fromkeys(qp.cohort for qp in queues if qp.cohort != root))
    return QueueLedger(root, children, queued, tuple(pairs), tuple(queues), tuple(flavors),
                       tuple((pool, types) for pool, types in split.items()), spec.queueing.engine)


def queued_namespaces(ledger: "QueueLedger", tenant: "Tenant") -> list[str]:
    """The namespaces of ``tenant`` that get the LocalQueue: those granted a queued tier.
    Kueue gives every Job without a queue label the LocalQueue ``default``, so in a
    namespace that only runs unqueued tiers it would hold their Jobs in a queue that
    has none of their resources, never to be admitted."""
    qp = ledger.queue(tenant.name)
    if qp is None:
        return []
    queued = set(ledger.queued_tiers)
    return [ns for ns in qp.namespaces if queued & set(tenant.quotas.get(ns, {}))]


def namespace_ceilings(rf: "ResolvedFleet", tenant: "Tenant") -> dict[tuple[str, str], int] | None:
    """(pool, resource) -> the most Kueue may admit for the tenant's queue (any of its
    namespaces); None when the tenant has no queue. The ResourceQuotas of a queued tenant
    allow this much, so that they never refuse a pod Kueue admitted."""
    ledger = queue_ledger(rf)
    if ledger is None:
        return None
    qp = ledger.queue(tenant.name)
    if qp is None:
        return None
    out: dict[tuple[str, str], int] = {}
    for q in qp.quotas:  # a pool split by capacity type: what Kueue may admit on any of its flavors
        out[(q.pool, q.resource)] = out.get((q.pool, q.resource), 0) + q.potential
    return out


def gang_sizes(tier: "Tier") -> tuple[int, int] | None:
    """(fewest, most) pods of one of the tier's jobs: ``minNodesPerJob`` to ``nodesPerJob``."""
    if tier.gang is None:
        return None
    most = tier.gang.nodes_per_job
    return (tier.gang.min_nodes_per_job or most), most


def gang_shape(rf: "ResolvedFleet", tier: "Tier") -> tuple[int, int] | None:
    """(pods, units per pod) of one job of a gang tier; None without ``gang`` or a resource."""
    if tier.gang is None:
        return None
    res = rf.tier_resource(tier)
    pv = rf.tier_pool(tier)
    if res is None or pv is None:
        return None
    per_pod = tier.gang.units_per_node or tier.max_gpus_per_pod
    if per_pod is None:
        from gpuplan.units import pool_resources_per_node

        per_pod = pool_resources_per_node(pv).get(res, 0)
    return tier.gang.nodes_per_job, per_pod


def queue_rows(ledger: QueueLedger, leaf: Any = None) -> tuple[list[str], list[list[str]]]:
    """The capacity report's queue table: each ClusterQueue's quota next to the tiers' quota
    (the ResourceQuotas' units), then per flavor the cohort's total against the pool. ``leaf``:
    (tenant, pool) -> the queue that holds the quota, where the engine's queues are per pool
    (Volcano's leaves), whose flavor column is then the pool."""
    head = ["queue", "flavor" if leaf is None else "pool", "resource", "nominal", "lends", "borrow limit",
            "max admitted", "capacity"]
    rows = []
    for qp in ledger.queues:
        for q in qp.quotas:
            rows.append([qp.name if leaf is None else leaf(qp.tenant, q.pool), q.flavor if leaf is None else q.pool,
                         q.resource, str(q.nominal), str(q.lendable),
                         "—" if q.borrowing_limit is None else str(q.borrowing_limit), str(q.potential), ""])
    for f in ledger.flavors:
        limit = "" if f.max_oversubscription == 1.0 else f" × {f.max_oversubscription:g}"
        rows.append([f"cohort {ledger.cohort}" if leaf is None else "root", f.flavor if leaf is None else f.pool,
                     f.resource, str(f.nominal), "", "", "",
                     f"{f.capacity}{limit}"])
    return head, rows


def queues_data(ledger: QueueLedger) -> dict:
    """The ledger for `gpuplan plan --format json`."""
    return {
        "engine": ledger.engine,
        "cohort": ledger.cohort,
        "queuedTiers": list(ledger.queued_tiers),
        "clusterQueues": [{
            "name": qp.name, "tenant": qp.tenant, "cohort": qp.cohort, "namespaces": list(qp.namespaces),
            "weight": qp.weight,
            "quotas": [{"flavor": q.flavor, "resource": q.resource, "tiers": list(q.tiers), "nominal": q.nominal,
                        "borrowingLimit": q.borrowing_limit, "lendingLimit": q.lending_limit,
                        "maxAdmitted": q.potential} for q in qp.quotas],
        } for qp in ledger.queues],
        "flavors": [{"flavor": f.flavor, "resource": f.resource, "nominal": f.nominal, "capacity": f.capacity,
                     "maxOversubscription": f.max_oversubscription, "resourceQuota": f.resource_quota}
                    for f in ledger.flavors],
    }


# --- who may create the pods of a queued tier ------------------------------------------

# The user each controller acts as (a ServiceAccount of its install manifests; the
# kube-controller-manager's own controllers with --use-service-account-credentials, as
# kubeadm and EKS run it). Pods of a queued tier's class are admitted only from these, or
# held by Kueue's own scheduling gate (docs/placement.md "Kueue").
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
INTEGRATION_CONTROLLERS: dict[str, tuple[str, ...]] = {
    "batch/job": (JOB_CONTROLLER,),
    # JobSet creates Jobs (the Job controller their pods): kubernetes-sigs/jobset config/components/rbac
    "jobset.x-k8s.io/jobset": ("system:serviceaccount:jobset-system:jobset-controller-manager", JOB_CONTROLLER),
    # TrainJob creates JobSets: kubeflow/trainer manifests/base/rbac
    "trainer.kubeflow.org/trainjob": ("system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager",
                                      "system:serviceaccount:jobset-system:jobset-controller-manager", JOB_CONTROLLER),
    # the v1 training operator creates the pods itself: kubeflow/training-operator manifests/base/rbac
    **{f"kubeflow.org/{k}": ("system:serviceaccount:kubeflow:training-operator",)
       for k in ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob")},
}
KUEUE_GATE = "kueue.x-k8s.io/admission"  # kueue v0.19.2 pkg/controller/jobs/pod/constants SchedulingGateName


def queue_controllers(rf: "ResolvedFleet") -> tuple[str, ...]:
    """Users that may create pods (and child Jobs) of queued tiers: ``queueing.controllers``,
    else the defaults of the enabled integrations."""
    q = rf.fleet.spec.queueing
    if q is None:
        return ()
    if q.controllers is not None:
        return tuple(sorted(set(q.controllers)))
    return tuple(sorted({u for i in q.integrations for u in INTEGRATION_CONTROLLERS.get(i, ())}))


def kueue_user(rf: "ResolvedFleet") -> str:
    """Kueue's controller (the chart's ServiceAccount ``kueue-controller-manager``): the one
    user that may release a queued workload (unsuspend it, lift its gate)."""
    q = rf.fleet.spec.queueing
    assert q is not None
    return f"system:serviceaccount:{q.kueue.namespace}:kueue-controller-manager"


def namespace_grants(rf: "ResolvedFleet") -> dict[str, frozenset[str]]:
    """namespace -> the tiers its pods may use: the tiers its quota grants (units > 0) and,
    in a namespace with the tenant's LocalQueue, every queued tier the tenant's ClusterQueue
    covers (a tier it may only borrow included: Kueue admits its jobs there). One answer for
    the admission policies, the quotas, the namespace labels and both proofs."""
    cached = rf.__dict__.get("_namespace_grants")
    if cached is not None:
        return cached
    out: dict[str, set[str]] = {}
    for tn in rf.fleet.spec.tenants:
        for ns in tn.namespaces:
            out.setdefault(ns, set()).update(t for t, u in tn.quotas.get(ns, {}).items() if u > 0)
    ledger = queue_ledger(rf) if rf.fleet.spec.queueing is not None else None
    if ledger is not None:
        for tn in rf.fleet.spec.tenants:
            qp = ledger.queue(tn.name)
            if qp is None:
                continue
            covered = {t for q in qp.quotas for t in q.tiers}
            for ns in queued_namespaces(ledger, tn):
                out.setdefault(ns, set()).update(covered)
    frozen = {ns: frozenset(ts) for ns, ts in out.items()}
    rf.__dict__["_namespace_grants"] = frozen
    return frozen
