"""The capacity report's sections every format carries in the same words (text, Markdown, HTML):
the spot exposure, the failure headroom and the notes. The formats differ only in how they set them.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

from gpuplan.capacity import CapacityReport
from gpuplan.provisioning.pools import RECLAIM_NOTICE
from gpuplan.report.tables import gpus, money


def reclaim_notice(r: CapacityReport) -> str:
    clouds = sorted({RECLAIM_NOTICE[p.platform] for p in r.pools if p.preemptible and p.platform in RECLAIM_NOTICE})
    if len(clouds) == 1:
        return f"{clouds[0][0]} can reclaim these nodes with {clouds[0][1]}' notice"
    return "the cloud can reclaim these nodes at short notice (" + "; ".join(f"{c}: {t}" for c, t in clouds) + ")"


SPOT_HEADING = "Interruptible capacity (spot)"


def spot_section(r: CapacityReport):
    """(the notice, its tables) of the spot section, None without a pool that allows spot; one
    source for every format."""
    interruptible = _exposure_rows(r)
    if not interruptible:
        return None
    notice = (f"Grants on pools that allow spot: {reclaim_notice(r)} "
              "(GPU-hours a month open to interruption, and their cost at on-demand and at spot prices).")
    return notice, (_split_rows(r), interruptible[0], interruptible[1])


def notes(r: CapacityReport, esc=lambda t: t) -> list[str]:
    """The report's notes, in every format."""
    notes = [f"Units: 1 whole GPU = 1 GPU-eq; a time-sliced/MPS replica = 1/replicas; a MIG instance = its "
             f"memory slices / the GPU's. Cost = GPU-eq × price per GPU-hour × {r.hours_per_month} h."]
    if any(t.over_limit for t in r.tiers):
        notes.append("OVER: quotas on the pool resource exceed capacity × maxOversubscription.")
    capped = [p for p in r.pools if p.autoscaled and p.nodes is not None]
    if capped:
        how = ("Karpenter pools are capped in whole nodes (NodePool `limits.nodes`)"
               if all(p.platform.startswith("karpenter-") for p in capped) else
               "Autoscaled pools are capped in whole nodes (Karpenter: NodePool `limits.nodes`; node groups: "
               "their maximum size)")
        notes.append(how + ", the ceiling that holds whatever the nodes advertise: " + "; ".join(
                         f"{esc(p.name)} ≤ {p.nodes} nodes = {p.physical_gpus} GPUs" for p in capped) + ".")
    if r.placement is not None:
        from gpuplan.placement.simulate import karpenter_order

        order = karpenter_order(r.placement.pools)
        if order:
            notes.append("Karpenter tries NodePools by weight, then name descending: "
                         + ", ".join(f"{esc(p.name)} ({p.weight})" for p in order) + ".")
    return notes


def _exposure_rows(r: CapacityReport) -> tuple[tuple[list[str], list[list[str]]], tuple[list[str], list[list[str]]]] | None:
    from gpuplan.capacity import exposure

    tiers, tenants = exposure(r)
    if not tiers:
        return None

    def hours(x: float | None) -> str:
        return "?" if x is None else f"{x:,.0f}"
    head = ["units", "GPU-h/month exposed", "cost on-demand", "cost spot"]
    return ((["tier", "pool", *head], [[e.name, e.pool, str(e.units), hours(e.gpu_hours_per_month),
                                        money(e.on_demand_cost), money(e.spot_cost)] for e in tiers]),
            (["tenant", *head], [[e.name, str(e.units), hours(e.gpu_hours_per_month), money(e.on_demand_cost),
                                  money(e.spot_cost)] for e in tenants]))


def _split_rows(r: CapacityReport) -> tuple[list[str], list[list[str]]]:
    """The ledger per pool that allows spot: what is granted on guaranteed and on preemptible capacity."""
    from gpuplan.capacity import capacity_split

    return (["pool", "capacity types", "GPU-eq guaranteed (pinned off spot)", "GPU-eq preemptible",
             "on-demand floor (GPUs)"],
            [[p, ", ".join(types), gpus(g), gpus(s), str(f) if f else "—"] for p, types, g, s, f in capacity_split(r)])


HEADROOM_HEADING = "Failure headroom"
HEADROOM_HEAD = ["pool", "resource", "guaranteed tiers", "granted", "nodes down", "capacity", "with nodes down",
                 "fits", "short"]


def headroom_section(r: CapacityReport):
    """(the lead, its table) of the failure headroom, None without a tier that must not be
    interrupted; one source for every format."""
    if not r.headroom:
        return None
    lead = ("Grants of the tiers that must not be interrupted against each pool with its `health.nodesDown` "
            "largest nodes down (default 1 on such a pool; GP434): autoscaled pools at their most nodes, "
            "pools with an on-demand floor at the floor's nodes; ? where the pool's size is not known.")
    return lead, (HEADROOM_HEAD, [_headroom_row(h) for h in r.headroom])


def _headroom_row(h) -> list[str]:
    def known(x) -> str:
        return "?" if x is None else str(x)
    k = str(h.nodes_down) + ("" if h.nodes_down_set else " (default)")
    cap = known(h.capacity) + {"max": " (max)", "floor": " (floor)"}.get(h.basis, "")
    fits = "?" if h.fits is None else ("yes" if h.fits else "NO")
    short = "?" if h.shortfall is None else (str(h.shortfall) if h.shortfall else "—")
    return [h.pool, h.resource, ", ".join(h.tiers), str(h.granted), k, cap, known(h.capacity_down), fits, short]


def queue_table(ledger):
    """The queue table of the engine the ledger is written into: Kueue's ClusterQueues by flavor,
    or Volcano's leaf queues by pool (gpuplan.queueing.volcano.queues)."""
    from gpuplan.queues import queue_rows

    if ledger.engine == "volcano":
        from gpuplan.queueing.volcano.queues import leaf_name

        return queue_rows(ledger, leaf_name)
    return queue_rows(ledger)
