"""`gpuplan plan --optimise`: MIG layouts from the declared demand.

For every MIG pool with strategy ``mixed`` the demand is the quota granted on
its tiers, per profile (``tier.profile``). A layout in fleet.yaml is the same on
every node (``layout``, or ``devices`` per GPU index), so the pool's demand is
spread evenly: one node must provide ``ceil(demand / nodes)`` of each profile.
The MIG planner (``gpuplan.mig.planner_fleet.plan_fleet``) chooses the fewest GPUs of
one node that provide it and, among those plans, the one that changes the
fewest GPUs of the current layout. GPUs the plan does not need keep their
current layout (no drain for nothing); GPUs that a ``nvidia.com/gpu`` tier on
the pool uses (MIG disabled) are left alone.

The result is printed as a unified diff of fleet.yaml that changes only the
``sharing.layout`` / ``sharing.devices`` value of those pools, and the patched
spec is checked again.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

from gpuplan.spec.models import Mig

if TYPE_CHECKING:
    from gpuplan.diagnostics import Diagnostic
    from gpuplan.resolve import PoolView, ResolvedFleet

Layout = dict[str, int] | None


@dataclass(frozen=True)
class PoolProposal:
    pool: str
    gpu: str
    nodes: int
    gpus_per_node: int
    demand: dict[str, int]  # whole pool, per profile
    per_node_demand: dict[str, int]
    old: tuple[Layout, ...]  # per GPU index of a node
    new: tuple[Layout, ...]
    planner_gpus: int  # GPUs per node the plan needs

    @property
    def changed_gpus(self) -> tuple[int, ...]:
        return tuple(i for i, (o, n) in enumerate(zip(self.old, self.new)) if o != n)

    @property
    def changed(self) -> bool:
        return bool(self.changed_gpus)


@dataclass(frozen=True)
class Optimisation:
    file: str
    proposals: tuple[PoolProposal, ...]
    new_text: str
    diff: str  # unified diff of the spec ("" when nothing changes)
    notes: tuple[str, ...] = ()
    diagnostics: tuple["Diagnostic", ...] = field(default=())  # of the patched spec

    def _lines(self) -> list[str]:
        out = []
        for p in self.proposals:
            demand = ", ".join(f"{k}: {v}" for k, v in p.demand.items())
            per = ", ".join(f"{k}: {v}" for k, v in p.per_node_demand.items())
            if p.changed:
                out.append(f"pool {p.pool}: demand {{{demand}}} over {p.nodes} node{'s' if p.nodes != 1 else ''} = "
                           f"{{{per}}} per node; "
                           f"{p.planner_gpus} of {p.gpus_per_node} GPUs per node needed; GPU"
                           f"{'s' if len(p.changed_gpus) > 1 else ''} {', '.join(map(str, p.changed_gpus))} "
                           f"change on every node ({len(p.changed_gpus) * p.nodes} GPUs, {p.nodes} node"
                           f"{'s' if p.nodes != 1 else ''} drained)")
            else:
                out.append(f"pool {p.pool}: demand {{{demand}}} fits the current layout; no change")
        out.extend(self.notes)
        return out

    def text(self) -> str:
        title = "Proposed MIG layouts (--optimise)"
        body = "\n".join(self._lines())
        return f"{title}\n{'-' * len(title)}\n\n{body}\n\n" + (self.diff or "no change to fleet.yaml proposed\n")

    def markdown(self) -> str:
        from gpuplan.report.markdown import md_fence, md_text

        body = "\n".join(f"- {md_text(x)}" for x in self._lines())
        # the diff quotes fleet.yaml (its comments too): a fence no line of it can close
        return ("## Proposed MIG layouts (--optimise)\n\n" + body + "\n\n"
                + (md_fence(self.diff.rstrip("\n"), "diff") if self.diff else "no change to fleet.yaml proposed."))

    def html(self) -> str:
        items = "".join(f"<li>{escape(x)}</li>" for x in self._lines())
        return (f"<h2>Proposed MIG layouts (--optimise)</h2><ul>{items}</ul>"
                + (f"<pre>{escape(self.diff)}</pre>" if self.diff else "<p>no change to fleet.yaml proposed.</p>"))

    def to_data(self) -> dict[str, Any]:
        return {
            "pools": [{"pool": p.pool, "gpu": p.gpu, "nodes": p.nodes, "demand": p.demand,
                       "perNodeDemand": p.per_node_demand, "old": list(p.old), "new": list(p.new),
                       "changedGPUsPerNode": list(p.changed_gpus), "plannerGPUsPerNode": p.planner_gpus}
                      for p in self.proposals],
            "diff": self.diff,
            "notes": list(self.notes),
        }


# --- planning ------------------------------------------------------------------------------


def _demand(rf: "ResolvedFleet", pv: "PoolView") -> dict[str, int]:
    out: dict[str, int] = {}
    for t in rf.fleet.spec.tiers:
        if t.pool != pv.name or not t.profile:
            continue
        units = sum(per.get(t.name, 0) for tn in rf.fleet.spec.tenants for per in tn.quotas.values())
        if units:
            out[t.profile] = out.get(t.profile, 0) + units
    return out


def _whole_gpu_quota(rf: "ResolvedFleet", pv: "PoolView") -> int:
    return sum(per.get(t.name, 0) for t in rf.fleet.spec.tiers if t.pool == pv.name
               and rf.tier_resource(t) == "nvidia.com/gpu"
               for tn in rf.fleet.spec.tenants for per in tn.quotas.values())


def _canon(lay: Layout) -> tuple | None:
    return None if lay is None else tuple(sorted(lay.items()))


def _order(gpu, lay: dict[str, int]) -> dict[str, int]:
    from gpuplan.mig.solver import display_order

    order = {n: i for i, n in enumerate(display_order(gpu.key))}
    return dict(sorted(lay.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))


def propose_pool(rf: "ResolvedFleet", pv: "PoolView") -> tuple[PoolProposal | None, str | None]:
    from gpuplan.mig.planner import PlanError
    from gpuplan.mig.planner_fleet import PoolCapacity, plan_fleet

    s = pv.pool.sharing
    if pv.gpu is None or not pv.gpu.mig_capable:
        return None, f"pool {pv.name}: GPU model not MIG-capable or unknown; skipped"
    if s.strategy != "mixed":
        return None, (f"pool {pv.name}: strategy single has one profile on every GPU; --optimise plans "
                      f"mixed pools only")
    demand = _demand(rf, pv)
    nodes, gpn = pv.node_count or 0, pv.gpus_per_node or 0
    if not demand:
        return None, f"pool {pv.name}: no quota on its MIG tiers; nothing to plan"
    if nodes <= 0 or gpn <= 0:
        return None, f"pool {pv.name}: no nodes; nothing to plan on"
    per_node = {p: math.ceil(d / nodes) for p, d in demand.items()}
    current = list(pv.gpu_layouts())
    reserved = set()
    whole = _whole_gpu_quota(rf, pv)
    if whole:
        # keep as many MIG-disabled GPUs per node as the whole-GPU tiers need
        need = math.ceil(whole / nodes)
        for i, lay in enumerate(current):
            if lay is None and len(reserved) < need:
                reserved.add(i)
    usable = [i for i in range(gpn) if i not in reserved]
    existing = [current[i] for i in usable if current[i] is not None]
    try:
        fp = plan_fleet([PoolCapacity(pv.name, pv.gpu.key, len(usable), pv.pool.price_per_gpu_hour, gpn)],
                        {f"{pv.name}/{p}": d for p, d in per_node.items()},
                        existing={pv.name: existing}, keep_existing=True)
    except PlanError as exc:
        return None, f"pool {pv.name}: {exc}"
    plan = fp.pool(pv.name)
    new: list[Layout] = list(current)
    free = set(usable)
    per_gpu = [dict(x) for x in plan.per_gpu]
    kept, fresh_layouts = per_gpu[: plan.kept], per_gpu[plan.kept:]
    for lay in kept:
        i = next((i for i in sorted(free) if _canon(current[i]) == _canon(lay)), None)
        if i is not None:
            free.discard(i)
        else:  # pragma: no cover - the planner keeps only layouts that exist
            fresh_layouts.append(lay)
    # new layouts: GPUs without a layout first, then GPUs whose layout the plan does not keep
    targets = sorted(free, key=lambda i: (current[i] is not None, i))
    for lay, i in zip(fresh_layouts, targets):
        new[i] = _order(pv.gpu, lay)
    return PoolProposal(pv.name, pv.gpu.key, nodes, gpn, demand, per_node, tuple(current), tuple(new),
                        plan.gpus), None


# --- the spec edit ------------------------------------------------------------------------


def _flow(lay: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in lay.items()) + "}"


def _groups(new: tuple[Layout, ...]) -> list[tuple[list[int], Layout]]:
    groups: dict[tuple | None, list[int]] = {}
    lays: dict[tuple | None, Layout] = {}
    for i, lay in enumerate(new):
        k = _canon(lay)
        groups.setdefault(k, []).append(i)
        lays[k] = lay
    return sorted(((idx, lays[k]) for k, idx in groups.items()), key=lambda g: g[0][0])


def _value_text(new: tuple[Layout, ...], flow: bool, indent: int) -> tuple[str, str]:
    """(key, text after 'key:') for the pool's new layout."""
    if len(set(_canon(x) for x in new)) == 1 and new[0] is not None:
        lay = new[0]
        if flow:
            return "layout", " " + _flow(lay)
        pad = " " * (indent + 2)
        return "layout", "".join(f"\n{pad}{k}: {v}" for k, v in lay.items())
    items = []
    for idx, lay in _groups(new):
        dev = "[" + ", ".join(map(str, idx)) + "]"
        items.append(f"{{devices: {dev}" + (f", layout: {_flow(lay)}" if lay is not None else "") + "}")
    if flow:
        return "devices", " [" + ", ".join(items) + "]"
    pad = " " * (indent + 2)
    return "devices", "".join(f"\n{pad}- {it}" for it in items)


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(x) for x in lines[: line - 1]) + col - 1


