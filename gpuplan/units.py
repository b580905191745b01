"""Units of capacity: what one node of a pool advertises, and what one unit of a
tier is worth in GPUs. Resolve stage: the capacity model (``gpuplan.capacity``),
the Kueue ledger (``gpuplan.queues``) and the rules read these.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.provisioning.pools import (
    autoscaled, ceiling_gpus, karpenter_pool, node_group_pool, node_group_spot, platform_gpu_stack, title)
from gpuplan.spec.models import Mig

if TYPE_CHECKING:
    from gpuplan.resolve import PoolView, ResolvedFleet
    from gpuplan.spec.models import Pool, Tier

HOURS_PER_MONTH = 730
DEFAULT_MAX_OVERSUBSCRIPTION = 1.0


def pool_resources_per_node(pv: "PoolView") -> dict[str, int]:
    """Extended resources one node of the pool advertises. For MIG pools on a
    known GPU the MIG engine decides (a ``<c>c.`` compute-instance profile gets no
    resource under ``mixed``); otherwise ``PoolView.node_resources``."""
    s = pv.pool.sharing
    if isinstance(s, Mig) and pv.gpu is not None and pv.gpu.mig_capable and not platform_gpu_stack(pv.pool):
        from gpuplan.mig.layout import resources_for_node

        try:
            return resources_for_node(pv.gpu, pv.gpu_layouts(), s.strategy)
        except (KeyError, ValueError):  # pragma: no cover - the MIG rules report it
            pass
    return pv.node_resources()


def pool_resources(pv: "PoolView") -> dict[str, int]:
    nodes = pv.node_count or 0
    return {k: v * nodes for k, v in pool_resources_per_node(pv).items()}


def max_oversubscription(tier: "Tier") -> float:
    """The tier's allowed quota / capacity ratio. The default is 1.0 for every
    sharing mode: time-slicing and MPS already oversubscribe the GPU through
    ``replicas`` (capacity counts GPUs × replicas), so a quota above the
    advertised units promises units that no node publishes (pods stay Pending).
    Statistical overcommit (idle notebooks) is a choice the spec states with
    ``maxOversubscription``, where review can see it."""
    return tier.max_oversubscription if tier.max_oversubscription is not None else DEFAULT_MAX_OVERSUBSCRIPTION


def tier_profile(rf: "ResolvedFleet", tier: "Tier") -> str | None:
    """The MIG profile behind a tier's unit (single strategy: the pool's one profile)."""
    pv = rf.tier_pool(tier)
    if pv is None or not isinstance(pv.pool.sharing, Mig):
        return None
    if tier.profile:
        return tier.profile
    profiles = {p for lay in pv.gpu_layouts() if lay for p in lay}
    return next(iter(profiles)) if len(profiles) == 1 else None


def unit_gpu_fraction(rf: "ResolvedFleet", tier: "Tier") -> float | None:
    """How much of one GPU a unit of the tier's resource is (None: unknown)."""
    pv = rf.tier_pool(tier)
    if pv is None:
        return None
    return _fraction(pv, rf.tier_resource(tier), tier_profile(rf, tier))


def resource_gpu_fraction(pv: "PoolView", resource: str) -> float | None:
    """How much of one GPU a unit of ``resource`` on the pool is (None: unknown); a MIG
    resource (``nvidia.com/mig-<profile>``) by its profile."""
    prefix = "nvidia.com/mig-"
    return _fraction(pv, resource, resource[len(prefix):] if resource.startswith(prefix) else None)


def _fraction(pv: "PoolView", resource: str | None, profile: str | None) -> float | None:
    s = pv.pool.sharing
    if s.mode == "exclusive":
        return 1.0
    if s.mode in ("time-slicing", "mps"):
        return 1.0 / s.replicas if s.replicas >= 1 else None
    if resource == "nvidia.com/gpu" and s.strategy == "mixed" and not platform_gpu_stack(pv.pool):
        return 1.0  # a MIG-disabled GPU of a mixed pool (a platform's MIG advertises partitions as GPUs)
    if profile is None or pv.gpu is None or not pv.gpu.mig_capable:
        return None
    from gpuplan.mig.solver import geometry_profile

    p = geometry_profile(pv.gpu, profile)
    if p is None or not pv.gpu.memory_slices:
        return None
    return p.memory_slices / pv.gpu.memory_slices


def capacity_explanation(pv: "PoolView", resource: str) -> str:
    """``2 nodes × 4 GPUs × 4 replicas`` — how the pool's units of ``resource`` come about."""
    nodes = pv.node_count or 0
    gpn = pv.gpus_per_node or 0
    s = pv.pool.sharing
    nodes_txt = f"{nodes} node{'s' if nodes != 1 else ''}"
    if autoscaled(pv.pool):
        what = "Karpenter" if karpenter_pool(pv.pool) else title(pv.pool)
        nodes_txt += f" ({what} maxGPUs {ceiling_gpus(pv.pool)})"
    if s.mode == "exclusive":
        return f"{nodes_txt} × {gpn} GPUs"
    if s.mode in ("time-slicing", "mps"):
        return f"{nodes_txt} × {gpn} GPUs × {s.replicas} replicas"
    per_node = pool_resources_per_node(pv).get(resource, 0)
    return f"{nodes_txt} × {per_node} per node"


# --- capacity types ----------------------------------------------------------------------------

