"""The capacity report as one self-contained HTML page.

Inline CSS and inline SVG only: no scripts, no external fonts, stylesheets or
images, so the file can be attached to a pull request, mailed or opened from
disk. Every text comes from the spec and is escaped. Deterministic output.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import re
from html import escape
from typing import Any

from gpuplan.capacity import CapacityReport, LayoutUsage, PoolReport, TierReport
from gpuplan.report.tables import (
    _pool_rows,
    _summary,
    _tenant_rows,
    _tier_rows,
    gpus,
    layout_text,
    money,
    ratio,
    tier_status,
)

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f",
           "#bab0ac", "#ff9da7")
_NUMERIC = re.compile(r"^(—|∞|[0-9][0-9,.]*×?|[0-9]+/[0-9]+)$")
# the bar's colour says how full the pool resource is: OK up to 75 % of capacity, FULL up to 100 %,
# WARN oversubscribed within the tier's maxOversubscription, BAD over it
OK, FULL, WARN, BAD, TRACK = "#59a14f", "#edc948", "#f28e2b", "#e15759", "#e8eaee"
FULL_FROM = 0.75

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans","Liberation Sans",sans-serif;
margin:24px 32px;color:#1d2330;background:#fff;font-size:14px;line-height:1.4}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #e3e6eb;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
p.sub{color:#5b6476;margin:0 0 16px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.card{border:1px solid #d9dde4;border-radius:8px;padding:10px 16px;min-width:150px;background:#f8f9fb}
.card b{display:block;font-size:22px}.card span{color:#5b6476;font-size:12px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #dfe3e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f6;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#2f7d32;font-weight:600}.over{color:#c62828;font-weight:700}
.mig{display:flex;flex-wrap:wrap;gap:18px}
.mig figure{margin:0;border:1px solid #e3e6eb;border-radius:8px;padding:8px 10px}
figcaption{font-size:13px;margin-bottom:4px}
pre{background:#f6f8fa;border:1px solid #e3e6eb;padding:8px;overflow-x:auto;font-size:12px}
.plus{color:#2f7d32}.minus{color:#c62828}
.legend{font-size:12px;color:#5b6476}
"""