def _value_end(text: str, start: int) -> tuple[int, bool]:
    """End offset of the value that starts after 'key:' at ``start``; and whether it is flow style."""
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] in "{[":
        depth = 0
        while i < len(text):
            c = text[i]
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1, True
            i += 1
        return len(text), True
    # block: to the end of the last line indented deeper than the key
    line_start = text.rfind("\n", 0, start) + 1
    key_indent = len(text[line_start:start]) - len(text[line_start:start].lstrip(" "))
    pos = text.find("\n", start)
    if pos < 0:
        return len(text), False
    end = pos
    while pos < len(text):
        nxt = text.find("\n", pos + 1)
        line = text[pos + 1: nxt if nxt >= 0 else len(text)]
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            ind = len(line) - len(line.lstrip(" "))
            if ind <= key_indent:
                break
            end = nxt if nxt >= 0 else len(text)
        if nxt < 0:
            break
        pos = nxt
    return end, False


def patch_spec(rf: "ResolvedFleet", text: str, proposals: list[PoolProposal]) -> str:
    lines = text.splitlines(keepends=True)
    edits = []
    for p in proposals:
        if not p.changed:
            continue
        pv = rf.pool_by_name[p.pool]
        s = pv.pool.sharing
        assert isinstance(s, Mig)
        key = "layout" if s.layout is not None else "devices"
        pos = rf.doc.key_pos.get(pv.path + ("sharing", key))
        if pos is None:  # pragma: no cover - the loader records every key
            continue
        start = _offset(lines, *pos)
        after = text.index(":", start) + 1
        end, flow = _value_end(text, after)
        new_key, value = _value_text(p.new, flow, pos[1] - 1)
        edits.append((start, end, f"{new_key}:{value}"))
    out = text
    for start, end, repl in sorted(edits, reverse=True):
        out = out[:start] + repl + out[end:]
    return out