PREEMPTIBLE_WORKLOADS = ("batch", "interactive")
SPOT = "spot"
# purchase options whose capacity the cloud does not take back (a static pool's nodes count too)
GUARANTEED_TYPES = ("on-demand", "reserved")


def preemptible_tier(tier: "Tier") -> bool:
    """Whether the tier may run on spot capacity: its ``preemptible``, else yes for batch and
    interactive tiers without a gang, no for inference, training and gangs."""
    if tier.preemptible is not None:
        return tier.preemptible
    return tier.workload in PREEMPTIBLE_WORKLOADS and tier.gang is None


def class_scoped(rf: "ResolvedFleet", tier: "Tier") -> bool:
    """Whether the tier's grant is a ResourceQuota scoped to its PriorityClass (``gpuplan-tier-<tier>``):
    with ``enforcePriority``, and by default where some tier hands out the same resource on
    another pool. A ResourceQuota counts a resource by name, whatever the pool (kubernetes/kubernetes
    v1.36.3 pkg/quota/v1/evaluator/core/pods.go ``PodUsageFunc``): unscoped, a namespace's units of
    one tier could all be spent on the other tier's pool, where the admission policy lets that
    tier's class run. (A queued tier is held by its Kueue ceiling instead: ``gpuplan.queues``.)"""
    if tier.enforce_priority:
        return True
    cross = rf.__dict__.get("_cross_pool_tiers")
    if cross is None:  # once per fleet: the tiers whose resource is handed out on more than one pool
        pools: dict[str, set[str]] = {}
        for t in rf.fleet.spec.tiers:
            res = rf.tier_resource(t)
            if res is not None:
                pools.setdefault(res, set()).add(t.pool)
        cross = rf.__dict__["_cross_pool_tiers"] = frozenset(
            t.name for t in rf.fleet.spec.tiers if len(pools.get(rf.tier_resource(t) or "", ())) > 1)
    return tier.name in cross


def pool_capacity_types(pool: "Pool") -> tuple[str, ...]:
    """The purchase options a pool's nodes may have, back-end neutral: ``spot`` (the cloud
    reclaims it), ``on-demand``, ``reserved``; ``()`` for static nodes (what they are is not
    gpuplan's to choose: counted as guaranteed, and GP419 refuses static nodes labelled spot).

    The one place a back-end's own fields become these words: a Karpenter pool's
    ``capacityTypes`` today; an autoscaled back-end with a spot switch per node pool maps it
    here too (a spot node pool -> ``("spot",)``, else ``("on-demand",)``), and every reader
    (the capacity ledger, the spot rules, the interruption exposure) follows."""
    k = pool.karpenter
    if k is not None:
        return tuple(k.capacity_types)
    if node_group_pool(pool):  # a node group is all spot VMs or none
        return (SPOT,) if node_group_spot(pool) else ("on-demand",)
    return ()


def preemptible_pool(pv: "PoolView") -> bool:
    """Whether the pool's nodes may be spot (:func:`pool_capacity_types`). When a Karpenter
    NodePool allows several capacity types Karpenter takes reserved capacity first, then spot,
    then on-demand (aws/karpenter-provider-aws v1.14.1
    website/content/en/docs/concepts/nodepools.md:276)."""
    return SPOT in pool_capacity_types(pv.pool)


def guaranteed_types(pv: "PoolView") -> tuple[str, ...]:
    """The pool's purchase options that are not preemptible (``()`` for a spot-only pool and for
    static pools, whose nodes are guaranteed without a type)."""
    return tuple(c for c in pool_capacity_types(pv.pool) if c in GUARANTEED_TYPES)


def guaranteed_capacity_type(pv: "PoolView") -> str | None:
    """The capacity type a pod pins to stay off spot on a pool that allows spot and another type
    (``on-demand``, else ``reserved``): the value of ``karpenter.sh/capacity-type`` it selects;
    None where there is no choice to make (one type, or a node group: all spot or none)."""
    types = pool_capacity_types(pv.pool)
    if SPOT not in types:
        return None
    return next((c for c in GUARANTEED_TYPES if c in types), None)


def capacity_pin(rf: "ResolvedFleet", tier: "Tier") -> str | None:
    """The capacity type a tier's pods must select (nodeSelector ``karpenter.sh/capacity-type``,
    which Karpenter honours when it picks an offering: aws/karpenter-provider-aws v1.14.1
    website/content/en/docs/concepts/scheduling.md:211-219): the guaranteed type of its pool, for
    a tier that must not be interrupted on a pool that also allows spot; None otherwise."""
    pv = rf.pool_by_name.get(tier.pool)
    if pv is None or preemptible_tier(tier):
        return None
    return guaranteed_capacity_type(pv)


def floor_nodes(pv: "PoolView") -> int:
    """Nodes of the pool's on-demand floor (``karpenter.guaranteedGPUs``: a second NodePool,
    ``gpuplan.lower.karpenter``); 0 without one, or with one GP418 refuses."""
    k = pv.pool.karpenter
    gpn = pv.gpus_per_node
    if k is None or k.guaranteed_gpus is None or not gpn or guaranteed_capacity_type(pv) is None:
        return 0
    if k.guaranteed_gpus % gpn or k.guaranteed_gpus >= k.max_gpus:
        return 0
    return k.guaranteed_gpus // gpn
