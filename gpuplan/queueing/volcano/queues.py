"""Volcano's Queues from the queue ledger (``gpuplan.queues``): the same grants, borrow
ceilings and lending limits Kueue's ClusterQueues get, as Volcano's capacity plugin reads them.

The hierarchy (capacity plugin with ``enableHierarchy``; volcano-sh/volcano v1.15.1
``pkg/scheduler/plugins/capacity/capacity.go``)::

    root
    └── gpuplan.<cohort>             a tenant's child cohort (tenant queueing.cohort), if any
        └── gpuplan-<tenant>         the tenant: the sum of its leaves
            └── gpuplan-<tenant>.<pool>   a leaf: PodGroups name it; its pods run on <pool> only

Why a leaf per tenant *and pool*: a Queue counts resource names, not pools, so one queue per
tenant would let an H100 grant be spent on A100s (both ``nvidia.com/gpu``). Each leaf's
``affinity.nodeGroupAffinity`` names the pool's node group (nodes labelled
``volcano.sh/nodegroup-name=<pool>``), and the nodegroup plugin in strict mode places a queue's
pods only on its node groups' nodes (``pkg/scheduler/plugins/nodegroup/nodegroup.go:295-338``).

Per leaf and resource, from the ledger's :class:`gpuplan.queues.FlavorQuota`:

- ``deserved`` = the grant (``nominal``): what the queue reclaims back from borrowers
  (``capacity.go:459-645``, reclaim of tasks above their queue's deserved);
- ``capability`` = the borrow ceiling (``potential``: nominal plus what the cohort can lend,
  capped by ``borrowingLimit``), and **0 for every other GPU resource name of the fleet**:
  a name a Queue's capability leaves out is not limited at all (``MinDimensionResource`` with
  ``Infinity`` keeps the cluster's total, ``pkg/scheduler/api/resource_info.go:949-985``, from
  ``capacity.go:1081-1087``), and a child inherits the parent's value for a name it leaves out
  (``capacity.go:1485-1495``);
- ``guarantee`` = ``nominal - lendingLimit``: reserved, subtracted from every other queue's
  real capability (``capacity.go:1081``, ``1511``).

Reclaim and preemption follow the tiers' PriorityClasses: Volcano's preempt and reclaim actions
never preempt for a pod whose ``preemptionPolicy`` is ``Never`` (``pkg/scheduler/actions/
preempt/preempt.go:433``, ``actions/reclaim/reclaim.go:144``); every leaf is ``reclaimable``.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuplan.queues import queue_ledger

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

ROOT = "root"  # the capacity plugin's root queue (capacity.go:49), made by Volcano's controller


def tenant_queue_name(tenant: str) -> str:
    return f"gpuplan-{tenant}"


def leaf_name(tenant: str, pool: str) -> str:
    """``gpuplan-<tenant>.<pool>``: tenant and pool names are DNS labels, so the dot keeps every
    leaf apart from every tenant queue and every other leaf."""
    return f"gpuplan-{tenant}.{pool}"


def cohort_queue_name(cohort: str) -> str:
    return f"gpuplan.{cohort}"


@dataclass(frozen=True)
class VolcanoQueue:
    name: str
    parent: str
    tenant: str | None  # None: a cohort queue
    pool: str | None  # a leaf's pool; None above the leaves
    capability: tuple[tuple[str, int], ...]
    deserved: tuple[tuple[str, int], ...]
    guarantee: tuple[tuple[str, int], ...]
    tiers: tuple[str, ...] = ()  # a leaf's queued tiers

    @property
    def leaf(self) -> bool:
        return self.pool is not None


@dataclass(frozen=True)
class VolcanoPlan:
    queues: tuple[VolcanoQueue, ...]  # parents before children
    resources: tuple[str, ...]  # every GPU resource name a leaf's capability lists

    def _leaves(self) -> dict[str, dict[str, VolcanoQueue]]:
        index = self.__dict__.get("_index")
        if index is None:  # tenant -> pool -> leaf, once: the pages ask per tenant and tier
            index = {}
            for q in self.queues:
                if q.leaf:
                    index.setdefault(q.tenant, {})[q.pool] = q
            object.__setattr__(self, "_index", index)
        return index

    def leaves_of(self, tenant: str) -> list[VolcanoQueue]:
        return list(self._leaves().get(tenant, {}).values())

    def leaf(self, tenant: str, pool: str) -> VolcanoQueue | None:
        return self._leaves().get(tenant, {}).get(pool)


def _sum(rows: list[tuple[tuple[str, int], ...]], names: list[str]) -> tuple[tuple[str, int], ...]:
    total = {n: 0 for n in names}
    for row in rows:
        for n, v in row:
            total[n] = total.get(n, 0) + v
    return tuple((n, v) for n, v in total.items() if n in names or v)


def volcano_plan(rf: "ResolvedFleet") -> VolcanoPlan | None:
    """The Queues of a fleet with ``queueing.engine: volcano`` (None otherwise)."""
    q = rf.fleet.spec.queueing
    ledger = queue_ledger(rf) if q is not None and q.engine == "volcano" else None
    if ledger is None:
        return None
    from gpuplan.identity import kept_gpu_resources

    names = sorted({*rf.gpu_resources, *kept_gpu_resources(rf)})
    leaves: list[VolcanoQueue] = []
    tenants: list[VolcanoQueue] = []
    cohorts: dict[str, list[VolcanoQueue]] = {}
    for qp in ledger.queues:
        mine: list[VolcanoQueue] = []
        for pool in dict.fromkeys(fq.pool for fq in qp.quotas):
            fqs = [fq for fq in qp.quotas if fq.pool == pool]
            cap = {n: 0 for n in names}
            deserved: dict[str, int] = {}
            guarantee: dict[str, int] = {}
            for fq in fqs:
                cap[fq.resource] = cap.get(fq.resource, 0) + fq.potential
                deserved[fq.resource] = deserved.get(fq.resource, 0) + fq.nominal
                kept = fq.nominal - fq.lendable
                if kept > 0:
                    guarantee[fq.resource] = guarantee.get(fq.resource, 0) + kept
            tiers = tuple(dict.fromkeys(t for fq in fqs for t in fq.tiers))
            mine.append(VolcanoQueue(leaf_name(qp.tenant, pool), tenant_queue_name(qp.tenant), qp.tenant, pool,
                                     tuple(sorted(cap.items())), tuple(sorted(deserved.items())),
                                     tuple(sorted(guarantee.items())), tiers))
        parent = ROOT if qp.cohort == ledger.cohort else cohort_queue_name(qp.cohort)
        tq = VolcanoQueue(tenant_queue_name(qp.tenant), parent, qp.tenant, None,
                          _sum([m.capability for m in mine], names),
                          _sum([m.deserved for m in mine], []), _sum([m.guarantee for m in mine], []))
        tenants.append(tq)
        leaves.extend(mine)
        if parent != ROOT:
            cohorts.setdefault(qp.cohort, []).append(tq)
    tops = [VolcanoQueue(cohort_queue_name(c), ROOT, None, None, _sum([m.capability for m in ms], names),
                         _sum([m.deserved for m in ms], []), _sum([m.guarantee for m in ms], []))
            for c, ms in cohorts.items()]
    return VolcanoPlan(tuple(tops + tenants + leaves), tuple(names))
