"""GP420-GP429: Kueue queueing (`spec.queueing`, tier `gang`, tenant `queueing`).

The numbers are the Kueue ledger's (``gpuplan.queues``), which reads the grants
from the capacity report: per flavor and resource the ClusterQueues' nominal quotas add up
to the tiers' quotas, which GP410 already holds against what the pool advertises (times an
explicit ``maxOversubscription``). These rules check what only queueing adds: gangs that
can never be admitted, limits Kueue would reject or never use, and references.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import autoscaled, title
from gpuplan.resolve import ResolvedFleet
from gpuplan.rules.cascade import POOL_INPUTS

E_GANG_POOL = Code(
    "GP420", "gang larger than its pool", Severity.ERROR,
    "A tier's multi-node job needs `gang.nodesPerJob` nodes with `unitsPerNode` units each. When the "
    "pool has fewer nodes, or one node advertises fewer units, Kueue can admit the job (quota is not "
    "capacity) but its pods can never all be scheduled: with waitForPodsReady it is evicted and "
    "requeued for ever.",
    bad="pools:\n  - {name: train, gpusPerNode: 8, nodes: [n1, n2]}\n"
        "tiers:\n  - {name: training, pool: train, gang: {nodesPerJob: 4}}",
    good="tiers:\n  - {name: training, pool: train, gang: {nodesPerJob: 2}}",
)
E_GANG_QUOTA = Code(
    "GP421", "gang larger than the queue can admit", Severity.ERROR,
    "Kueue admits a job only when all of its pods fit in the ClusterQueue's quota: its nominal quota "
    "plus what it may borrow from the cohort (bounded by its borrowingLimit and by what the other "
    "queues lend). A gang larger than that stays pending for ever.",
    bad="tiers:\n  - {name: training, pool: train, maxGPUsPerPod: 8, gang: {nodesPerJob: 2}}   # 16 GPUs\n"
        "tenants:\n  - {name: a, namespaces: [a], quotas: {a: {training: 8}}, queueing: {borrowingLimit: {training: 0}}}",
    good="tenants:\n  - {name: a, namespaces: [a], quotas: {a: {training: 8}}, queueing: {borrowingLimit: {training: 8}}}",
)
E_LENDING_ABOVE_NOMINAL = Code(
    "GP422", "lending limit above the quota", Severity.ERROR,
    "Kueue's ClusterQueue webhook rejects a lendingLimit greater than the nominalQuota (kueue v0.19.2 "
    "pkg/webhooks/clusterqueue_webhook.go:382-386); the ClusterQueue would never be created.",
    bad="quotas: {a: {training: 4}}\nqueueing: {lendingLimit: {training: 8}}",
    good="quotas: {a: {training: 4}}\nqueueing: {lendingLimit: {training: 4}}",
)
E_LIMIT_TIER = Code(
    "GP423", "queue limit on a tier that is not queued", Severity.ERROR,
    "A tenant's borrowingLimit or lendingLimit, or `queueing.tiers`, names a tier that does not exist or "
    "that Kueue does not manage (by default: tiers with workload training or batch, and gang tiers).",
    bad="queueing: {borrowingLimit: {inference: 4}}   # inference is not queued",
    good="spec:\n  queueing: {tiers: [training, inference]}",
)
W_NO_QUEUEING = Code(
    "GP424", "queueing settings without spec.queueing", Severity.WARNING,
    "A tier declares `gang` or a tenant declares `queueing`, but the fleet has no `spec.queueing`: "
    "nothing admits the jobs all-or-nothing and the settings do nothing.",
    bad="tiers:\n  - {name: training, pool: train, gang: {nodesPerJob: 2}}",
    good="spec:\n  queueing: {}\n  tiers:\n  - {name: training, pool: train, gang: {nodesPerJob: 2}}",
)
E_TOPOLOGY_LEVEL = Code(
    "GP425", "gang topology level is not a declared level", Severity.ERROR,
    "`gang.topologyLevel` must be one of `queueing.topologyLevels` (or kubernetes.io/hostname): Kueue "
    "rejects a job whose required topology level its flavor's Topology does not have.",
    bad="queueing: {topologyLevels: [example.com/rack]}\ntiers:\n  - {name: t, gang: {nodesPerJob: 2, topologyLevel: example.com/block}}",
    good="queueing: {topologyLevels: [example.com/block, example.com/rack]}",
)
W_MIXED_QUEUED = Code(
    "GP426", "queued and unqueued tiers share a pool resource", Severity.WARNING,
    "Kueue counts only the jobs it admits. A tier that is not queued but hands out the same resource "
    "of the same pool uses GPUs that the ClusterQueues still count as free: admitted jobs then wait "
    "for capacity that is not there.",
    bad="tiers:\n  - {name: training, pool: p, workload: training}\n  - {name: dev, pool: p, workload: interactive}",
    good="spec:\n  queueing: {tiers: [training, dev]}",
)
E_BORROW_ONLY = Code(
    "GP432", "queue a tenant may borrow into but no namespace can reach", Severity.ERROR,
    "A namespace gets the tenant's LocalQueue, and with it every queued tier the tenant's ClusterQueue "
    "covers (a tier it may only borrow included), when the tenant's `quotas` has a row for a queued tier "
    "there. A tenant with a `borrowingLimit` but no such row in any namespace has a ClusterQueue with "
    "borrowing room and no LocalQueue: no Job can name its queue, and the tier's pods are refused in "
    "every namespace of the tenant. To borrow without a nominal quota, give a namespace the tier at 0.",
    bad="tenants:\n  - name: research\n    namespaces: [research]\n    queueing: {borrowingLimit: {training: 8}}",
    good="tenants:\n  - name: research\n    namespaces: [research]\n    quotas: {research: {training: 0}}\n"
         "    queueing: {borrowingLimit: {training: 8}}",
)
E_GANG_RANGE = Code(
    "GP433", "gang range upside down", Severity.ERROR,
    "`gang.minNodesPerJob` is the fewest pods a job of the tier may have, `nodesPerJob` the most: the "
    "smallest job cannot be larger than the largest.",
    bad="gang: {nodesPerJob: 4, minNodesPerJob: 8}",
    good="gang: {nodesPerJob: 8, minNodesPerJob: 2}   # jobs of 2 to 8 nodes",
)
I_BORROW_UNREACHABLE = Code(
    "GP427", "borrowing limit beyond what the cohort lends", Severity.INFO,
    "A tenant's borrowingLimit is larger than everything the other queues of the cohort lend on that "
    "flavor, so the limit can never be reached; the queue can borrow only what is lent.",
    bad="# the other tenants lend 4 GPUs\nqueueing: {borrowingLimit: {training: 16}}",
    good="queueing: {borrowingLimit: {training: 4}}",
)
E_COHORT_NAME = Code(
    "GP428", "child cohort named like the root cohort", Severity.ERROR,
    "A tenant's `queueing.cohort` is a child of the fleet's cohort; naming it like the root makes "
    "the Cohort its own parent, a cycle Kueue refuses to use.",
    bad="queueing: {cohort: gpuplan-ml}   # the fleet's cohort",
    good="queueing: {cohort: vision-teams}",
)

E_KUEUE_LIMITS = Code(
    "GP429", "more flavors or resources than a ClusterQueue holds", Severity.ERROR,
    "A tenant's ClusterQueue lists every queued pool (a flavor) and resource the tenant was granted, "
    "in resource groups that join resources sharing a pool. Kueue's ClusterQueue schema allows at "
    "most 16 resource groups and 64 flavors and 64 resources per group; a larger queue is refused "
    "by the API server.",
    bad="quotas: {a: {t0: 1, t1: 1, ..., t64: 1}}   # 65 queued pools handing out nvidia.com/gpu",
    good="quotas: {a: {t0: 1, ..., t63: 1}}",
)

E_TAS_EMPTY_POOL = Code(
    "GP430", "gang topology on a pool that can be empty", Severity.ERROR,
    "A gang tier with `topologyLevel` needs Kueue's topology-aware scheduling, which counts capacity only "
    "from existing Nodes that carry every topology label (kueue v0.19.2 pkg/util/tas/node.go:21-33, "
    "pkg/scheduler/flavorassigner/tas_flavorassigner.go). A Karpenter pool can be empty and its NodePool "
    "does not set those labels: the job is never admitted, so no pod ever asks Karpenter for a node. "
    "gpuplan makes only static pools' flavors topology-aware.",
    bad="tiers:\n  - {name: burst, pool: karpenter-h100, gang: {nodesPerJob: 2, topologyLevel: example.com/rack}}",
    good="tiers:\n  - {name: burst, pool: karpenter-h100, gang: {nodesPerJob: 2}}",
)

CODES = (E_BORROW_ONLY, E_GANG_RANGE, E_GANG_POOL, E_GANG_QUOTA, E_LENDING_ABOVE_NOMINAL, E_LIMIT_TIER, W_NO_QUEUEING, E_TOPOLOGY_LEVEL,
         W_MIXED_QUEUED, I_BORROW_UNREACHABLE, E_COHORT_NAME, E_KUEUE_LIMITS, E_TAS_EMPTY_POOL)

# a gang is measured against the units a node of its pool advertises (gpuplan.rules.cascade)
CONSUMES = {E_GANG_POOL.code: POOL_INPUTS}


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    spec = rf.fleet.spec
    if spec.queueing is None:
        for i, t in enumerate(spec.tiers):
            if t.gang is not None:
                yield rf.diag(W_NO_QUEUEING, f"tier {t.name} declares a gang but the fleet has no queueing",
                              ("spec", "tiers", i, "gang"), key=True, hint="add `queueing: {}` under spec")
        for i, tn in enumerate(spec.tenants):
            if tn.queueing is not None:
                yield rf.diag(W_NO_QUEUEING, f"tenant {tn.name} has queueing settings but the fleet has no queueing",
                              ("spec", "tenants", i, "queueing"), key=True, hint="add `queueing: {}` under spec")
        return
    yield from _references(rf)
    yield from _gangs(rf)
    yield from _limits(rf)
    yield from _mixed(rf)
    if spec.queueing.engine == "kueue":
        yield from _kueue_limits(rf)


# kueue.x-k8s.io/v1beta2 ClusterQueue: spec.resourceGroups maxItems, and per group
# coveredResources / flavors maxItems (the pinned strict schema)
MAX_GROUPS, MAX_FLAVORS, MAX_RESOURCES = 16, 64, 64


def _kueue_limits(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.queues import queue_ledger

    ledger = queue_ledger(rf)
    assert ledger is not None
    if not ledger.queues:
        return
    for i, tn in enumerate(rf.fleet.spec.tenants):
        qp = ledger.queue(tn.name)
        if qp is None:
            continue
        groups = ledger.queue_groups(qp)
        problems = []
        if len(groups) > MAX_GROUPS:
            problems.append(f"{len(groups)} resource groups (at most {MAX_GROUPS})")
        for resources, pools in groups:
            if len(pools) > MAX_FLAVORS:
                problems.append(f"{len(pools)} flavors for {', '.join(resources)} (at most {MAX_FLAVORS})")
            if len(resources) > MAX_RESOURCES:
                problems.append(f"{len(resources)} resources in one group (at most {MAX_RESOURCES})")
        if problems:
            yield rf.diag(E_KUEUE_LIMITS, f"the ClusterQueue of tenant {tn.name} would hold " + "; ".join(problems),
                          ("spec", "tenants", i, "quotas"), key=True,
                          hint="grant the tenant fewer queued tiers, or queue fewer tiers (queueing.tiers)")


def _references(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.queues import cohort_name, queued_tiers

    spec = rf.fleet.spec
    q = spec.queueing
    assert q is not None
    for j, name in enumerate(q.tiers or ()):
        if name not in rf.tier_by_name:
            yield rf.diag(E_LIMIT_TIER, f"queueing.tiers names tier {name!r}, which does not exist",
                          ("spec", "queueing", "tiers", j))
    queued = set(queued_tiers(rf))
    root = cohort_name(rf)
    levels = set(q.topology_levels or ()) | {"kubernetes.io/hostname"}
    for i, t in enumerate(spec.tiers):
        if t.gang is not None and t.gang.topology_level and (not q.topology_levels or t.gang.topology_level not in levels):
            yield rf.diag(E_TOPOLOGY_LEVEL, f"tier {t.name}: topology level {t.gang.topology_level} is not one of "
                          f"queueing.topologyLevels", ("spec", "tiers", i, "gang", "topologyLevel"),
                          hint=f"add it to queueing.topologyLevels, or use one of {sorted(levels)}")
        pv = rf.pool_by_name.get(t.pool)
        if (t.gang is not None and t.gang.topology_level and q.topology_levels and pv is not None
                and autoscaled(pv.pool)):
            yield rf.diag(E_TAS_EMPTY_POOL, f"tier {t.name}: topology level {t.gang.topology_level} on {title(pv.pool)} "
                          f"{t.pool}, whose nodes do not exist before a job is admitted",
                          ("spec", "tiers", i, "gang", "topologyLevel"),
                          hint="leave topologyLevel out for this tier, or put it on a static pool")
        if t.gang is not None and t.name not in queued:
            yield rf.diag(E_LIMIT_TIER, f"tier {t.name} declares a gang but is not in queueing.tiers",
                          ("spec", "tiers", i, "gang"), key=True, hint="add it to queueing.tiers")
    for i, tn in enumerate(spec.tenants):
        tq = tn.queueing
        if tq is None:
            continue
        if tq.cohort == root:
            yield rf.diag(E_COHORT_NAME, f"tenant {tn.name}: cohort {tq.cohort} is the fleet's own cohort",
                          ("spec", "tenants", i, "queueing", "cohort"), hint="leave `cohort` out, or name a child cohort")
        for field, limits in (("borrowingLimit", tq.borrowing_limit), ("lendingLimit", tq.lending_limit)):
            for name in limits or {}:
                if name not in queued:
                    what = "does not exist" if name not in rf.tier_by_name else "is not queued"
                    yield rf.diag(E_LIMIT_TIER, f"tenant {tn.name}: {field} names tier {name!r}, which {what}",
                                  ("spec", "tenants", i, "queueing", field, name), key=True,
                                  hint="name a queued tier (queueing.tiers)")
        borrowed = [name for name in tq.borrowing_limit or {} if name in queued]
        if borrowed and not any(set(row) & set(queued) for row in tn.quotas.values()):
            # no namespace gets the LocalQueue (gpuplan.queues.queued_namespaces): the borrowing is dead
            name = borrowed[0]
            ns = next(iter(tn.quotas), tn.namespaces[0] if tn.namespaces else tn.name)
            row = ", ".join(f"{k}: {v}" for k, v in {**tn.quotas.get(ns, {}), name: 0}.items())
            yield rf.diag(E_BORROW_ONLY, f"tenant {tn.name}: borrowingLimit lets its queue borrow tier {name}, but no "
                          "namespace of the tenant has a quota row for a queued tier, so none gets the LocalQueue: "
                          "no workload can reach the queue",
                          ("spec", "tenants", i, "queueing", "borrowingLimit", name), key=True,
                          hint=f"give a namespace the tier at 0 — quotas: {{{ns}: {{{row}}}}} — or drop "
                               f"{name} from borrowingLimit")


def _gangs(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.units import pool_resources_per_node
    from gpuplan.queues import gang_shape, gang_sizes, queue_ledger, tier_capacity

    ledger = queue_ledger(rf)
    assert ledger is not None
    for i, t in enumerate(rf.fleet.spec.tiers):
        shape = gang_shape(rf, t)
        if shape is None or t.name not in ledger.queued_tiers:
            continue
        pods, per_pod = shape
        res = rf.tier_resource(t)
        pv = rf.tier_pool(t)
        assert pv is not None and res is not None
        at = ("spec", "tiers", i, "gang", "nodesPerJob")
        per_node = pool_resources_per_node(pv).get(res, 0)
        nodes = pv.node_count or 0
        if per_pod > per_node or pods > nodes:
            why = (f"one node advertises {per_node} {res}, a pod needs {per_pod}" if per_pod > per_node
                   else f"the pool has {nodes} node{'s' if nodes != 1 else ''}")
            yield rf.diag(E_GANG_POOL, f"tier {t.name}: a job of {pods} pods × {per_pod} {res} cannot be placed "
                          f"on pool {t.pool}: {why}", at,
                          hint="lower gang.nodesPerJob or unitsPerNode, or give the pool more nodes")
            continue
        fewest, _ = gang_sizes(t)  # type: ignore[misc]
        if fewest > pods:
            yield rf.diag(E_GANG_RANGE, f"tier {t.name}: minNodesPerJob {fewest} is more than nodesPerJob {pods}",
                          ("spec", "tiers", i, "gang", "minNodesPerJob"),
                          hint=f"minNodesPerJob: {pods} at most (nodesPerJob is the largest job)")
            continue
        # every queue must admit the smallest job; with a range, the larger ones where it can
        need = fewest * per_pod
        for qp in ledger.queues:
            fq = qp.quota(t.pool, res, tier_capacity(rf, t))
            if fq is None or t.name not in fq.tiers:
                continue
            if need > fq.potential:
                borrow = fq.potential - fq.nominal
                yield rf.diag(E_GANG_QUOTA, f"tier {t.name}: a job needs {need} {res} ({fewest} × {per_pod}), but "
                              f"tenant {qp.tenant}'s queue can be admitted at most {fq.potential} on {fq.flavor} "
                              f"(quota {fq.nominal} + {borrow} borrowable)",
                              ("spec", "tiers", i, "gang", "minNodesPerJob" if fewest != pods else "nodesPerJob"),
                              hint=f"raise tenant {qp.tenant}'s quota or borrowingLimit, have others lend more, "
                                   "or lower gang.nodesPerJob" + (" (or minNodesPerJob)" if fewest != pods else ""))


def _limits(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.queues import queue_ledger, tier_capacity

    ledger = queue_ledger(rf)
    assert ledger is not None
    lent_total: dict[tuple[str, str, str | None], int] = {}
    for o in ledger.queues:
        for q in o.quotas:
            key = (q.pool, q.resource, q.capacity_type)
            lent_total[key] = lent_total.get(key, 0) + q.lendable
    for i, tn in enumerate(rf.fleet.spec.tenants):
        tq, qp = tn.queueing, ledger.queue(tn.name)
        if tq is None or qp is None:
            continue
        for name in tq.lending_limit or {}:
            t = rf.tier_by_name.get(name)
            res = rf.tier_resource(t) if t else None
            fq = qp.quota(t.pool, res, tier_capacity(rf, t)) if (t and res) else None
            if fq is not None and fq.lending_limit is not None and fq.lending_limit > fq.nominal:
                yield rf.diag(E_LENDING_ABOVE_NOMINAL, f"tenant {tn.name}: lendingLimit {fq.lending_limit} {res} on "
                              f"{fq.flavor} is above its quota {fq.nominal}",
                              ("spec", "tenants", i, "queueing", "lendingLimit", name),
                              hint=f"lend at most {fq.nominal}")
        for name in tq.borrowing_limit or {}:
            t = rf.tier_by_name.get(name)
            res = rf.tier_resource(t) if t else None
            fq = qp.quota(t.pool, res, tier_capacity(rf, t)) if (t and res) else None
            if fq is None or fq.borrowing_limit is None:
                continue
            lent = lent_total[(fq.pool, fq.resource, fq.capacity_type)] - fq.lendable
            if fq.borrowing_limit > lent:
                yield rf.diag(I_BORROW_UNREACHABLE, f"tenant {tn.name}: borrowingLimit {fq.borrowing_limit} {res} on "
                              f"{fq.flavor}, but the other queues lend only {lent}",
                              ("spec", "tenants", i, "queueing", "borrowingLimit", name))


def _mixed(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.queues import queue_ledger

    ledger = queue_ledger(rf)
    assert ledger is not None
    pairs = set(ledger.pairs)
    for i, t in enumerate(rf.fleet.spec.tiers):
        if t.name in ledger.queued_tiers:
            continue
        res = rf.tier_resource(t)
        if (t.pool, res) in pairs:
            yield rf.diag(W_MIXED_QUEUED, f"tier {t.name} is not queued but hands out {res} of pool {t.pool}, "
                          "like a queued tier: Kueue does not see its pods", ("spec", "tiers", i, "name"),
                          hint="queue it too (queueing.tiers), or move it to its own pool")
