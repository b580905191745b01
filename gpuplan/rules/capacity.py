"""GP410-GP412, GP434: quotas against physical capacity.

For every pool and resource the capacity is what the device plugin will
publish (GPUs × nodes, MIG instances per layout × nodes, GPUs × replicas;
Karpenter pools at their maxGPUs). The quotas of every tier that hands out
that resource on that pool are summed over all tenants; the total may exceed
the capacity only by the tiers' ``maxOversubscription`` (default 1.0 for every
sharing mode — see ``gpuplan.capacity.max_oversubscription``). When
tiers with different limits share one pool resource, the strictest applies:
a tier that allows no oversubscription is only safe when the total fits.
The arithmetic is the capacity report's (``gpuplan plan``), so the report and
the rules never disagree. GP434 holds the quotas of the tiers that must not be
interrupted to the pool with its ``health.nodesDown`` largest nodes down (the
report's "Failure headroom", ``gpuplan.capacity.Headroom``).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.capacity import Headroom
from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.rules.cascade import POOL_INPUTS

E_OVERSUBSCRIBED = Code(
    "GP410", "quota exceeds capacity", Severity.ERROR,
    "The quotas granted on a tier's resource add up to more than the pool advertises (times the "
    "tier's `maxOversubscription`, default 1.0). The quota promises GPUs that do not exist: "
    "tenants that use their quota find pods Pending with no capacity to scale to.",
    bad="pools:\n  - {name: dev, gpusPerNode: 4, nodes: [a, b], sharing: {mode: time-slicing, replicas: 4}}\n"
        "tenants:\n  - {name: ds, namespaces: [ds], quotas: {ds: {notebooks: 40}}}   # capacity 32",
    good="tiers:\n  - {name: notebooks, pool: dev, maxOversubscription: 1.5}   # an explicit, reviewed overcommit",
    pain="#25 (warn on quota overcommit); #23 kubernetes-sigs/kueue #10108 (capacity-based quotas)",
)
E_NO_CAPACITY = Code(
    "GP411", "quota on a tier with no capacity", Severity.ERROR,
    "A namespace has quota for a tier whose pool advertises none of the tier's resource (no nodes, "
    "a Karpenter pool whose maxGPUs is below one node, GPUs per node unknown): every pod of the "
    "tier stays Pending.",
    bad="pools:\n  - {name: burst, karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 4}}   # one node has 8",
    good="pools:\n  - {name: burst, karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16}}",
    pain="#19 kubernetes-sigs/karpenter #729 (capacity Karpenter cannot provide)",
)
I_UNOFFERED = Code(
    "GP412", "pool capacity that no tier hands out", Severity.WARNING,
    "A pool advertises a resource that no tier offers: nobody can get a quota for it, so it is "
    "paid for and idle (the admission policies refuse GPU resources outside a tier). A MIG layout "
    "change that leaves slices of a profile no tier names is the usual cause. The message and "
    "`gpuplan plan` (\"Stranded capacity\") give its monthly cost.",
    bad="pools:\n  - {name: spare, ...}   # no tier names pool spare",
    good="tiers:\n  - {name: batch, pool: spare}",
)

W_NO_HEADROOM = Code(
    "GP434", "guaranteed grants that need every node up", Severity.WARNING,
    "The quotas of a pool's tiers that must not be interrupted (not preemptible: inference, training and gangs "
    "by default) fit the pool only while all its nodes are up: with its `health.nodesDown` largest nodes down "
    "(default 1 on such a pool) they promise more than the rest advertise, and one failed GPU node leaves "
    "granted pods Pending. Autoscaled pools count at their most nodes, tiers on a pool with an on-demand floor "
    "(`karpenter.guaranteedGPUs`) at the floor's nodes; grants above the whole pool are GP410's. The severity is "
    "the pool's `health.headroom` (`warn` or `error`); `health: {nodesDown: 0}` accepts the risk.",
    bad="pools:\n  - {name: train, gpusPerNode: 8, nodes: [a, b]}\n"
        "tenants:\n  - {name: ml, namespaces: [ml], quotas: {ml: {training: 16}}}   # 8 with one node down",
    good="pools:\n  - {name: train, gpusPerNode: 8, nodes: [a, b, c]}   # 16 with one node down",
)

CODES = (E_OVERSUBSCRIBED, E_NO_CAPACITY, I_UNOFFERED, W_NO_HEADROOM)

# capacity is what the pool's layout and GPU model advertise (gpuplan.rules.cascade)
CONSUMES = {c.code: POOL_INPUTS for c in CODES}


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    report = rf.capacity
    tiers = rf.fleet.spec.tiers
    reported_groups: set[tuple[str, str]] = set()
    group_limit: dict[tuple[str, str | None], float] = {}  # per (pool, resource), computed once
    for r in report.tiers:
        key = (r.pool, r.resource)
        group_limit[key] = min(group_limit.get(key, r.max_oversubscription), r.max_oversubscription)
    for tr in report.tiers:
        if tr.resource is None:
            continue  # GP401
        i = rf.tier_index[tr.name]
        t = tiers[i]
        key = (tr.pool, tr.resource)
        if tr.capacity <= 0:
            # a MIG profile missing from the layout is GP402/GP406; here: a pool with no GPUs
            if tr.quota > 0 and rf.pool_by_name[tr.pool].physical_gpus == 0:
                where = _first_grant_path(rf, tr.name)
                yield rf.diag(E_NO_CAPACITY,
                              f"tier {tr.name!r} has quota {tr.quota} {tr.resource}, but pool {tr.pool!r} "
                              f"advertises none ({tr.capacity_explained or 'no nodes'})",
                              where or ("spec", "tiers", i, "name"),
                              hint="give the pool nodes (or a Karpenter maxGPUs of at least one node), "
                                   "or remove the quota")
            continue
        if key in reported_groups:
            continue
        limit = group_limit[key]
        allowed = tr.capacity * limit
        if tr.pool_resource_quota <= allowed + 1e-9:
            continue
        reported_groups.add(key)
        group = tr.sharing_tiers
        if len(group) == 1:
            who = f"tier {tr.name}"
        else:
            who = f"tiers {', '.join(group)} (pool {tr.pool})"
        ratio = tr.pool_resource_quota / tr.capacity
        limit_txt = "" if limit == 1.0 else f" × maxOversubscription {limit:g} = {allowed:g}"
        msg = (f"quota {tr.pool_resource_quota} {tr.resource} on {who} exceeds capacity {tr.capacity} "
               f"({tr.capacity_explained}){limit_txt}; oversubscribed {ratio:.2f}×")
        # at the tier's own maxOversubscription when it sets one; else at a quota cell, where an
        # oversubscription is made (a quota raised, a grant added): the largest grant on the pool's
        # resource, the later one of equals
        at = (("spec", "tiers", i, "maxOversubscription") if t.max_oversubscription is not None
              else _largest_grant_path(rf, set(group)) or ("spec", "tiers", i, "name"))
        by_tenant: dict[str, int] = {}
        for r in report.tiers:
            if (r.pool, r.resource) == key:
                for g in r.grants:
                    by_tenant[g.tenant] = by_tenant.get(g.tenant, 0) + g.units
        shares = ", ".join(f"{n} {u}" for n, u in sorted(by_tenant.items(), key=lambda x: (-x[1], x[0])))
        yield rf.diag(E_OVERSUBSCRIBED, msg, at,
                      hint=f"granted: {shares}. Lower the quotas, add nodes or replicas, or allow it with "
                           f"`maxOversubscription: {ratio:.2f}` on the tier")

    for st in report.stranded:
        pv = rf.pool_by_name[st.pool]
        worth = "" if st.gpus is None else f" ({st.gpus:g} GPU-eq" + (
            f", {st.cost_per_month:,.2f} a month)" if st.cost_per_month is not None else ")")
        yield rf.diag(I_UNOFFERED,
                      f"pool {st.pool!r} advertises {st.units} {st.resource} that no tier hands out{worth}: "
                      "paid for and grantable by no one",
                      pv.path + ("name",),
                      hint=f"add a tier with `pool: {st.pool}`" if not any(r.pool == st.pool for r in report.tiers)
                      else "add a tier for this resource, or change the pool's layout")

    yield from _headroom(rf)


def _headroom(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    """GP434: per pool resource, the guaranteed grants that fit the whole pool but not the pool
    with its k largest nodes down (unknown capacity: nothing to say)."""
    for h in rf.capacity.headroom:
        if h.fits is not False or h.capacity is None or h.granted > h.capacity:
            continue
        pv = rf.pool_by_name[h.pool]
        tiers = ("tier " if len(h.tiers) == 1 else "tiers ") + ", ".join(h.tiers)
        nodes = f"{h.nodes_down} largest node{'s' if h.nodes_down != 1 else ''}"
        holder = "its on-demand floor" if h.basis == "floor" else "the pool"
        at = pv.path + (("health", "nodesDown") if h.nodes_down_set else ("name",))
        yield rf.diag(W_NO_HEADROOM,
                      f"pool {h.pool}: guaranteed grants of {tiers} ({_amount(h.granted, h.resource)}) need every "
                      f"node up: with the {nodes} down {holder} has {h.capacity_down}",
                      at, severity=Severity.ERROR if h.severity == "error" else Severity.WARNING,
                      hint=f"{_more_nodes(pv, h)}, lower the grants by {h.shortfall}, or set "
                           f"`health: {{nodesDown: 0}}` on pool {h.pool} to accept the risk")


def _amount(units: int, resource: str) -> str:
    return f"{units} GPUs" if resource == "nvidia.com/gpu" else f"{units} {resource}"


def _more_nodes(pv: PoolView, h: Headroom) -> str:
    """How to raise the pool's nodes by what the shortfall needs, in the pool's own field."""
    from gpuplan.provisioning.pools import autoscaled, ceiling_gpus

    extra = -(-(h.shortfall or 0) // h.per_node) if h.per_node else 1
    pool = pv.pool
    gpn = pv.gpus_per_node or 0
    node_s = f"{extra} node{'s' if extra != 1 else ''}"
    if h.basis == "floor" and pool.karpenter is not None and pool.karpenter.guaranteed_gpus is not None:
        return (f"raise the on-demand floor by {node_s} (`guaranteedGPUs: {pool.karpenter.guaranteed_gpus + extra * gpn}`"
                ", and `maxGPUs` above it)")
    if autoscaled(pool):
        ceiling = ceiling_gpus(pool)
        if ceiling is not None:
            return f"raise the pool's ceiling by {node_s} (`maxGPUs: {ceiling + extra * gpn}`)"
    return f"add {node_s} to the pool's `nodes`"


def _largest_grant_path(rf: ResolvedFleet, tiers: set[str]) -> tuple | None:
    """The spec path of the largest quota cell granting any of ``tiers`` (the last of equals)."""
    best: tuple[int, tuple] | None = None
    for i, tn in enumerate(rf.fleet.spec.tenants):
        for ns, per_tier in tn.quotas.items():
            for tier, units in per_tier.items():
                if tier in tiers and units and (best is None or units >= best[0]):
                    best = (units, ("spec", "tenants", i, "quotas", ns, tier))
    return best[1] if best else None


def _first_grant_path(rf: ResolvedFleet, tier: str) -> tuple | None:
    for i, tn in enumerate(rf.fleet.spec.tenants):
        for ns, per_tier in tn.quotas.items():
            if per_tier.get(tier):
                return ("spec", "tenants", i, "quotas", ns, tier)
    return None
