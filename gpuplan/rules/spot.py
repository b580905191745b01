"""GP413-GP419, GP431: preemptible (spot) capacity against the tiers that may use it.

A Karpenter pool that allows ``spot`` guarantees no unit: with several capacity types
allowed, Karpenter takes reserved capacity first, then spot, then on-demand
(aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/nodepools.md:276),
and EC2 reclaims a spot instance with a two-minute notice. So the quotas of tiers that
are not preemptible (``gpuplan.units.preemptible_tier``) must sit on pools that do not
allow spot; gangs lose the whole job with one node; and spot-to-spot consolidation, the
only way Karpenter moves a spot node to a cheaper one, needs at least 15 instance types
(website/content/en/docs/concepts/disruption.md:122,130) and the SpotToSpotConsolidation
feature gate. On a pool of spot and on-demand the on-demand floor (``karpenter.guaranteedGPUs``,
a NodePool of its own: docs/capacity.md) holds the guaranteed units those quotas must fit
(GP417, GP418, GP431); static nodes labelled spot contradict a pool that counts them as
guaranteed (GP419).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet
from gpuplan.rules.cascade import POOL_INPUTS

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
E_FLOOR_FIT = Code(
    "GP417", "quotas of tiers that must not be interrupted exceed the on-demand floor", Severity.ERROR,
    "On a pool that allows spot and on-demand, `karpenter.guaranteedGPUs` is the capacity held for the tiers "
    "that must not be interrupted: a NodePool `<pool>-guaranteed` of only the guaranteed types, with that many "
    "GPUs as its node limit, which only their pods tolerate. Their quotas must fit it (like GP410 against the "
    "whole pool): above it, their pods compete with spot nodes for the pool's own node limit, and spot nodes "
    "launched for preemptible tiers can hold all of it.",
    bad="karpenter: {capacityTypes: [spot, on-demand], maxGPUs: 32, guaranteedGPUs: 8}\n"
        "quotas: {serve: {serving: 16}}   # serving is inference: not preemptible",
    good="karpenter: {capacityTypes: [spot, on-demand], maxGPUs: 32, guaranteedGPUs: 16}",
)
E_FLOOR_INVALID = Code(
    "GP418", "on-demand floor that cannot be built", Severity.ERROR,
    "`karpenter.guaranteedGPUs` needs a pool that allows `spot` and a guaranteed type (`on-demand` or "
    "`reserved`), a whole number of nodes, and less than `maxGPUs` (the rest is the pool's own NodePool, "
    "where spot runs). Its NodePool is named `<pool>-guaranteed`, so no other pool may have that name.",
    bad="karpenter: {instanceTypes: [g6e.12xlarge], capacityTypes: [spot, on-demand], maxGPUs: 32, "
        "guaranteedGPUs: 6}   # 4 GPUs a node",
    good="karpenter: {instanceTypes: [g6e.12xlarge], capacityTypes: [spot, on-demand], maxGPUs: 32, "
         "guaranteedGPUs: 8}",
)
E_STATIC_SPOT = Code(
    "GP419", "spot capacity in a static pool", Severity.ERROR,
    "A static pool lists its nodes by name, and gpuplan counts them as guaranteed capacity. Its labels say the "
    "nodes are spot (`karpenter.sh/capacity-type: spot`, EKS managed node groups' "
    "`eks.amazonaws.com/capacityType: SPOT`, GKE's `cloud.google.com/gke-spot` / `gke-preemptible: \"true\"`, "
    "AKS's `kubernetes.azure.com/scalesetpriority: spot`): the cloud reclaims such a node, and its replacement "
    "comes back under another name that the pool does not list. Describe spot capacity as an autoscaled pool "
    "(Karpenter `capacityTypes: [spot]`), where replacements are part of the pool and the ledger counts them as "
    "preemptible.",
    bad="pools:\n  - {name: dev, nodes: [ip-10-0-1-7], gpusPerNode: 4, labels: {eks.amazonaws.com/capacityType: SPOT}}",
    good="pools:\n  - {name: dev, karpenter: {instanceTypes: [g6e.12xlarge], capacityTypes: [spot], maxGPUs: 8}}",
)
W_NO_FLOOR = Code(
    "GP431", "no on-demand floor for tiers that must not be interrupted", Severity.WARNING,
    "The pool allows spot and on-demand, and tiers that must not be interrupted hold quota on it: their pods "
    "select on-demand nodes, but one NodePool limit (`limits.nodes`) counts spot and on-demand nodes alike, so "
    "spot nodes launched for preemptible tiers can use all of it and leave their pods Pending. Set "
    "`karpenter.guaranteedGPUs` to hold their share on on-demand capacity.",
    bad="karpenter: {capacityTypes: [spot, on-demand], maxGPUs: 32}   # + an inference tier with quota",
    good="karpenter: {capacityTypes: [spot, on-demand], maxGPUs: 32, guaranteedGPUs: 16}",
)

# Node labels that say a node is spot: kubernetes-sigs/karpenter v1.14.1 pkg/apis/v1/labels.go:34,45;
# EKS managed node groups (docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html, capacity
# types); GKE Spot and preemptible VMs (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms);
# AKS Spot node pools (MicrosoftDocs/azure-aks-docs articles/aks/spot-node-pool.md:41).
SPOT_NODE_LABELS = {
    "karpenter.sh/capacity-type": "spot",
    "eks.amazonaws.com/capacityType": "SPOT",
    "cloud.google.com/gke-spot": "true",
    "cloud.google.com/gke-preemptible": "true",
    "kubernetes.azure.com/scalesetpriority": "spot",
}

CODES = (E_GUARANTEE, E_INFERENCE_PREEMPTIBLE, W_GANG_ON_SPOT, I_SPOT_CONSOLIDATION, E_FLOOR_FIT, E_FLOOR_INVALID,
         E_STATIC_SPOT, W_NO_FLOOR)

# the floor is measured in the units the pool's layout advertises (gpuplan.rules.cascade)
CONSUMES = {E_FLOOR_FIT.code: POOL_INPUTS}


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
                          hint=("let the pool allow `on-demand` too (the tier's pods are then pinned to it), "
                                if rf.pool_by_name[t.pool].pool.karpenter is not None else
                                "put the tier on a node pool of on-demand VMs (`spot: false`), ")
                               + "or mark the tier `preemptible: true` if its pods survive an interruption")
        if t.gang is not None and (t.pool not in pinnable or preemptible_tier(t)):  # a pinned gang stays off spot
            yield rf.diag(W_GANG_ON_SPOT, f"tier {t.name!r} runs gangs of {t.gang.nodes_per_job} nodes on pool "
                          f"{t.pool!r}, which allows spot: one interruption restarts the whole job",
                          ("spec", "tiers", i, "gang"), key=True,
                          hint="put the tier on on-demand or reserved capacity, or checkpoint often")
    yield from _floors(rf, pinnable)
    from gpuplan.provisioning.pools import static_nodes

    for pv in rf.pools:
        if static_nodes(pv.pool):
            for key, value in pv.pool.labels.items():
                if SPOT_NODE_LABELS.get(key) == value:
                    yield rf.diag(E_STATIC_SPOT, f"static pool {pv.name!r} is labelled {key}: {value}: spot nodes, "
                                  "which the cloud reclaims and replaces under other names, in a pool that lists its "
                                  "nodes and counts them as guaranteed", pv.path + ("labels", key),
                                  hint="describe the spot nodes as an autoscaled pool (karpenter: {capacityTypes: "
                                       "[spot]}), or drop the label if the nodes are on-demand")
    for pv in rf.pools:
        if pv.name in spot_pools and pv.pool.karpenter is not None \
                and len(pv.pool.karpenter.instance_types) < SPOT_TO_SPOT_MIN_TYPES:
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


def _floors(rf: ResolvedFleet, pinnable: set[str]) -> Iterable[Diagnostic]:
    """GP417/GP418/GP431: the on-demand floor of each pool (identity.floor_nodes)."""
    from gpuplan.identity import GUARANTEED_SUFFIX, floor_nodes
    from gpuplan.units import pool_resources_per_node, preemptible_tier

    names = {pv.name for pv in rf.pools}
    report = rf.capacity
    for pv in rf.pools:
        k = pv.pool.karpenter
        if k is None:
            continue
        at = pv.path + ("karpenter", "guaranteedGPUs")
        held = [tr for tr in report.tiers if tr.pool == pv.name and tr.resource and tr.quota > 0
                and not preemptible_tier(rf.tier_by_name[tr.name])]
        if k.guaranteed_gpus is None:
            if pv.name in pinnable and held:
                yield rf.diag(W_NO_FLOOR, f"pool {pv.name!r} allows spot and on-demand; tiers that must not be "
                              f"interrupted ({', '.join(tr.name for tr in held)}) hold quota on it, but nothing keeps "
                              f"its node limit ({pv.node_count} nodes) from filling with spot nodes",
                              pv.path + ("karpenter", "capacityTypes"),
                              hint="set karpenter.guaranteedGPUs to the GPUs those tiers need on on-demand capacity")
            continue
        gpn = pv.gpus_per_node
        why = None
        if pv.name not in pinnable:
            why = "it needs capacityTypes with spot and on-demand (or reserved)"
        elif gpn and k.guaranteed_gpus % gpn:
            why = f"it is not a whole number of nodes ({gpn} GPUs each)"
        elif k.guaranteed_gpus >= k.max_gpus:
            why = f"it leaves none of maxGPUs {k.max_gpus} to spot (drop spot from capacityTypes instead)"
        elif pv.name + GUARANTEED_SUFFIX in names:
            why = f"its NodePool would be named {pv.name + GUARANTEED_SUFFIX!r}, the name of another pool"
        if why is not None:
            yield rf.diag(E_FLOOR_INVALID, f"pool {pv.name!r}: guaranteedGPUs {k.guaranteed_gpus} cannot be an "
                          f"on-demand floor: {why}", at)
            continue
        nodes = floor_nodes(pv)
        per_node = pool_resources_per_node(pv)
        for res in dict.fromkeys(tr.resource for tr in held):
            mine = [tr for tr in held if tr.resource == res]
            quota = sum(tr.quota for tr in mine)
            units = nodes * per_node.get(res, 0)
            limit = min(tr.max_oversubscription for tr in mine)
            if quota <= units * limit + 1e-9:
                continue
            limit_txt = "" if limit == 1.0 else f" × maxOversubscription {limit:g}"
            who = f"tier {mine[0].name} must not be interrupted and holds" if len(mine) == 1 else \
                f"tiers {', '.join(tr.name for tr in mine)} must not be interrupted and hold"
            need = _nodes_for(quota, per_node.get(res, 0)) * (gpn or 0)
            yield rf.diag(E_FLOOR_FIT, f"{who} {quota} {res} on pool {pv.name!r}, above its on-demand floor of {units} "
                          f"({nodes} node(s) × {per_node.get(res, 0)}, guaranteedGPUs {k.guaranteed_gpus}){limit_txt}",
                          at, hint=f"raise guaranteedGPUs to at least {need} or lower those quotas")


def _nodes_for(units: int, per_node: int) -> int:
    return -(-units // max(1, per_node))  # whole nodes, rounded up
