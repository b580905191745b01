"""GP413-GP416: preemptible (spot) capacity against the tiers that may use it.

A Karpenter pool that allows ``spot`` guarantees no unit: with several capacity types
allowed, Karpenter takes reserved capacity first, then spot, then on-demand
(aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/nodepools.md:276),
and EC2 reclaims a spot instance with a two-minute notice. So the quotas of tiers that
are not preemptible (``gpuplan.units.preemptible_tier``) must sit on pools that do not
allow spot; gangs lose the whole job with one node; and spot-to-spot consolidation, the
only way Karpenter moves a spot node to a cheaper one, needs at least 15 instance types
(website/content/en/docs/concepts/disruption.md:122,130) and the SpotToSpotConsolidation
feature gate.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

E_GUARANTEE = Code(
    "GP413", "quota of a tier that must not be interrupted on spot capacity", Severity.ERROR,
    "The tier is not preemptible (inference, training and gangs by default; `preemptible: false`), but its "
    "pool allows only spot capacity, which guarantees none of its units: EC2 reclaims spot with two "
    "minutes' notice. The quota promises capacity that can vanish under the tier's pods. (On a pool that "
    "allows spot *and* on-demand, gpuplan pins such a tier's pods to on-demand with the nodeSelector "
    "`karpenter.sh/capacity-type`, and the admission policy requires it.)",
    bad="pools:\n  - {name: l40s, karpenter: {capacityTypes: [spot], ...}}\n"
        "tiers:\n  - {name: serving, pool: l40s, workload: inference}",
    good="pools:\n  - {name: l40s, karpenter: {capacityTypes: [on-demand], ...}}",
    pain="quotas for inference backed by capacity AWS can reclaim with two minutes' notice",
)
E_INFERENCE_PREEMPTIBLE = Code(
    "GP414", "inference tier marked preemptible", Severity.ERROR,
    "An inference tier set `preemptible: true` on a pool that allows spot: serving replicas on spot "
    "capacity are interrupted together when a capacity pool is reclaimed, and requests fail until new "
    "nodes boot. Serve from on-demand (or reserved) capacity.",
    bad="tiers:\n  - {name: serving, pool: spot-l40s, workload: inference, preemptible: true}",
    good="tiers:\n  - {name: serving, pool: ondemand-l40s, workload: inference}",
)
W_GANG_ON_SPOT = Code(
    "GP415", "gang tier on spot capacity", Severity.WARNING,
    "A gang tier's jobs need all their pods at once; on a pool that allows spot, one interruption "
    "evicts a pod and the whole job restarts from its last checkpoint (Kueue's waitForPodsReady then "
    "requeues it). Put gangs on on-demand or reserved capacity, or accept the restarts.",
    bad="tiers:\n  - {name: train, pool: spot-h100, gang: {nodesPerJob: 4}, preemptible: true}",
    good="tiers:\n  - {name: train, pool: ondemand-h100, gang: {nodesPerJob: 4}}",
)
I_SPOT_CONSOLIDATION = Code(
    "GP416", "spot pool too narrow for spot-to-spot consolidation", Severity.INFO,
    "Karpenter replaces a spot node with a cheaper spot node only when the NodePool offers at least 15 "
    "instance types (and the SpotToSpotConsolidation feature gate is on): with fewer, an expensive spot "
    "node is only ever removed, never replaced (kubernetes-sigs/karpenter#1202; karpenter-provider-aws "
    "v1.14.1 docs/concepts/disruption.md:130). GPU pools rarely reach 15 types: expect no spot-to-spot moves.",
    bad="karpenter: {instanceTypes: [g6e.12xlarge, g6e.24xlarge], capacityTypes: [spot]}",
    good="karpenter: {instanceTypes: [g6e.12xlarge, g6e.24xlarge], capacityTypes: [on-demand]}",
)
SPOT_TO_SPOT_MIN_TYPES = 15

CODES = (E_GUARANTEE, E_INFERENCE_PREEMPTIBLE, W_GANG_ON_SPOT, I_SPOT_CONSOLIDATION)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    from gpuplan.units import preemptible_pool, preemptible_tier

    from gpuplan.identity import guaranteed_capacity_type

    report = rf.capacity
    spot_pools = {pv.name for pv in rf.pools if preemptible_pool(pv)}
    # a pool that also allows on-demand (or reserved) guarantees what the tiers that must not be
    # interrupted pin there (identity.capacity_pin: their pods select the guaranteed type)
    pinnable = {pv.name for pv in rf.pools if guaranteed_capacity_type(pv) is not None}
    for i, t in enumerate(rf.fleet.spec.tiers):
        if t.pool not in spot_pools:
            continue
        tr = report.tier(t.name)
        if t.workload == "inference" and t.preemptible:
            yield rf.diag(E_INFERENCE_PREEMPTIBLE, f"tier {t.name!r} serves inference and is marked preemptible "
                          f"on pool {t.pool!r}, which allows spot capacity", ("spec", "tiers", i, "preemptible"),
                          hint="serve from a pool with `capacityTypes: [on-demand]` (or reserved)")
        elif not preemptible_tier(t) and tr.quota > 0 and t.pool not in pinnable:
            yield rf.diag(E_GUARANTEE, f"tier {t.name!r} must not be interrupted ({_why(t)}) but holds {tr.quota} "
                          f"{tr.resource} of quota on pool {t.pool!r}, whose guaranteed capacity is 0: it allows "
                          "only spot", ("spec", "tiers", i, "pool"),
                          hint="let the pool allow `on-demand` too (the tier's pods are then pinned to it), "
                               "or mark the tier `preemptible: true` if its pods survive an interruption")
        if t.gang is not None and (t.pool not in pinnable or preemptible_tier(t)):  # a pinned gang stays off spot
            yield rf.diag(W_GANG_ON_SPOT, f"tier {t.name!r} runs gangs of {t.gang.nodes_per_job} nodes on pool "
                          f"{t.pool!r}, which allows spot: one interruption restarts the whole job",
                          ("spec", "tiers", i, "gang"), key=True,
                          hint="put the tier on on-demand or reserved capacity, or checkpoint often")
    for pv in rf.pools:
        if pv.name in spot_pools and len(pv.pool.karpenter.instance_types) < SPOT_TO_SPOT_MIN_TYPES:
            yield rf.diag(I_SPOT_CONSOLIDATION, f"pool {pv.name!r} allows spot with "
                          f"{len(pv.pool.karpenter.instance_types)} instance type(s): spot-to-spot consolidation "
                          f"needs {SPOT_TO_SPOT_MIN_TYPES}, so a spot node is never replaced by a cheaper one",
                          pv.path + ("karpenter", "instanceTypes"))


def _why(t) -> str:
    if t.preemptible is False:
        return "preemptible: false"
    if t.gang is not None:
        return "a gang"
    return f"workload {t.workload}" if t.workload else "no workload says it may be"
