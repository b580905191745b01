"""Karpenter v1 objects for the pools whose nodes Karpenter launches, on AWS or on Azure (AKS
Node Auto Provisioning, :func:`gpuplan.provisioning.pools.karpenter_cloud`).

Per Karpenter pool, under ``pools/<pool>/``:

- ``nodepool.yaml``: ``karpenter.sh/v1`` NodePool — instance types, capacity
  types, the GPU as Karpenter's well-known labels know it, taints, the node
  labels that select the pool's device-plugin and MIG configs, a limit in whole
  nodes (``limits.nodes``), and disruption settings chosen by the pool's workloads;
- ``ec2nodeclass.yaml``: the AWS provider's EC2NodeClass (``gpuplan.lower.karpenter_aws``), or on
  Azure ``aksnodeclass.yaml``: the AKSNodeClass (``gpuplan.lower.karpenter_azure``);
- ``nodeoverlay.yaml`` (``karpenter.nodeOverlay: true``): ``karpenter.sh/v1alpha1``
  NodeOverlay telling Karpenter the shared / MIG resources a node will have.

MIG pools carry one more, permanent taint, ``gpuplan.dev/mig-pool=<pool>``
(:data:`MIG_POOL_TAINT_KEY`): no container, no RBAC. Why that and not a startup
taint: docs/karpenter.md "MIG pools that scale from zero".

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj, object_annotations
from gpuplan.identity import POOL_LABEL, karpenter_pool_taints, nodepool_node_labels
from gpuplan.provisioning.pools import karpenter_cloud
from gpuplan.resolve import GPU, PoolView, ResolvedFleet

NODEPOOL_API = "karpenter.sh/v1"
NODEOVERLAY_API = "karpenter.sh/v1alpha1"
NODECLASS_GROUP = "karpenter.k8s.aws"


# Disruption classes, from the workloads of the tiers on the pool (the most
# careful class wins when tiers differ).
JOBS = "jobs"  # training / batch: a node under a running job is never voluntarily taken away
INTERACTIVE = "interactive"  # notebooks: never consolidated under a user, but may drift
SERVICES = "services"  # inference / no tiers: replicas can move
CONSOLIDATE_AFTER = {JOBS: "10m", INTERACTIVE: "10m", SERVICES: "5m"}
# NodePool terminationGracePeriod of job pools (docs/karpenter.md "Termination grace period").
JOBS_TERMINATION_GRACE = "1h"


# --- helpers other targets may use -------------------------------------------


def karpenter_pools(rf: ResolvedFleet) -> list[PoolView]:
    return [pv for pv in rf.pools if pv.pool.karpenter is not None]


def node_price(pv: PoolView) -> float | None:
    """Price of one node-hour (``pricePerGPUHour`` x GPUs per node), None when unknown."""
    p = pv.pool.price_per_gpu_hour
    return None if p is None else p * (pv.gpus_per_node or 0)


def nodepool_weights(rf: ResolvedFleet) -> dict[str, int]:
    """NodePool ``weight`` per Karpenter pool: the spec's, else by node price, cheapest
    highest (unpriced last). Karpenter tries NodePools by weight, highest first, then by
    name descending (kubernetes-sigs/karpenter@v1.14.1 pkg/utils/nodepool/nodepool.go:157-170,
    OrderByWeight), and launches from the first whose requirements and taints the pod
    fits: with the pool binding taints a tier's pod fits one pool only; the weights decide
    for pods that tolerate several (docs/placement.md)."""
    pools = karpenter_pools(rf)
    ranked = sorted(pools, key=lambda pv: (node_price(pv) is None, node_price(pv) or 0.0, pv.name))
    out = {}
    for i, pv in enumerate(ranked):
        w = pv.pool.karpenter.weight  # type: ignore[union-attr]
        out[pv.name] = w if w is not None else max(1, min(100, len(ranked) - i))
    return out


def disruption_class(rf: ResolvedFleet, pv: PoolView) -> str:
    workloads = {t.workload for t in rf.fleet.spec.tiers if t.pool == pv.name}
    if workloads & {"training", "batch"}:
        return JOBS
    if "interactive" in workloads:
        return INTERACTIVE
    return SERVICES


def termination_grace_period(rf: ResolvedFleet, pv: PoolView) -> str | None:
    """The NodePool's ``terminationGracePeriod``: the spec's, else 1h on job pools, else none.

    Once Karpenter deletes a node (expiry, interruption, a deleted NodeClaim) it drains it
    while PDBs and ``karpenter.sh/do-not-disrupt`` allow; without a grace period it "will
    wait indefinitely for pods to be drained" (kubernetes-sigs/karpenter@v1.14.1
    pkg/apis/v1/nodeclaim.go:57-73), and a job pod marked do-not-disrupt keeps an expired,
    cordoned node billed until the job ends. With it, each pod is deleted at the deadline
    minus its own ``terminationGracePeriodSeconds`` (pkg/controllers/node/termination/
    terminator/terminator.go:170-176): a job that checkpoints on SIGTERM within its grace
    gets all of it. Drift is not sped up on job pools: their ``Drifted`` budget is 0."""
    k = pv.pool.karpenter
    assert k is not None
    if k.termination_grace_period is not None:
        return k.termination_grace_period
    return JOBS_TERMINATION_GRACE if disruption_class(rf, pv) == JOBS else None


def node_limit(pv: PoolView) -> int:
    """maxGPUs as whole nodes: the NodePool's ``limits.nodes``.

    Not ``limits: {nvidia.com/gpu: N}``: Karpenter counts an initialized node's
    advertised capacity against limits (kubernetes-sigs/karpenter@v1.14.1
    pkg/controllers/state/statenode.go:374, ``Node.Status.Capacity`` plus
    ``nodes: 1``), and a MIG node under ``mixed`` or a renamed shared node
    advertises no ``nvidia.com/gpu``, so such a limit never fills. Every node
    counts one ``nodes`` whatever it advertises, and the scheduler refuses a
    launch once ``nodes`` is used up (pkg/controllers/provisioning/scheduling/
    scheduler.go:711)."""
    return pv.node_count or 0


def nodepool_limits(pv: PoolView, nodes: int) -> dict[str, str]:
    """``limits.nodes`` and, beside it, the resources of the same nodes that Karpenter can count.

    Karpenter counts ``nodes`` only for NodeClaims that exist: within one scheduling pass the
    NodeClaims it is creating do not count against it (kubernetes-sigs/karpenter@v1.14.1
    pkg/controllers/provisioning/scheduling/scheduler.go ``subtractMax``: an instance type's
    capacity has no ``nodes``; kubernetes-sigs/karpenter#2915), so one batch of pending pods
    launched past the ceiling on a real Karpenter (tests/e2e/test_karpenter.py: 17 NodeClaims
    for ``limits.nodes: 16``). A resource limit is subtracted per NodeClaim within the pass, from
    the instance type's capacity (NodeOverlays included), and for an initialized node from the
    Node's own capacity (pkg/controllers/state/statenode.go). So each NodePool also limits, to the
    same nodes' worth:

    - every name the pool's NodeOverlay adds (the MIG profiles, ``nvidia.com/gpu.shared``): the
      overlay and the initialized node say the same count, so the limit is exact in and across
      passes (a fully partitioned MIG node under ``mixed`` advertises no ``nvidia.com/gpu``, and a
      limit on that alone let one initialized node plus a batch launch a node past it);
    - ``nvidia.com/gpu``, the physical GPUs of the instance type, where an initialized node
      advertises exactly those or none. Where it advertises another count (time-slicing without
      ``renameByDefault``, MIG ``single``) the overlay states that count, so the limit is the
      overlay's, as for the other names; without an overlay there is no ``nvidia.com/gpu`` limit
      (the node would count more than the instance type said, and the pool would stop short of
      its ceiling): ``nodes`` alone holds it there, as :func:`node_limit` says."""
    out = {"nodes": str(nodes)}
    advertised = pv.node_resources()
    k = pv.pool.karpenter
    for name, count in sorted(overlay_capacity(pv).items()):
        if name != GPU or (k is not None and k.node_overlay):
            out[name] = str(nodes * int(count))
    if pv.gpus_per_node and advertised.get(GPU, pv.gpus_per_node) == pv.gpus_per_node:
        out[GPU] = str(nodes * pv.gpus_per_node)
    return out


# --- NodePool ----------------------------------------------------------------


def node_class_ref(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """The NodePool's ``nodeClassRef``: the pool's EC2NodeClass, or on Azure its AKSNodeClass."""
    if karpenter_cloud(rf.fleet.spec.cluster) == "azure":
        from gpuplan.provisioning import nap

        return {"group": nap.NODECLASS_GROUP, "kind": nap.NODECLASS_KIND, "name": pv.name}
    return {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": pv.name}


def _azure_requirements(pv: PoolView) -> list[dict[str, Any]]:
    """On Azure the VM size decides the GPU model and count (``gpuplan.cloud.aks``, GP637-GP639):
    the size, the capacity type (``spot`` -> Spot VMs), linux/amd64 (every GPU VM size gpuplan
    lists is x86) and the zones."""
    k = pv.pool.karpenter
    assert k is not None
    reqs: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(k.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(k.capacity_types)},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    if k.zones:
        reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(k.zones)})
    return reqs


def _requirements(pv: PoolView, cloud: str = "aws") -> list[dict[str, Any]]:
    from gpuplan.cloud.aws import instance_type

    if cloud == "azure":
        return _azure_requirements(pv)
    k = pv.pool.karpenter
    assert k is not None
    its = [instance_type(n) for n in k.instance_types]
    known = [it for it in its if it is not None]
    reqs: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(k.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(k.capacity_types)},
    ]
    gpu_names = sorted({it.gpu_name for it in known if it.gpu_name})
    if gpu_names:
        reqs.append({"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": gpu_names})
    counts = sorted({it.gpu_count for it in known if it.gpu_count})
    if counts:
        reqs.append({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In",
                     "values": [str(c) for c in counts]})
    mems = sorted({it.gpu_memory_mib for it in known if it.gpu_memory_mib})
    if mems:
        reqs.append({"key": "karpenter.k8s.aws/instance-gpu-memory", "operator": "In",
                     "values": [str(m) for m in mems]})
    arches = sorted({it.arch for it in known}) or ["amd64"]
    reqs.append({"key": "kubernetes.io/arch", "operator": "In", "values": arches})
    reqs.append({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]})
    if k.zones:
        reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(k.zones)})
    return reqs


def _disruption(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    k = pv.pool.karpenter
    assert k is not None
    cls = disruption_class(rf, pv)
    after = k.consolidate_after or CONSOLIDATE_AFTER[cls]
    if cls == JOBS:
        # WhenEmpty: Karpenter never consolidates a node that runs a pod (a
        # training job is not "underutilized", it is running). Drift (a changed
        # AMI pin, userData or NodePool) would drain a node under a running job:
        # blocked; changed settings reach the pool as nodes expire (expireAfter)
        # or when an operator deletes NodeClaims. Empty nodes still go.
        return {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": after,
            "budgets": [
                {"nodes": "0", "reasons": ["Drifted"]},
                {"nodes": "10%"},
            ],
        }
    if cls == INTERACTIVE:
        return {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": after,
            "budgets": [{"nodes": "1"}],
        }
    return {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": after,
        "budgets": [{"nodes": "1"}],
    }


def nodepool(rf: ResolvedFleet, pv: PoolView, guaranteed: bool = False) -> dict[str, Any]:
    """The pool's NodePool; ``guaranteed``: its on-demand floor (``identity.floor_nodes``): the
    same nodes restricted to the guaranteed capacity types, the floor as its node limit, the
    floor taint, one weight above the pool's; the pool's own NodePool keeps the rest of maxGPUs."""
    from gpuplan.identity import CAPACITY_TYPE_LABEL, floor_nodes, guaranteed_nodepool_name, guaranteed_taint
    from gpuplan.units import guaranteed_types

    k = pv.pool.karpenter
    assert k is not None
    floor = floor_nodes(pv)
    reqs = _requirements(pv, karpenter_cloud(rf.fleet.spec.cluster))
    taints = karpenter_pool_taints(pv)
    if guaranteed:
        reqs = [{**r, "values": list(guaranteed_types(pv))} if r["key"] == CAPACITY_TYPE_LABEL else r for r in reqs]
        taints = [*taints, guaranteed_taint(pv.name)]
    tspec: dict[str, Any] = {
        "nodeClassRef": node_class_ref(rf, pv),
        "requirements": reqs,
        "taints": taints,
    }
    tspec["expireAfter"] = k.expire_after
    if (tgp := termination_grace_period(rf, pv)) is not None:
        tspec["terminationGracePeriod"] = tgp
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": nodepool_node_labels(rf, pv)}, "spec": tspec},
        "disruption": _disruption(rf, pv),
        "limits": nodepool_limits(pv, floor if guaranteed else node_limit(pv) - floor),
    }
    weight = nodepool_weights(rf)[pv.name]
    # with weight 100 already, the name decides: "<pool>-guaranteed" sorts first (nodepool.go:166-168)
    spec["weight"] = min(100, weight + 1) if guaranteed else weight
    name = guaranteed_nodepool_name(pv.name) if guaranteed else pv.name
    meta = metadata(rf, name, extra_labels={POOL_LABEL: pv.name},
                    annotations=object_annotations(rf, "NodePool") or None)
    return obj(NODEPOOL_API, "NodePool", meta, spec=spec)


def nodepool_names(pv: PoolView) -> list[str]:
    """The NodePools of a Karpenter pool: its own, and its on-demand floor's when it has one."""
    from gpuplan.identity import floor_nodes, guaranteed_nodepool_name

    return [pv.name] + ([guaranteed_nodepool_name(pv.name)] if floor_nodes(pv) else [])


# --- NodeOverlay ----------------------------------------------------------------


def overlay_capacity(pv: PoolView) -> dict[str, str]:
    """The resources a node of the pool will advertise that Karpenter cannot know from the
    instance type: every name the sharing adds, and ``nvidia.com/gpu`` where the node advertises
    another count than its physical GPUs (MIG ``single``, time-slicing or MPS without
    ``renameByDefault``). An overlay's capacity replaces the instance type's value of the same
    name, well-known extended resources included: only cpu, memory, ephemeral-storage and pods
    are refused (kubernetes-sigs/karpenter@v1.14.1 pkg/apis/v1alpha1/nodeoverlay.go:86, the CRD's
    rule; pkg/cloudprovider/types.go:313-316, ``lo.Assign(i.Capacity, updatedCapacity)``; the same
    since NodeOverlay came in v1.7.0)."""
    res = pv.node_resources()
    return {k: str(v) for k, v in res.items() if k != GPU or v != pv.gpus_per_node}


def nodeoverlay(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any] | None:
    k = pv.pool.karpenter
    assert k is not None
    cap = overlay_capacity(pv)
    if not k.node_overlay or not cap:
        return None
    spec = {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": nodepool_names(pv)},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(k.instance_types)},
        ],
        "capacity": cap,
    }
    meta = metadata(rf, pv.name, extra_labels={POOL_LABEL: pv.name},
                    annotations=object_annotations(rf, "NodeOverlay") or None)
    return obj(NODEOVERLAY_API, "NodeOverlay", meta, spec=spec)


# --- target ------------------------------------------------------------------------


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    out: list[Artifact] = []
    from gpuplan.identity import floor_nodes

    pools = karpenter_pools(rf)
    cluster = rf.fleet.spec.cluster
    if pools and karpenter_cloud(cluster) == "aws" and cluster.aws is None:
        return out  # GP614 is an error: compile stops before lowering
    for pv in pools:
        base = f"pools/{pv.name}"
        floor = floor_nodes(pv)
        out.append(Artifact(path=f"{base}/nodepool.yaml",
                            documents=(nodepool(rf, pv),) + ((nodepool(rf, pv, guaranteed=True),) if floor else ()),
                            description=f"Karpenter NodePool of pool {pv.name}"
                            + (f" (+ its on-demand floor, {floor} node(s))" if floor else "")))
        ov = nodeoverlay(rf, pv)
        if ov is not None:
            out.append(Artifact(path=f"{base}/nodeoverlay.yaml", documents=(ov,),
                                description=f"Karpenter NodeOverlay of pool {pv.name}: shared/MIG capacity "
                                            "(alpha, feature gate nodeOverlay)"))
    return out
