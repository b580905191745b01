"""Renderers of the capacity report: text, markdown, json.

Deterministic: no timestamps, no environment; the same report gives the same
bytes. HTML lives in ``gpuplan.report.html``.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from gpuplan.capacity import CapacityReport, LayoutUsage, PoolReport
from gpuplan.report.sections import HEADROOM_HEADING, SPOT_HEADING, headroom_section, notes, spot_section
from gpuplan.report.tables import (
    _TENANT_HEAD, _md_table, _one_tenant_rows, _pool_rows, _summary, _tenant_rows, _text_table, _tier_rows, gpus,
    layout_text, money, stranded_rows,
)

FORMATS = ("text", "markdown", "json", "html")


def to_data(r: CapacityReport) -> dict[str, Any]:
    def grant(g) -> dict[str, Any]:
        return {"tenant": g.tenant, "namespace": g.namespace, "tier": g.tier, "resource": g.resource,
                "units": g.units, "gpus": g.gpus, "costPerMonth": g.cost_per_month}

    def lay(u: LayoutUsage) -> dict[str, Any]:
        return {"layout": dict(u.layout), "gpus": u.gpus, "computeSlices": u.compute_slices,
                "memorySlices": u.memory_slices, "usedComputeSlicesPerGPU": u.used_compute,
                "usedMemorySlicesPerGPU": u.used_memory, "idleComputeSlices": u.idle_compute,
                "idleMemorySlices": u.idle_memory,
                "placements": [{"profile": p, "memoryStart": s, "memorySize": z, "computeSlices": c}
                               for p, s, z, c in u.placements]}

    ov = lambda x: None if x is None else ("inf" if math.isinf(x) else round(x, 4))  # noqa: E731
    return {
        "fleet": r.fleet,
        "hoursPerMonth": r.hours_per_month,
        "physicalGPUs": r.physical_gpus,
        "grantedGPUs": round(r.granted_gpus, 4),
        "costPerMonth": r.cost_per_month,
        "pools": [{
            "name": p.name, "gpu": p.gpu, "nodes": p.nodes, "gpusPerNode": p.gpus_per_node,
            "autoscaled": p.autoscaled, "physicalGPUs": p.physical_gpus, "sharing": p.sharing,
            "advertised": dict(p.resources), "capacity": dict(p.explanations), "granted": dict(p.quota),
            "idleComputeSlices": p.idle_compute_slices, "idleMemorySlices": p.idle_memory_slices,
            "migLayouts": [lay(u) for u in p.layouts],
            "pricePerGPUHour": p.price_per_gpu_hour, "costPerMonth": p.cost_per_month,
            "allocatedCostPerMonth": p.allocated_cost_per_month,
            "unallocatedCostPerMonth": p.unallocated_cost_per_month,
        } for p in r.pools],
        "tiers": [{
            "name": t.name, "pool": t.pool, "workload": t.workload, "profile": t.profile,
            "resource": t.resource, "capacity": t.capacity, "capacityExplained": t.capacity_explained,
            "quota": t.quota, "poolResourceQuota": t.pool_resource_quota, "sharedWith": list(t.sharing_tiers),
            "oversubscription": ov(t.oversubscription), "maxOversubscription": t.max_oversubscription,
            "overLimit": t.over_limit, "unitGPUs": t.unit_gpus, "gpus": t.gpus,
            "unitCostPerMonth": t.unit_cost_per_month, "costPerMonth": t.cost_per_month,
            "priority": t.priority, "preemption": t.preemption,
            "grants": [grant(g) for g in t.grants],
        } for t in r.tiers],
        "tenants": [{
            "name": t.name, "namespaces": list(t.namespaces), "gpus": t.gpus,
            "costPerMonth": t.cost_per_month, "grants": [grant(g) for g in t.grants],
        } for t in r.tenants],
        "headroom": [{
            "pool": h.pool, "resource": h.resource, "tiers": list(h.tiers), "nodesDown": h.nodes_down,
            "nodesDownSet": h.nodes_down_set, "granted": h.granted, "nodes": h.nodes, "counted": h.basis,
            "capacity": h.capacity, "capacityNodesDown": h.capacity_down, "fits": h.fits, "shortfall": h.shortfall,
        } for h in r.headroom],
    }


def render_json(r: CapacityReport, diff=None, optimise=None, disruption=None) -> str:
    data = to_data(r)
    if r.queues is not None:
        from gpuplan.queues import queues_data

        data["queues"] = queues_data(r.queues)
    if diff is not None:
        from gpuplan.report.diff import diff_data

        data["diff"] = diff_data(diff)
    if disruption is not None:
        from gpuplan.report.disruption import to_data as disruption_data

        data["disruptive"] = disruption_data(disruption)
    if optimise is not None:
        data["optimise"] = optimise.to_data()
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


# --- tables -------------------------------------------------------------------------


def _diagrams(r: CapacityReport) -> list[tuple[PoolReport, LayoutUsage, str]]:
    from gpuplan.mig.diagram import render_diagram
    from gpuplan.mig.solver import Placement

    out = []
    for p in r.pools:
        for u in p.layouts:
            if not u.placements:
                continue
            pl = [Placement(prof, s, z, c) for prof, s, z, c in u.placements]
            try:
                out.append((p, u, render_diagram(p.gpu, pl).text))
            except KeyError:  # pragma: no cover - unknown GPUs have no layouts
                continue
    return out


# Above this many tenant rows the generated CAPACITY.md shows aggregates and the
# largest tenants; each tenant's rows go to tenants/<tenant>/CAPACITY.md.
LARGE_TENANT_ROWS = 500
TOP_TENANTS = 20


def tenant_row_count(r: CapacityReport) -> int:
    return sum(max(1, len(tn.grants)) + 1 for tn in r.tenants)  # as _tenant_rows counts them


def _tenant_summary(r: CapacityReport, table: Callable) -> str:
    top = sorted(r.tenants, key=lambda tn: (-tn.gpus, tn.name))[:TOP_TENANTS]
    ns = sum(len(tn.namespaces) for tn in r.tenants)
    rows = [[tn.name, str(len(tn.namespaces)), gpus(tn.gpus), money(tn.cost_per_month)] for tn in top]
    return (f"{len(r.tenants)} tenants, {ns} namespaces, {sum(len(tn.grants) for tn in r.tenants)} grants. "
            f"The {len(top)} largest by GPU-equivalents below; every tenant's grants per namespace in "
            "`tenants/<tenant>/CAPACITY.md`.\n\n"
            + table(["tenant", "namespaces", "GPU-eq", "cost/month"], rows))


def tenant_markdown(tn) -> str:
    """One tenant's rows of the Tenants table (the detail file of a large fleet)."""
    from gpuplan.report.markdown import md_text

    return f"# Capacity: tenant {md_text(tn.name)}\n\n" + _md_table(_TENANT_HEAD, _one_tenant_rows(tn)) + "\n"


