"""`gpuplan plan --base OLD`: what a spec change does to capacity and cost.

Per pool, tier and tenant: old -> new and the delta; nodes whose MIG state
changes (mig-manager drains them before it reconfigures the GPUs); tiers whose
priority or preemption changes (PriorityClass ``value`` and
``preemptionPolicy`` are immutable: GitOps must replace the object).

Stage: report (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from gpuplan.capacity import CapacityReport, capacity

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

Layouts = tuple  # per GPU: tuple of (profile, count) pairs, or None (MIG disabled)


@dataclass(frozen=True)
class Metric:
    label: str
    old: float | None
    new: float | None

    @property
    def delta(self) -> float | None:
        if self.old is None or self.new is None:
            return None
        return round(self.new - self.old, 4)

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass(frozen=True)
class Row:
    kind: str  # pool | tier | tenant
    name: str
    status: str  # added | removed | changed | same
    metrics: tuple[Metric, ...]
    note: str = ""


@dataclass(frozen=True)
class Drain:
    node: str
    pool: str
    gpus: tuple[int, ...]  # GPU indices whose MIG state changes
    old: Layouts
    new: Layouts


@dataclass(frozen=True)
class CapacityDiff:
    old_fleet: str
    new_fleet: str
    rows: tuple[Row, ...]
    drains: tuple[Drain, ...]
    pool_notes: tuple[str, ...]  # Karpenter MIG pools whose layout changes
    priority_changes: tuple[tuple[str, str, str], ...]  # (tier, old, new)
    cost: Metric
    gpus: Metric

    def of(self, kind: str) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.kind == kind)

    def row(self, kind: str, name: str) -> Row:
        return next(r for r in self.rows if r.kind == kind and r.name == name)


def _key(layout: dict[str, int] | None):
    return None if layout is None else tuple(sorted(layout.items()))


def _rows(kind: str, old: dict[str, tuple[Metric, ...]], new: dict[str, tuple[Metric, ...]],
          labels: tuple[str, ...], notes: dict[str, str] | None = None) -> list[Row]:
    out = []
    for name in list(old) + [n for n in new if n not in old]:
        o = dict(zip(labels, (m.new for m in old[name]))) if name in old else {}
        n = dict(zip(labels, (m.new for m in new[name]))) if name in new else {}
        metrics = tuple(Metric(lab, o.get(lab), n.get(lab)) for lab in labels)
        status = "added" if name not in old else "removed" if name not in new else (
            "changed" if any(m.changed for m in metrics) else "same")
        out.append(Row(kind, name, status, metrics, (notes or {}).get(name, "")))
    return out


def _m(**kw: Any) -> tuple[Metric, ...]:
    return tuple(Metric(k, None, v) for k, v in kw.items())


def _node_layouts(rf: "ResolvedFleet") -> dict[str, tuple[str, Layouts]]:
    out = {}
    for pv in rf.pools:
        per = tuple(_key(lay) for lay in pv.gpu_layouts())
        for n in pv.pool.nodes or ():
            out[n] = (pv.name, per)
    return out


def capacity_diff(old_rf: "ResolvedFleet", new_rf: "ResolvedFleet") -> CapacityDiff:
    old, new = capacity(old_rf), capacity(new_rf)
    return diff_reports(old, new, old_rf, new_rf)


def diff_reports(old: CapacityReport, new: CapacityReport, old_rf: "ResolvedFleet", new_rf: "ResolvedFleet") -> CapacityDiff:
    pl = ("physical GPUs", "advertised units", "granted units", "cost/month")

    def pools(r: CapacityReport) -> dict[str, tuple[Metric, ...]]:
        return {p.name: tuple(Metric(k, None, v) for k, v in zip(pl, (
            p.physical_gpus, sum(n for _, n in p.resources), sum(n for _, n in p.quota), p.cost_per_month)))
            for p in r.pools}

    tl = ("capacity", "quota", "GPU-eq", "cost/month")

    def tiers(r: CapacityReport) -> dict[str, tuple[Metric, ...]]:
        return {t.name: tuple(Metric(k, None, v) for k, v in zip(tl, (
            t.capacity, t.quota, None if t.gpus is None else round(t.gpus, 4), t.cost_per_month)))
            for t in r.tiers}

    nl = ("GPU-eq", "cost/month")

    def tenants(r: CapacityReport) -> dict[str, tuple[Metric, ...]]:
        return {t.name: tuple(Metric(k, None, v) for k, v in zip(nl, (
            None if t.gpus is None else round(t.gpus, 4), t.cost_per_month))) for t in r.tenants}

    rows = (_rows("pool", pools(old), pools(new), pl) + _rows("tier", tiers(old), tiers(new), tl)
            + _rows("tenant", tenants(old), tenants(new), nl))

    # nodes whose MIG state changes
    drains = []
    on, nn = _node_layouts(old_rf), _node_layouts(new_rf)
    for node in sorted(set(on) & set(nn)):
        (_, o), (pool, n) = on[node], nn[node]
        width = max(len(o), len(n))
        o2 = o + (None,) * (width - len(o))
        n2 = n + (None,) * (width - len(n))
        changed = tuple(i for i in range(width) if o2[i] != n2[i])
        if changed:
            drains.append(Drain(node, pool, changed, o, n))
    notes = []
    old_pools = {pv.name: pv for pv in old_rf.pools}
    for pv in new_rf.pools:
        ov = old_pools.get(pv.name)
        if pv.pool.karpenter is None or ov is None:
            continue
        if [_key(x) for x in ov.gpu_layouts()] != [_key(x) for x in pv.gpu_layouts()]:
            notes.append(f"Karpenter pool {pv.name}: the MIG layout changes; its nodes drift and are "
                         f"replaced (or reconfigured and drained) by Karpenter and mig-manager")

    prio = []
    old_tiers = {t.name: t for t in old_rf.fleet.spec.tiers}
    for t in new_rf.fleet.spec.tiers:
        o = old_tiers.get(t.name)
        if o is not None and (o.priority, o.preemption) != (t.priority, t.preemption):
            prio.append((t.name, f"{o.priority}/{o.preemption}", f"{t.priority}/{t.preemption}"))

    return CapacityDiff(old.fleet, new.fleet, tuple(rows), tuple(drains), tuple(notes), tuple(prio),
                        Metric("cost/month", old.cost_per_month, new.cost_per_month),
                        Metric("physical GPUs", old.physical_gpus, new.physical_gpus))


# --- rendering ---------------------------------------------------------------------------


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, int):
        return str(x)
    return f"{x:,.2f}"


def _delta(m: Metric) -> str:
    d = m.delta
    if d is None:
        return ""
    if d == 0:
        return "0"
    return ("+" if d > 0 else "") + _num(d)


def _layouts_text(per: Layouts) -> str:
    if per and len(set(per)) == 1:
        lay = per[0]
        return "every GPU " + ("MIG off" if lay is None else "{" + ", ".join(f"{p}: {n}" for p, n in lay) + "}")
    parts = []
    for i, lay in enumerate(per):
        parts.append(f"{i}:" + ("off" if lay is None else "{" + ", ".join(f"{p}: {n}" for p, n in lay) + "}"))
    return " ".join(parts)


def _table_rows(d: CapacityDiff) -> tuple[list[str], list[list[str]]]:
    head = ["kind", "name", "status", "metric", "old", "new", "delta"]
    rows = []
    for r in d.rows:
        if r.status == "same":
            continue
        for m in r.metrics:
            if m.changed or r.status != "changed":
                rows.append([r.kind, r.name, r.status, m.label, _num(m.old), _num(m.new), _delta(m)])
    return head, rows


def _drain_lines(d: CapacityDiff) -> list[str]:
    out = [f"node {x.node} (pool {x.pool}): GPU{'s' if len(x.gpus) > 1 else ''} "
           f"{', '.join(map(str, x.gpus))} change MIG state — drained: {_layouts_text(x.old)} -> "
           f"{_layouts_text(x.new)}" for x in d.drains]
    out += list(d.pool_notes)
    out += [f"tier {t}: PriorityClass {o} -> {n} (value and preemptionPolicy are immutable: the object is "
            f"replaced)" for t, o, n in d.priority_changes]
    return out


def render_diff_text(d: CapacityDiff) -> str:
    from gpuplan.report.tables import _text_table

    title = f"Change from base ({d.old_fleet} -> {d.new_fleet})"
    parts = [title + "\n" + "-" * len(title),
             f"physical GPUs {_num(d.gpus.old)} -> {_num(d.gpus.new)} ({_delta(d.gpus)}); cost/month "
             f"{_num(d.cost.old)} -> {_num(d.cost.new)} ({_delta(d.cost)})"]
    head, rows = _table_rows(d)
    parts.append(_text_table(head, rows) if rows else "no capacity or cost changes")
    lines = _drain_lines(d)
    parts.append("Disruptive changes:\n" + "\n".join("  " + x for x in lines) if lines
                 else "no node changes its MIG layout")
    return "\n\n".join(parts)


def render_diff_markdown(d: CapacityDiff) -> str:
    from gpuplan.report.markdown import md_text
    from gpuplan.report.tables import _md_table

    parts = [f"## Change from base ({md_text(d.old_fleet)} → {md_text(d.new_fleet)})",
             f"Physical GPUs {_num(d.gpus.old)} → {_num(d.gpus.new)} ({_delta(d.gpus)}); cost/month "
             f"{_num(d.cost.old)} → {_num(d.cost.new)} ({_delta(d.cost)})"]
    head, rows = _table_rows(d)
    parts.append(_md_table(head, rows) if rows else "No capacity or cost changes.")
    lines = _drain_lines(d)
    parts.append("### Disruptive changes\n\n" + "\n".join(f"- {md_text(x)}" for x in lines) if lines
                 else "No node changes its MIG layout.")
    return "\n\n".join(parts)


def render_diff_html(d: CapacityDiff) -> str:
    head, rows = _table_rows(d)
    out = [f"<h2>Change from base ({escape(d.old_fleet)} → {escape(d.new_fleet)})</h2>",
           f"<p>Physical GPUs {_num(d.gpus.old)} → {_num(d.gpus.new)} ({escape(_delta(d.gpus))}); cost/month "
           f"{_num(d.cost.old)} → {_num(d.cost.new)} ({escape(_delta(d.cost))})</p>"]
    if rows:
        out.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>")
        for row in rows:
            cls = "plus" if row[-1].startswith("+") else "minus" if row[-1].startswith("-") else ""
            out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row[:-1])
                       + f'<td class="{cls}">{escape(row[-1])}</td></tr>')
        out.append("</tbody></table>")
    lines = _drain_lines(d)
    if lines:
        out.append("<h3>Disruptive changes</h3><ul>" + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>")
    return "".join(out)


def diff_data(d: CapacityDiff) -> dict[str, Any]:
    return {
        "base": d.old_fleet,
        "physicalGPUs": {"old": d.gpus.old, "new": d.gpus.new, "delta": d.gpus.delta},
        "costPerMonth": {"old": d.cost.old, "new": d.cost.new, "delta": d.cost.delta},
        "rows": [{"kind": r.kind, "name": r.name, "status": r.status,
                  "metrics": {m.label: {"old": m.old, "new": m.new, "delta": m.delta} for m in r.metrics}}
                 for r in d.rows],
        "drains": [{"node": x.node, "pool": x.pool, "gpus": list(x.gpus),
                    "old": [None if lay is None else dict(lay) for lay in x.old],
                    "new": [None if lay is None else dict(lay) for lay in x.new]} for x in d.drains],
        "notes": list(d.pool_notes),
        "priorityChanges": [{"tier": t, "old": o, "new": n} for t, o, n in d.priority_changes],
    }