def _table(head: list[str], rows: list[list[str]], *, status_col: int | None = None) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = ""
            if status_col is not None and i == status_col:
                cls = ' class="ok"' if c == "ok" else ' class="over"'
            elif _NUMERIC.match(c):
                cls = ' class="num"'
            cells.append(f"<td{cls}>{escape(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _bar_colour(t: TierReport) -> str:
    if tier_status(t) != "ok":
        return BAD
    r = t.oversubscription or 0.0
    if r > 1.0:
        return WARN
    return FULL if r > FULL_FROM else OK


def bar_chart(tiers: tuple[TierReport, ...]) -> str:
    """Quota (bar) against capacity (track) per tier, one row each, scaled per row
    so that small MIG tiers stay readable next to large training tiers."""
    label_w, bar_w, row_h, right_w = 190, 560, 34, 250
    width = label_w + bar_w + right_w
    height = 30 + row_h * max(len(tiers), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="quota against capacity per tier" '
           f'font-family="system-ui,DejaVu Sans,sans-serif" font-size="13">']
    out.append(f'<text x="{label_w}" y="16" fill="#5b6476" font-size="12">grey track = capacity of the pool '
               f'resource; bar = quota of the tier (all tiers on that resource, lighter); green up to '
               f'{FULL_FROM:.0%}, yellow to 100 %, orange oversubscribed, red over the limit</text>')
    for i, t in enumerate(tiers):
        y = 26 + i * row_h
        scale_max = max(t.capacity, t.pool_resource_quota, t.capacity * t.max_oversubscription, 1)
        unit = bar_w / scale_max
        cap_w = t.capacity * unit
        group_w = t.pool_resource_quota * unit
        own_w = t.quota * unit
        colour = _bar_colour(t)
        out.append(f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end" fill="#1d2330">{escape(t.name)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 4}" width="{bar_w}" height="20" fill="#fafbfc" stroke="#eceef2"/>')
        out.append(f'<rect x="{label_w}" y="{y + 4}" width="{cap_w:.1f}" height="20" fill="{TRACK}" stroke="#b9bfca"/>')
        if group_w > own_w:
            out.append(f'<rect x="{label_w}" y="{y + 8}" width="{group_w:.1f}" height="12" fill="{colour}" '
                       f'fill-opacity="0.35"/>')
        out.append(f'<rect x="{label_w}" y="{y + 8}" width="{own_w:.1f}" height="12" fill="{colour}"/>')
        if t.max_oversubscription != 1.0:
            lx = label_w + t.capacity * t.max_oversubscription * unit
            out.append(f'<line x1="{lx:.1f}" y1="{y + 1}" x2="{lx:.1f}" y2="{y + 27}" stroke="#1d2330" '
                       f'stroke-dasharray="3,2"/>')
        cap_x = label_w + cap_w
        out.append(f'<line x1="{cap_x:.1f}" y1="{y + 2}" x2="{cap_x:.1f}" y2="{y + 26}" stroke="#1d2330" '
                   f'stroke-width="2"/>')
        res = (t.resource or "no resource").replace("nvidia.com/", "")
        txt = f"{t.quota} / {t.capacity} {res} ({ratio(t.oversubscription)})"
        out.append(f'<text x="{label_w + bar_w + 10}" y="{y + 18}" fill="{BAD if colour == BAD else "#1d2330"}">'
                   f'{escape(txt)}</text>')
    out.append("</svg>")
    return "".join(out)


def profile_colours(pools: tuple[PoolReport, ...]) -> dict[str, str]:
    """One colour per MIG profile for the whole report (profiles in name order), so a profile
    looks the same in every diagram."""
    names = sorted({p for pool in pools for u in pool.layouts for p, *_ in u.placements})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def slice_diagram(gpu: str, u: LayoutUsage, palette: dict[str, str] | None = None) -> str:
    """Which profile sits on which compute and memory slices of one GPU; ``palette``: the report's
    colour of each profile (:func:`profile_colours`)."""
    from gpuplan.mig.diagram import render_diagram
    from gpuplan.mig.solver import Placement

    pl = [Placement(p, s, z, c) for p, s, z, c in u.placements]
    d = render_diagram(gpu, pl)
    cells = max(d.memory_slices, d.compute_slices, 1)
    cell, lab_w, row_h = 58, 72, 40
    width = lab_w + cells * cell + 10
    height = 22 + 2 * (row_h + 6) + 8
    colours: dict[str, str] = {}
    for b in d.boxes:
        colours.setdefault(b.profile, (palette or {}).get(b.profile) or PALETTE[len(colours) % len(PALETTE)])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="MIG slices of {escape(gpu)}" '
           f'font-family="system-ui,DejaVu Sans,sans-serif" font-size="12">']
    for i in range(cells):
        out.append(f'<text x="{lab_w + i * cell + cell / 2}" y="14" text-anchor="middle" fill="#5b6476">{i}</text>')
    for r, (row, exists) in enumerate((("compute", d.compute_slices), ("memory", d.memory_slices))):
        y = 20 + r * (row_h + 6)
        out.append(f'<text x="{lab_w - 8}" y="{y + row_h / 2 + 4}" text-anchor="end" fill="#1d2330">{row}</text>')
        for i in range(exists):
            out.append(f'<rect x="{lab_w + i * cell + 1}" y="{y}" width="{cell - 2}" height="{row_h}" '
                       f'fill="#ffffff" stroke="#c5cad3" stroke-dasharray="4,3"/>')
        for b in d.boxes:
            if b.row != row:
                continue
            x = lab_w + b.start * cell + 1
            w = b.size * cell - 2
            out.append(f'<rect x="{x}" y="{y}" width="{w}" height="{row_h}" rx="4" fill="{colours[b.profile]}" '
                       f'stroke="#1d2330" stroke-width="0.8"/>')
            text = f"{b.label} {b.profile}" if w >= 70 else b.label
            out.append(f'<text x="{x + w / 2}" y="{y + row_h / 2 + 4}" text-anchor="middle" fill="#ffffff" '
                       f'font-weight="600">{escape(text)}</text>')
    out.append("</svg>")
    legend = "".join(f'<span style="display:inline-block;width:10px;height:10px;background:{c};margin:0 4px 0 10px">'
                     f'</span>{escape(p)}' for p, c in colours.items())
    return "".join(out) + f'<div class="legend">{legend}</div>'


def _mig_section(pools: tuple[PoolReport, ...]) -> str:
    palette = profile_colours(pools)
    parts = []
    for p in pools:
        for u in p.layouts:
            if not u.placements:
                continue
            idle_c = u.compute_slices - u.used_compute
            idle_m = u.memory_slices - u.used_memory
            cap = (f"<b>{escape(p.name)}</b> ({escape(p.gpu)}): {escape(layout_text(u.layout))} on {u.gpus} GPUs — "
                   f"idle per GPU: {idle_c} compute, {idle_m} memory slices; pool total {u.idle_compute} / "
                   f"{u.idle_memory}")
            parts.append(f"<figure><figcaption>{cap}</figcaption>{slice_diagram(p.gpu, u, palette)}</figure>")
    if not parts:
        return ""
    return ('<h2>MIG layouts</h2><p class="legend">One GPU per diagram: dashed cells are slices no instance '
            'uses. Memory placements are NVML\'s; the compute row is drawn from each instance\'s memory start '
            '(NVIDIA\'s diagram convention).</p><div class="mig">' + "".join(parts) + "</div>")


def _queue_section(r: CapacityReport) -> str:
    if r.queues is None:
        return ""
    from gpuplan.report.sections import queue_table

    return f"<h2>Queues ({r.queues.engine.title()})</h2>" + _table(*queue_table(r.queues))


def _placement_section(r: CapacityReport) -> str:
    if r.placement is None:
        return ""
    from gpuplan.placement.simulate import matrix_rows

    return ("<h2>Placement (tier × pool)</h2><p>Where each tier's contract pod can land (admitted in a "
            "namespace granted the tier), from the generated NodePools, NodeFeatureRules, quotas and "
            "admission policy.</p>" + _table(*matrix_rows(r.placement)) + _boundary_section(r))


def _spot_section(r: CapacityReport) -> str:
    from gpuplan.report.sections import SPOT_HEADING, spot_section

    spot = spot_section(r)
    if spot is None:
        return ""
    notice, tables = spot
    return f"<h2>{escape(SPOT_HEADING)}</h2><p>{escape(notice)}</p>" + "".join(_table(*t) for t in tables)


def _headroom_section(r: CapacityReport) -> str:
    from gpuplan.report.sections import HEADROOM_HEADING, headroom_section

    headroom = headroom_section(r)
    if headroom is None:
        return ""
    lead, rows = headroom
    return f"<h2>{escape(HEADROOM_HEADING)}</h2><p>{escape(lead)}</p>" + _table(*rows)


def _notes_section(r: CapacityReport) -> str:
    from gpuplan.report.sections import notes

    return "<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes(r)) + "</ul>"


def _stranded_section(r: CapacityReport) -> str:
    if not r.stranded:
        return ""
    from gpuplan.report.tables import stranded_rows

    return ("<h2>Stranded capacity</h2><p>Paid for and grantable by no tier (no tier hands out these "
            "resources).</p>" + _table(*stranded_rows(r)))


def _boundary_section(r: CapacityReport) -> str:
    if r.boundary is None:
        return ""
    from html import escape

    from gpuplan.placement.boundary import boundary_rows, coverage, summary

    out = ("<h2>Tenancy boundary (who can run where)</h2><p>" + escape(summary(r.boundary)) + "</p><ul>"
           + "".join(f"<li>{escape(line)}</li>" for line in coverage(r.boundary)) + "</ul>")
    out += _table(*boundary_rows(r.boundary))
    if r.boundary.breaches:
        out += _table(["namespace", "pod", "gets"], [[x.namespace, x.pod, x.escape] for x in r.boundary.breaches])
    return out


def render_html(r: CapacityReport, *, diff: Any = None, optimise: Any = None, disruption: Any = None) -> str:
    cost = money(r.cost_per_month)
    over = [t for t in r.tiers if tier_status(t) != "ok"]
    body = [
        f"<h1>Capacity: {escape(r.fleet)}</h1>",
        f'<p class="sub">{escape(_summary(r))}</p>',
        '<div class="cards">',
        f'<div class="card"><b>{r.physical_gpus}</b><span>physical GPUs</span></div>',
        f'<div class="card"><b>{escape(gpus(r.granted_gpus))}</b><span>GPU-equivalents granted</span></div>',
        f'<div class="card"><b>{escape(cost)}</b><span>cost per month</span></div>',
        f'<div class="card"><b class="{"over" if over else "ok"}">{len(over)}</b>'
        f'<span>tiers over capacity</span></div>',
        "</div>",
        "<h2>Quota against capacity</h2>",
        bar_chart(r.tiers),
        "<h2>Pools</h2>", _table(*_pool_rows(r)),
        "<h2>Tiers</h2>", _table(*_tier_rows(r), status_col=9),
        "<h2>Tenants</h2>", _table(*_tenant_rows(r)),
        _queue_section(r),
        _placement_section(r),
        _spot_section(r),
        _headroom_section(r),
        _stranded_section(r),
        _mig_section(r.pools),
        _notes_section(r),
    ]
    if disruption is not None:  # first and loudly: above the capacity report
        from gpuplan.report.disruption import render_html as disruption_html

        body.insert(0, disruption_html(disruption))
    if diff is not None:
        from gpuplan.report.diff import render_diff_html

        body.append(render_diff_html(diff))
    if optimise is not None:
        body.append(optimise.html())
    body.append('<p class="legend">Generated by gpuplan plan.</p>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Capacity: {escape(r.fleet)}</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}</style></head><body>\n" + "\n".join(b for b in body if b) + "\n</body></html>\n")