def _check_text(text: str, file: str) -> list["Diagnostic"]:
    from gpuplan.diagnostics import normalise
    from gpuplan.resolve import resolve
    from gpuplan.rules.registry import run_rules
    from gpuplan.spec.loader import LoadError, load_text
    from gpuplan.spec.validate import parse_fleet

    try:
        doc = load_text(text, file)
    except LoadError as exc:  # pragma: no cover - we only change layout values
        return [exc.diag]
    fleet, diags = parse_fleet(doc)
    if fleet is None:
        return normalise(diags)
    return normalise(diags + run_rules(resolve(fleet, doc)))


def optimise(rf: "ResolvedFleet", text: str) -> Optimisation:
    proposals, notes = [], []
    for pv in rf.pools:
        if not isinstance(pv.pool.sharing, Mig):
            continue
        prop, note = propose_pool(rf, pv)
        if prop is not None:
            proposals.append(prop)
        if note:
            notes.append(note)
    if not proposals and not notes:
        notes.append("no MIG pools: nothing to optimise")
    new_text = patch_spec(rf, text, proposals)
    diff = ""
    diags: tuple = ()
    if new_text != text:
        name = rf.file
        diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                            fromfile=f"a/{name.lstrip('/')}", tofile=f"b/{name.lstrip('/')}"))
        if diff and not diff.endswith("\n"):
            diff += "\n"
        diags = tuple(_check_text(new_text, name))
    return Optimisation(rf.file, tuple(proposals), new_text, diff, tuple(notes), diags)

