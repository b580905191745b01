"""The capacity model: what the fleet has, what it promises, and what it costs.

``capacity(rf)`` is a pure function of a resolved fleet. It answers, per pool,
tier and tenant:

- physical GPUs (Karpenter pools at their ``maxGPUs``, rounded down to whole nodes);
- advertised units: the extended resources the device plugin will publish
  (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-<profile>``);
- quota granted per tenant and namespace, and the oversubscription ratio
  (quota / advertised units of the resource on the tier's pool);
- MIG slices the chosen layouts leave idle (compute and memory slices per GPU
  times the GPUs that carry the layout);
- monthly cost at the pool's ``pricePerGPUHour`` (730 hours a month).

Units and cost. Every unit of a resource is worth a fraction of a GPU:
1 for a whole GPU, ``1/replicas`` for a time-sliced or MPS replica, and
``memory slices of the profile / memory slices of the GPU`` for a MIG instance
(memory slices are what a placement consumes: a complete A100 layout always
fills 8 of 8, while a 7th compute slice can be stranded). A unit's monthly
price is that fraction of one GPU-month, so a tier's cost is its granted units'
share of the pool's GPUs, a tenant's cost is the sum over its grants, and what
no tier grants shows up as the pool's unallocated cost.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from gpuplan.provisioning.pools import autoscaled, platform
from gpuplan.spec.models import Mig
from gpuplan.units import (
    HOURS_PER_MONTH, capacity_explanation, floor_nodes, max_oversubscription, pool_capacity_types, pool_resources,
    pool_resources_per_node, preemptible_pool, preemptible_tier, tier_profile, unit_gpu_fraction,
)

if TYPE_CHECKING:
    from gpuplan.queues import QueueLedger
    from gpuplan.resolve import PoolView, ResolvedFleet


# --- the report ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)  # one per tenant namespace and tier: 120,000 in a 20,000-node fleet
class Grant:
    tenant: str
    namespace: str
    tier: str
    resource: str | None
    units: int
    gpus: float | None  # GPU-equivalents
    cost_per_month: float | None


@dataclass(frozen=True)
class LayoutUsage:
    """One distinct MIG layout of a pool and the slices it leaves idle."""

    layout: tuple[tuple[str, int], ...]
    gpus: int  # GPUs of the pool that carry it
    compute_slices: int  # per GPU (the model's)
    memory_slices: int
    used_compute: int  # per GPU
    used_memory: int
    placements: tuple[tuple[str, int, int, int], ...] = ()  # (profile, memory start, memory size, compute slices)

    @property
    def idle_compute(self) -> int:
        return (self.compute_slices - self.used_compute) * self.gpus

    @property
    def idle_memory(self) -> int:
        return (self.memory_slices - self.used_memory) * self.gpus


@dataclass(frozen=True)
class PoolReport:
    name: str
    gpu: str
    gpus_per_node: int | None
    nodes: int | None
    autoscaled: bool
    physical_gpus: int
    sharing: str  # "exclusive", "mig (mixed)", "time-slicing ×4", ...
    resources: tuple[tuple[str, int], ...]  # advertised units of the whole pool
    explanations: tuple[tuple[str, str], ...]  # resource -> "2 nodes × 4 GPUs × 4 replicas"
    quota: tuple[tuple[str, int], ...]  # resource -> units granted on this pool
    layouts: tuple[LayoutUsage, ...]
    price_per_gpu_hour: float | None
    cost_per_month: float | None
    allocated_cost_per_month: float | None  # what the pool's tiers grant
    node_layouts: tuple[tuple[str, tuple[tuple[tuple[str, int], ...] | None, ...]], ...] = ()
    preemptible: bool = False  # its nodes may be spot (reclaimed at short notice: report.render)
    spot_price_per_gpu_hour: float | None = None
    capacity_types: tuple[str, ...] = ()  # units.pool_capacity_types: () for static nodes
    floor_gpus: int = 0  # physical GPUs of its on-demand floor (karpenter.guaranteedGPUs), 0 without one
    platform: str = "static"  # gpuplan.provisioning.pools.platform: who makes its nodes

    @property
    def idle_compute_slices(self) -> int:
        return sum(u.idle_compute for u in self.layouts)

    @property
    def idle_memory_slices(self) -> int:
        return sum(u.idle_memory for u in self.layouts)

    @property
    def unallocated_cost_per_month(self) -> float | None:
        if self.cost_per_month is None or self.allocated_cost_per_month is None:
            return None
        return round(self.cost_per_month - self.allocated_cost_per_month, 2)


@dataclass(frozen=True)
class TierReport:
    name: str
    pool: str
    workload: str | None
    profile: str | None
    resource: str | None
    capacity: int  # units of the resource on the pool (shared with tiers on the same resource)
    capacity_explained: str
    quota: int  # units granted to this tier
    pool_resource_quota: int  # units granted on this pool's resource by all its tiers
    sharing_tiers: tuple[str, ...]  # tiers counted against the same pool resource
    max_oversubscription: float
    unit_gpus: float | None  # GPU-equivalent of one unit
    unit_cost_per_month: float | None
    cost_per_month: float | None
    grants: tuple[Grant, ...]
    priority: int = 0
    preemption: str = "PreemptLowerPriority"
    preemptible: bool = False  # the tier may run on spot capacity (preemptible_tier)

    @property
    def oversubscription(self) -> float | None:
        """Quota of every tier on this pool resource / its capacity."""
        if self.capacity <= 0:
            return None if self.pool_resource_quota == 0 else math.inf
        return self.pool_resource_quota / self.capacity

    @property
    def gpus(self) -> float | None:
        return None if self.unit_gpus is None else self.quota * self.unit_gpus

    @property
    def over_limit(self) -> bool:
        r = self.oversubscription
        return r is not None and r > self.max_oversubscription + 1e-9


@dataclass(frozen=True)
class TenantReport:
    name: str
    namespaces: tuple[str, ...]
    grants: tuple[Grant, ...]

    @property
    def gpus(self) -> float | None:
        vals = [g.gpus for g in self.grants]
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)

    @property
    def cost_per_month(self) -> float | None:
        vals = [g.cost_per_month for g in self.grants if g.units]
        if not vals:
            return 0.0 if self.grants else None
        return None if any(v is None for v in vals) else round(sum(v for v in vals if v is not None), 2)

    def units(self, tier: str) -> int:
        return sum(g.units for g in self.grants if g.tier == tier)


@dataclass(frozen=True)
class Stranded:
    """Paid capacity no tier can grant: a resource a pool advertises that no tier hands out."""

    pool: str
    resource: str
    units: int
    gpus: float | None  # GPU-equivalents
    cost_per_month: float | None


@dataclass(frozen=True)
class CapacityReport:
    fleet: str
    pools: tuple[PoolReport, ...]
    tiers: tuple[TierReport, ...]
    tenants: tuple[TenantReport, ...]
    hours_per_month: int = HOURS_PER_MONTH
    notes: tuple[str, ...] = field(default=())
    queues: "QueueLedger | None" = None  # Kueue's quotas, with spec.queueing (gpuplan.queues)
    placement: Any = None  # gpuplan.placement.simulate.Proof, with tiers
    boundary: Any = None  # gpuplan.placement.boundary.Boundary, with an admission policy
    stranded: tuple[Stranded, ...] = ()
    headroom: tuple["Headroom", ...] = ()  # failure headroom per pool resource of guaranteed tiers

    @property
    def physical_gpus(self) -> int:
        return sum(p.physical_gpus for p in self.pools)

    @property
    def cost_per_month(self) -> float | None:
        vals = [p.cost_per_month for p in self.pools]
        known = [v for v in vals if v is not None]
        return round(sum(known), 2) if known else None

    @property
    def granted_gpus(self) -> float:
        return sum(t.gpus or 0.0 for t in self.tiers)

    def pool(self, name: str) -> PoolReport:
        return next(p for p in self.pools if p.name == name)

    def tier(self, name: str) -> TierReport:
        return next(t for t in self.tiers if t.name == name)

    def tenant(self, name: str) -> TenantReport:
        return next(t for t in self.tenants if t.name == name)


def _money(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _layout_key(layout: dict[str, int] | None) -> tuple[tuple[str, int], ...] | None:
    if layout is None:
        return None
    return tuple(sorted(layout.items(), key=lambda kv: (-_slices_hint(kv[0]), kv[0])))


def _slices_hint(profile: str) -> int:
    from gpuplan.catalog import parse_profile_name

    p = parse_profile_name(profile)
    return p.gpu_slices * 1000 + p.memory_gb if p else 0


def _layout_usages(pv: "PoolView") -> tuple[LayoutUsage, ...]:
    s = pv.pool.sharing
    if not isinstance(s, Mig) or pv.gpu is None or not pv.gpu.mig_capable:
        return ()
    from gpuplan.mig.solver import check_layout, geometry_profile

    gpu = pv.gpu
    nodes = pv.node_count or 0
    counts: dict[tuple[tuple[str, int], ...], int] = {}
    for lay in pv.gpu_layouts():
        key = _layout_key(lay)
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + nodes
    out = []
    for key, n in counts.items():
        used_c = used_m = 0
        for prof, cnt in key:
            gp = geometry_profile(gpu, prof)
            if gp is None:
                continue
            used_c += gp.compute_slices * cnt
            used_m += gp.memory_slices * cnt
        placements: tuple[tuple[str, int, int, int], ...] = ()
        try:
            chk = check_layout(gpu, dict(key))
            if chk.ok:
                placements = tuple((p.profile, p.start, p.size, p.compute_slices) for p in chk.placements)
        except (KeyError, TypeError, ValueError):  # pragma: no cover - reported by the MIG rules
            pass
        out.append(LayoutUsage(key, n, gpu.compute_slices, gpu.memory_slices,
                               min(used_c, gpu.compute_slices), min(used_m, gpu.memory_slices), placements))
    return tuple(out)


def _sharing_text(pv: "PoolView") -> str:
    s = pv.pool.sharing
    if s.mode == "mig":
        return f"mig ({s.strategy})"
    if s.mode in ("time-slicing", "mps"):
        return f"{s.mode} ×{s.replicas}"
    return s.mode


def capacity(rf: "ResolvedFleet") -> CapacityReport:
    """The capacity report of a resolved fleet (pure; deterministic)."""
    spec = rf.fleet.spec
    # quota per tier, with who holds it
    tier_grants: dict[str, list[tuple[str, str, int]]] = {t.name: [] for t in spec.tiers}
    for tn in spec.tenants:
        for ns, per_tier in tn.quotas.items():
            for tier_name, units in per_tier.items():
                if tier_name in tier_grants:
                    tier_grants[tier_name].append((tn.name, ns, units))

    unit_gpus = {t.name: unit_gpu_fraction(rf, t) for t in spec.tiers}
    unit_cost: dict[str, float | None] = {}
    for t in spec.tiers:
        pv = rf.tier_pool(t)
        price = pv.pool.price_per_gpu_hour if pv is not None else None
        frac = unit_gpus[t.name]
        unit_cost[t.name] = None if price is None or frac is None else price * HOURS_PER_MONTH * frac

    def grant(tenant: str, ns: str, tier_name: str, units: int) -> Grant:
        t = rf.tier_by_name[tier_name]
        frac, uc = unit_gpus[tier_name], unit_cost[tier_name]
        return Grant(tenant, ns, tier_name, rf.tier_resource(t), units,
                     None if frac is None else units * frac,
                     None if uc is None else _money(units * uc))

    # quota per (pool, resource)
    group_quota: dict[tuple[str, str | None], int] = {}
    group_tiers: dict[tuple[str, str | None], list[str]] = {}
    for t in spec.tiers:
        key = (t.pool, rf.tier_resource(t))
        group_quota[key] = group_quota.get(key, 0) + sum(u for _, _, u in tier_grants[t.name])
        group_tiers.setdefault(key, []).append(t.name)

    tiers = []
    for t in spec.tiers:
        pv = rf.tier_pool(t)
        res = rf.tier_resource(t)
        cap = pool_resources(pv).get(res, 0) if (pv is not None and res) else 0
        grants = tuple(grant(tn, ns, t.name, u) for tn, ns, u in tier_grants[t.name])
        quota = sum(g.units for g in grants)
        costs = [g.cost_per_month for g in grants]
        cost = None if unit_cost[t.name] is None else _money(sum(c or 0.0 for c in costs))
        uc = unit_cost[t.name]
        tiers.append(TierReport(
            name=t.name, pool=t.pool, workload=t.workload, profile=tier_profile(rf, t), resource=res,
            capacity=cap, capacity_explained=capacity_explanation(pv, res or "") if pv else "",
            quota=quota, pool_resource_quota=group_quota[(t.pool, res)],
            sharing_tiers=tuple(group_tiers[(t.pool, res)]), max_oversubscription=max_oversubscription(t),
            unit_gpus=unit_gpus[t.name], unit_cost_per_month=None if uc is None else round(uc, 4),
            cost_per_month=cost, grants=grants, priority=t.priority, preemption=t.preemption,
            preemptible=preemptible_tier(t),
        ))

    tiers_of_pool: dict[str, list[TierReport]] = {}  # grouped once: linear in pools + tiers
    for tr in tiers:
        tiers_of_pool.setdefault(tr.pool, []).append(tr)

    pools = []
    for pv in rf.pools:
        res = pool_resources(pv)
        quota: dict[str, int] = {}
        allocated: float | None = 0.0
        for tr in tiers_of_pool.get(pv.name, ()):
            if tr.resource is None:
                continue
            quota[tr.resource] = quota.get(tr.resource, 0) + tr.quota
            if tr.cost_per_month is None:
                allocated = None
            elif allocated is not None:
                allocated += tr.cost_per_month
        price = pv.pool.price_per_gpu_hour
        cost = None if price is None else _money(price * HOURS_PER_MONTH * pv.physical_gpus)
        node_layouts: tuple = ()
        if isinstance(pv.pool.sharing, Mig) and pv.pool.nodes:
            per_gpu = tuple(_layout_key(lay) for lay in pv.gpu_layouts())
            node_layouts = tuple((n, per_gpu) for n in pv.pool.nodes)
        pools.append(PoolReport(
            name=pv.name, gpu=pv.gpu.key if pv.gpu is not None else pv.pool.gpu,
            gpus_per_node=pv.gpus_per_node, nodes=pv.node_count, autoscaled=autoscaled(pv.pool),
            physical_gpus=pv.physical_gpus, sharing=_sharing_text(pv), resources=tuple(sorted(res.items())),
            explanations=tuple((r, capacity_explanation(pv, r)) for r in sorted(res)),
            quota=tuple(sorted(quota.items())), layouts=_layout_usages(pv), price_per_gpu_hour=price,
            cost_per_month=cost, allocated_cost_per_month=None if price is None else _money(allocated),
            node_layouts=node_layouts, preemptible=preemptible_pool(pv),
            spot_price_per_gpu_hour=pv.pool.spot_price_per_gpu_hour,
            capacity_types=pool_capacity_types(pv.pool), floor_gpus=floor_nodes(pv) * (pv.gpus_per_node or 0),
            platform=platform(spec.cluster, pv.pool),
        ))

    tenants = []
    for tn in spec.tenants:
        gs = tuple(grant(tn.name, ns, tier_name, u)
                   for ns, per_tier in tn.quotas.items() for tier_name, u in per_tier.items()
                   if tier_name in rf.tier_by_name)
        tenants.append(TenantReport(tn.name, tuple(tn.namespaces), gs))

    report = CapacityReport(rf.fleet.metadata.name, tuple(pools), tuple(tiers), tuple(tenants),
                            stranded=_stranded(rf, pools, tiers), headroom=_headroom(rf, tiers_of_pool))
    if spec.queueing is not None:
        from dataclasses import replace

        from gpuplan.queues import build_ledger

        report = replace(report, queues=build_ledger(rf, report))
    return report


def _stranded(rf: "ResolvedFleet", pools: list[PoolReport], tiers: list[TierReport]) -> tuple[Stranded, ...]:
    """Per pool, the advertised resources no tier hands out, with what they cost."""
    from gpuplan.units import resource_gpu_fraction

    offered = {(t.pool, t.resource) for t in tiers if t.resource}
    out = []
    for pr in pools:
        pv = rf.pool_by_name[pr.name]
        for res, units in pr.resources:
            if units <= 0 or (pr.name, res) in offered:
                continue
            frac = resource_gpu_fraction(pv, res)
            gpus = None if frac is None else units * frac
            cost = None if gpus is None or pr.price_per_gpu_hour is None else \
                _money(gpus * pr.price_per_gpu_hour * HOURS_PER_MONTH)
            out.append(Stranded(pr.name, res, units, gpus, cost))
    return tuple(out)


@dataclass(frozen=True)
class Exposure:
    """A tier's (or tenant's) granted capacity on pools that allow spot."""

    name: str
    pool: str
    units: int
    gpu_hours_per_month: float | None  # GPU-equivalents × hours a month, open to interruption
    on_demand_cost: float | None  # at the pool's pricePerGPUHour
    spot_cost: float | None  # at its spotPricePerGPUHour


def exposure(report: "CapacityReport") -> tuple[list[Exposure], list[Exposure]]:
    """(per tier, per tenant) GPU-hours a month open to interruption, and their cost at
    on-demand and at spot prices: the grants on pools that allow spot."""
    pools = {p.name: p for p in report.pools}
    tiers, tenants = [], {}
    for tr in report.tiers:
        pr = pools.get(tr.pool)
        if pr is None or not pr.preemptible or not tr.quota or not tr.preemptible:
            continue  # a tier that must not be interrupted is pinned off spot (identity.capacity_pin)
        for g in tr.grants:
            if not g.units:
                continue
            hours = None if g.gpus is None else g.gpus * report.hours_per_month
            od = None if hours is None or pr.price_per_gpu_hour is None else _money(hours * pr.price_per_gpu_hour)
            sp = None if hours is None or pr.spot_price_per_gpu_hour is None else _money(hours * pr.spot_price_per_gpu_hour)
            cur = tenants.get(g.tenant)
            tenants[g.tenant] = Exposure(g.tenant, "", (cur.units if cur else 0) + g.units,
                                         _add(cur.gpu_hours_per_month if cur else 0.0, hours),
                                         _add(cur.on_demand_cost if cur else 0.0, od),
                                         _add(cur.spot_cost if cur else 0.0, sp))
        gpus = tr.gpus
        hours = None if gpus is None else gpus * report.hours_per_month
        tiers.append(Exposure(tr.name, tr.pool, tr.quota, hours,
                              None if hours is None or pr.price_per_gpu_hour is None else _money(hours * pr.price_per_gpu_hour),
                              None if hours is None or pr.spot_price_per_gpu_hour is None
                              else _money(hours * pr.spot_price_per_gpu_hour)))
    return tiers, [tenants[k] for k in sorted(tenants)]


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a + b, 2)


def capacity_split(report: "CapacityReport") -> list[tuple[str, tuple[str, ...], float | None, float | None, int]]:
    """Per pool that allows spot: (pool, capacity types, GPU-eq granted to tiers that must not be
    interrupted - on guaranteed capacity, pinned there -, GPU-eq granted to preemptible tiers, the
    GPUs of its on-demand floor: the guaranteed units GP417 holds the first figure to)."""
    out = []
    for pr in report.pools:
        if not pr.preemptible:
            continue
        held = [t for t in report.tiers if t.pool == pr.name and t.resource]
        guaranteed = [t.gpus for t in held if not t.preemptible]
        preemptible = [t.gpus for t in held if t.preemptible]
        out.append((pr.name, pr.capacity_types,
                    None if None in guaranteed else sum(guaranteed),
                    None if None in preemptible else sum(preemptible), pr.floor_gpus))
    return out


# --- failure headroom --------------------------------------------------------------------


@dataclass(frozen=True)
class Headroom:
    """The guaranteed grants of one pool resource against the pool with its k largest nodes down."""

    pool: str
    resource: str
    tiers: tuple[str, ...]  # the tiers that must not be interrupted and hand it out, in spec order
    nodes_down: int  # k: the pool's health.nodesDown, else default_nodes_down
    nodes_down_set: bool  # k is the spec's
    granted: int  # units those tiers grant
    unit_gpus: float | None  # GPU-equivalent of one unit
    nodes: int | None  # nodes counted: static, the most an autoscaled pool may have, its on-demand floor
    basis: str  # "nodes", "max" (an autoscaled pool at its ceiling), "floor" (karpenter.guaranteedGPUs)
    capacity: int | None  # units with every node up; None: not known
    capacity_down: int | None  # units with the k largest nodes down; None: not known
    per_node: int | None  # units of one node
    severity: str = "warn"  # the pool's health.headroom

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_down is None else self.granted <= self.capacity_down

    @property
    def shortfall(self) -> int | None:
        """Units the grants lack with k nodes down (0 when they fit; None: not known)."""
        return None if self.capacity_down is None else max(0, self.granted - self.capacity_down)


def capacity_with_nodes_down(per_node: Iterable[int], k: int) -> int:
    """Units a pool has when the ``k`` nodes with the most units are down: the sum over its nodes
    less the ``k`` largest (every node, when ``k`` is at least their number)."""
    units = list(per_node)
    return sum(units) - (sum(heapq.nlargest(k, units)) if k > 0 else 0)


def default_nodes_down(holds_guaranteed: bool) -> int:
    """``health.nodesDown`` left out: one node for a pool that holds a tier that must not be
    interrupted (``not preemptible_tier``), none for a pool of preemptible tiers only."""
    return 1 if holds_guaranteed else 0


def nodes_down(pv: "PoolView", tiers: Iterable[TierReport]) -> tuple[int, bool]:
    """(k, whether the spec sets it): the pool's ``health.nodesDown``, else
    :func:`default_nodes_down` of whether one of ``tiers`` (the pool's) must not be interrupted."""
    health = pv.pool.health
    if health is not None and health.nodes_down is not None:
        return health.nodes_down, True
    return default_nodes_down(any(not t.preemptible for t in tiers)), False


def _headroom(rf: "ResolvedFleet", tiers_of_pool: dict[str, list[TierReport]]) -> tuple[Headroom, ...]:
    """Per pool (spec order) and resource (sorted): the grants of its guaranteed tiers with its
    ``health.nodesDown`` largest nodes down. A pool's nodes are alike (one GPU model, GPUs per node
    and layout), so every node counts its per-node units; an autoscaled pool counts at its ceiling,
    guaranteed tiers on a pool with an on-demand floor at the floor's nodes, where they are pinned."""
    out = []
    for pv in rf.pools:
        guaranteed = [tr for tr in tiers_of_pool.get(pv.name, ()) if not tr.preemptible and tr.resource]
        if not guaranteed:
            continue
        health = pv.pool.health
        k, k_set = nodes_down(pv, guaranteed)
        floor = floor_nodes(pv)
        nodes = floor or pv.node_count
        basis = "floor" if floor else ("max" if autoscaled(pv.pool) else "nodes")
        known = nodes is not None and pv.gpus_per_node is not None
        per_node_units = pool_resources_per_node(pv) if known else {}
        groups: dict[str, list[TierReport]] = {}
        for tr in guaranteed:
            groups.setdefault(tr.resource, []).append(tr)  # type: ignore[arg-type]
        for res in sorted(groups):
            trs = groups[res]
            per_node = per_node_units.get(res, 0) if known else None
            cap = down = None
            if per_node is not None and nodes is not None:
                cap = per_node * nodes
                down = capacity_with_nodes_down([per_node] * nodes, k)
            out.append(Headroom(
                pool=pv.name, resource=res, tiers=tuple(t.name for t in trs), nodes_down=k, nodes_down_set=k_set,
                granted=sum(t.quota for t in trs), unit_gpus=trs[0].unit_gpus, nodes=nodes if known else None,
                basis=basis, capacity=cap, capacity_down=down, per_node=per_node,
                severity=health.headroom if health is not None else "warn",
            ))
    return tuple(out)