def _same(text: str) -> str:
    return text


def _sections(r: CapacityReport, table: Callable, heading: Callable, code: Callable,
              tenant_details: bool = True, esc: Callable[[str], str] = _same) -> list[str]:
    """The report's parts; ``esc`` makes a value from the spec inert in the format
    (Markdown: ``gpuplan.report.markdown.md_text``), ``table`` does so for its cells."""
    tenants = table(*_tenant_rows(r)) if tenant_details else _tenant_summary(r, table)
    parts = [heading(1, f"Capacity: {esc(r.fleet)}"), _summary(r), heading(2, "Pools"), table(*_pool_rows(r)),
             heading(2, "Tiers"), table(*_tier_rows(r)), heading(2, "Tenants"), tenants]
    if r.queues is not None:
        from gpuplan.report.sections import queue_table

        parts += [heading(2, f"Queues ({r.queues.engine.title()})"), table(*queue_table(r.queues))]
    if r.placement is not None:
        from gpuplan.placement.simulate import matrix_rows

        parts += [heading(2, "Placement (tier x pool)"), table(*matrix_rows(r.placement))]
    if r.boundary is not None:
        from gpuplan.placement.boundary import boundary_rows, coverage, summary

        parts += [heading(2, "Tenancy boundary (who can run where)"), esc(summary(r.boundary)),
                  "\n".join(f"- {esc(line)}" for line in coverage(r.boundary)), table(*boundary_rows(r.boundary))]
        if r.boundary.breaches:
            parts.append(table(["namespace", "pod", "gets"], [[x.namespace, x.pod, x.escape]
                                                              for x in r.boundary.breaches]))
    spot = spot_section(r)
    if spot is not None:
        notice, tables = spot
        parts += [heading(2, SPOT_HEADING), notice, *(table(*t) for t in tables)]
    headroom = headroom_section(r)
    if headroom is not None:
        lead, rows = headroom
        parts += [heading(2, HEADROOM_HEADING), lead, table(*rows)]
    if r.stranded:
        parts += [heading(2, "Stranded capacity"),
                  "Paid for and grantable by no tier (no tier hands out these resources):",
                  table(*stranded_rows(r))]
    diagrams = _diagrams(r)
    if diagrams:
        parts.append(heading(2, "MIG layouts"))
        for p, u, text in diagrams:
            parts.append(f"{esc(p.name)}: {esc(layout_text(u.layout))} on {u.gpus} GPUs — idle per GPU: "
                         f"{u.compute_slices - u.used_compute} compute, {u.memory_slices - u.used_memory} memory "
                         f"slices (pool total {u.idle_compute}/{u.idle_memory})")
            parts.append(code(text))
    parts.append(heading(2, "Notes"))
    parts.extend(notes(r, esc))
    return parts


