"""Cells and tables of the capacity report, shared by its text, Markdown and HTML
renderers and by the diff against a base spec.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import math

from gpuplan.capacity import CapacityReport, PoolReport, TierReport
from gpuplan.report.markdown import md_text


def money(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def ratio(x: float | None) -> str:
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:.2f}×"


def gpus(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:g}" if abs(x - round(x)) < 1e-9 else f"{x:.2f}"


def layout_text(layout) -> str:
    return "{" + ", ".join(f"{p}: {n}" for p, n in layout) + "}"


def pool_shape(p: PoolReport) -> str:
    nodes = "?" if p.nodes is None else str(p.nodes)
    gpn = "?" if p.gpus_per_node is None else str(p.gpus_per_node)
    return f"{nodes} × {gpn}" + (" (max)" if p.autoscaled else "")


def units_text(items) -> str:
    return ", ".join(f"{n} {r}" for r, n in items) or "—"


def tier_status(t: TierReport) -> str:
    if t.resource is None:
        return "no resource"
    if t.capacity <= 0 and t.quota > 0:
        return "NO CAPACITY"
    if t.over_limit:
        return "OVER"
    return "ok"


# --- data ---------------------------------------------------------------------------


def _pool_rows(r: CapacityReport) -> tuple[list[str], list[list[str]]]:
    head = ["pool", "gpu", "nodes × gpus", "physical", "sharing", "advertised", "granted", "idle slices c/m",
            "cost/month"]
    rows = []
    for p in r.pools:
        idle = f"{p.idle_compute_slices}/{p.idle_memory_slices}" if p.layouts else "—"
        rows.append([p.name, p.gpu, pool_shape(p), str(p.physical_gpus), p.sharing, units_text(p.resources),
                     units_text(p.quota), idle, money(p.cost_per_month)])
    return head, rows


def _tier_rows(r: CapacityReport) -> tuple[list[str], list[list[str]]]:
    head = ["tier", "pool", "resource", "quota", "capacity", "ratio", "limit", "GPU-eq", "cost/month", "status"]
    rows = []
    for t in r.tiers:
        rows.append([t.name, t.pool, t.resource or "—", str(t.quota), str(t.capacity), ratio(t.oversubscription),
                     f"{t.max_oversubscription:g}×", gpus(t.gpus), money(t.cost_per_month), tier_status(t)])
    return head, rows


_TENANT_HEAD = ["tenant", "namespace", "tier", "units", "GPU-eq", "cost/month"]


def _tenant_rows(r: CapacityReport) -> tuple[list[str], list[list[str]]]:
    return _TENANT_HEAD, [row for tn in r.tenants for row in _one_tenant_rows(tn)]


def _one_tenant_rows(tn) -> list[list[str]]:
    rows = []
    if not tn.grants:
        rows.append([tn.name, ", ".join(tn.namespaces), "—", "0", "0", money(0.0)])
    for g in tn.grants:
        rows.append([tn.name, g.namespace, g.tier, str(g.units), gpus(g.gpus), money(g.cost_per_month)])
    rows.append([f"{tn.name} total", "", "", "", gpus(tn.gpus), money(tn.cost_per_month)])
    return rows


def _text_table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
           "  ".join("-" * w for w in widths)]
    for row in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(out)


def _md_cell(c: str) -> str:
    return md_text(c, cell=True)


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in rows:
        out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    return "\n".join(out)


def _summary(r: CapacityReport) -> str:
    cost = r.cost_per_month
    return (f"{r.physical_gpus} physical GPUs in {len(r.pools)} pools; quotas grant {gpus(r.granted_gpus)} "
            f"GPU-equivalents; cost {money(cost)} per month at {r.hours_per_month} h/month"
            + ((" (Karpenter pools at their maxGPUs)" if all(p.platform.startswith("karpenter-") for p in auto)
                else " (autoscaled pools at their maxGPUs)") if (auto := [p for p in r.pools if p.autoscaled]) else ""))


STRANDED_HEAD = ["pool", "resource", "units", "GPU-eq", "cost/month"]


def stranded_rows(r: CapacityReport) -> tuple[list[str], list[list[str]]]:
    """The "Stranded capacity" table of every report format."""
    return STRANDED_HEAD, [[s.pool, s.resource, str(s.units), gpus(s.gpus), money(s.cost_per_month)]
                           for s in r.stranded]

