"""GP435-GP437: what Volcano's Queues cannot hold, and Kueue settings that do nothing there.

- GP435: a queued tier on a pool split by capacity type (spot and a guaranteed type). Volcano
  charges a PodGroup's pods to its queue by resource name, and a leaf queue reaches its pool
  through one node group; Kueue's flavor per capacity type has no counterpart, so a spot grant
  and an on-demand grant of the same name on one pool would share one ceiling;
- GP436: a queued tier on a DRA pool. Volcano's capacity plugin counts claims per DeviceClass
  from its own queue fields (volcano-sh/volcano v1.15.1 pkg/scheduler/plugins/capacity/
  capacity.go:181-195), which gpuplan does not write: the devices would be unlimited in every
  queue;
- GP437: settings only Kueue reads (``queueing.kueue``, ``integrations``, ``controllers``,
  ``topologyLevels``, ``gangAdmission``, ``fairSharing``, a tenant's ``fairSharingWeight``)
  under ``engine: volcano``.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

E_SPLIT_POOL = Code(
    "GP435", "Volcano queue on a pool split by capacity type", Severity.ERROR,
    "With `queueing.engine: volcano` a tenant gets one leaf Queue per pool, which counts resource names "
    "and reaches the pool's nodes through one node group. A pool that allows spot beside a guaranteed "
    "capacity type gives its tiers separate quotas per type (Kueue's flavor per type); one Volcano queue "
    "would hold both grants under one ceiling, and a tier that must not be interrupted could run on "
    "spot quota.",
    bad="queueing: {engine: volcano}\npools:\n  - {name: train, karpenter: {capacityTypes: [spot, on-demand]}}",
    good="queueing: {engine: volcano}\npools:\n  - {name: train, karpenter: {capacityTypes: [on-demand]}}",
)
E_DRA_POOL = Code(
    "GP436", "Volcano queue on a DRA pool", Severity.ERROR,
    "A queued tier's pool allocates GPUs through DRA (`allocation.backend: dra`). Volcano's capacity "
    "plugin counts claimed devices per DeviceClass from quota fields gpuplan does not write, so no "
    "queue would limit them.",
    bad="queueing: {engine: volcano}\npools:\n  - {name: train, allocation: {backend: dra}}",
    good="queueing: {engine: kueue}",
)
W_KUEUE_SETTING = Code(
    "GP437", "Kueue setting under queueing engine volcano", Severity.WARNING,
    "A setting only Kueue reads is set while `queueing.engine` is `volcano`: it changes nothing. "
    "Volcano admits gangs by their PodGroup's `minMember`, divides borrowed capacity by the queues' "
    "`deserved`, and places a queue's pods by its node group.",
    bad="queueing:\n  engine: volcano\n  integrations: [batch/job]",
    good="queueing:\n  engine: volcano",
)
CODES = (E_SPLIT_POOL, E_DRA_POOL, W_KUEUE_SETTING)

KUEUE_ONLY = ("kueue", "integrations", "controllers", "topology_levels", "gang_admission", "fair_sharing")


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    q = rf.fleet.spec.queueing
    if q is None or q.engine != "volcano":
        return
    from gpuplan.dra.claims import is_dra
    from gpuplan.queues import queue_ledger

    ledger = queue_ledger(rf)
    if ledger is not None:
        for pool, types in ledger.split:
            yield rf.diag(E_SPLIT_POOL, f"pool {pool} splits its queued tiers' quota by capacity type "
                          f"({', '.join(str(t) for t in types)}); a Volcano queue cannot keep them apart",
                          ("spec", "queueing", "engine"),
                          hint=f"queue only tiers of pools with one capacity type (queueing.tiers), or drop spot "
                               f"from pool {pool}, or use engine kueue")
        for pool in ledger.pools():
            pv = rf.pool_by_name.get(pool)
            if pv is not None and is_dra(rf, pv):
                yield rf.diag(E_DRA_POOL, f"pool {pool} allocates through DRA; Volcano's queues would not limit "
                              "its devices", ("spec", "queueing", "engine"),
                              hint=f"leave pool {pool}'s tiers out of queueing.tiers, or use engine kueue")
    for field in KUEUE_ONLY:
        if field in q.model_fields_set:
            yield rf.diag(W_KUEUE_SETTING, f"queueing.{_camel(field)} is read only by Kueue", ("spec", "queueing", _camel(field)),
                          key=True, hint=f"drop queueing.{_camel(field)}")
    for i, tn in enumerate(rf.fleet.spec.tenants):
        if tn.queueing is not None and "fair_sharing_weight" in tn.queueing.model_fields_set:
            yield rf.diag(W_KUEUE_SETTING, f"tenant {tn.name}'s fairSharingWeight is read only by Kueue",
                          ("spec", "tenants", i, "queueing", "fairSharingWeight"), key=True,
                          hint="drop fairSharingWeight: Volcano shares by each queue's deserved (the grants)")


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(w.title() for w in rest)