def render_text(r: CapacityReport, diff=None, optimise=None, disruption=None) -> str:
    def heading(level: int, title: str) -> str:
        return title + "\n" + ("=" if level == 1 else "-") * len(title)

    parts = _sections(r, _text_table, heading, lambda t: t)
    if disruption is not None:  # first and loudly: before the capacity report
        from gpuplan.report.disruption import render_text as disruption_text

        parts.insert(0, disruption_text(disruption).rstrip("\n"))
    if diff is not None:
        from gpuplan.report.diff import render_diff_text

        parts.append(render_diff_text(diff))
    if optimise is not None:
        parts.append(optimise.text())
    return "\n\n".join(parts) + "\n"


def render_markdown(r: CapacityReport, diff=None, optimise=None, disruption=None, *,
                    tenant_details: bool = True) -> str:
    def heading(level: int, title: str) -> str:
        return "#" * level + " " + title

    from gpuplan.report.markdown import md_fence, md_text

    parts = _sections(r, _md_table, heading, md_fence, tenant_details, md_text)
    if disruption is not None:  # first and loudly: before the capacity report
        from gpuplan.report.disruption import render_markdown as disruption_markdown

        parts.insert(0, disruption_markdown(disruption).rstrip("\n"))
    if diff is not None:
        from gpuplan.report.diff import render_diff_markdown

        parts.append(render_diff_markdown(diff))
    if optimise is not None:
        parts.append(optimise.markdown())
    return "\n\n".join(parts) + "\n"


def render(fmt: str, r: CapacityReport, *, diff=None, optimise=None, disruption=None) -> str:
    if fmt == "text":
        return render_text(r, diff, optimise, disruption)
    if fmt == "markdown":
        return render_markdown(r, diff, optimise, disruption)
    if fmt == "json":
        return render_json(r, diff, optimise, disruption)
    if fmt == "html":
        from gpuplan.report.html import render_html

        return render_html(r, diff=diff, optimise=optimise, disruption=disruption)
    raise ValueError(f"unknown report format {fmt!r}")


