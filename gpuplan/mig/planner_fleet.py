"""Mixed-fleet MIG planning: several pools, several GPU models, one demand.

Demand keys (docs/planner.md has the full definition):
- ``"PROFILE"`` (``"3g.40gb"``): any pool whose GPU model has a profile of exactly that
  name may serve it. The name is the Kubernetes resource (``nvidia.com/mig-3g.40gb``
  under the mixed strategy), so a pod cannot tell the models apart.
- ``"TIER/PROFILE"``: TIER is a pool name (that pool only) or a GPU model name
  (every pool of that model), e.g. ``"spot-a100/1g.10gb"``, ``"H100-80GB/3g.40gb"``.

Formulation (one MILP, solved twice for a lexicographic objective):
    x[k,L]  integer  GPUs of pool k configured with (projected, Pareto-maximal) layout L
    keep[k,E] integer  GPUs of pool k that keep their existing layout E (0..count of E)
    y[k,p,j] integer  instances of pool k's profile p that serve demand key j
    chg[k]  >= 0       existing GPUs of pool k that get a new layout (each one drains its node)
  supply   sum_j y[k,p,j] <= sum_L a[p,L] x[k,L] + sum_E e[p,E] keep[k,E]
  demand   sum_{k,p} y[k,p,j] >= d[j]
  capacity sum_L x[k,L] + sum_E keep[k,E] <= max_gpus[k]
  changes  sum_L x[k,L] - chg[k] <= fresh[k]   (fresh = GPUs of the pool with no current layout)
Stage 1 minimises GPUs (or cost = price x GPUs); stage 2 fixes that optimum and
minimises the changed GPUs (or, with no existing layouts and the cost objective, GPUs).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan.mig.planner import (
    DEFAULT_TIME_LIMIT,
    InfeasibleError,
    PlanError,
    UnknownProfileError,
    _assert_creatable,
    _columns,
    _geometry,
    _resolve,
    _trim,
)

OBJECTIVES = ("gpus", "cost")


@dataclass(frozen=True)
class PoolCapacity:
    """A node pool: GPU model, how many GPUs it has (or may scale to), price per GPU-hour."""

    name: str
    gpu: str  # any name gpuplan.catalog.resolve_gpu accepts
    max_gpus: int  # nodes x GPUs per node; the maximum for an autoscaled pool
    price_per_gpu_hour: float | None = None
    gpus_per_node: int = 1

    @classmethod
    def from_nodes(
        cls, name: str, gpu: str, nodes: int, gpus_per_node: int, price_per_gpu_hour: float | None = None
    ) -> PoolCapacity:
        return cls(name, gpu, nodes * gpus_per_node, price_per_gpu_hour, gpus_per_node)


@dataclass(frozen=True)
class LayoutChange:
    """GPUs of one pool going from ``old`` to ``new`` layout.

    kind: ``reconfigure`` (an existing GPU gets a new layout: its node is drained),
    ``add`` (a GPU with no current layout gets one), ``release`` (the plan no longer
    needs this GPU; its layout may stay, or the node may be scaled down)."""

    pool: str
    gpus: int
    old: dict[str, int] | None
    new: dict[str, int] | None
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "gpus": self.gpus, "old": self.old, "new": self.new, "kind": self.kind}


@dataclass(frozen=True)
class PoolPlan:
    name: str
    gpu: str  # catalog key of the model
    max_gpus: int
    gpus: int  # GPUs the plan uses
    layouts: tuple[tuple[dict[str, int], int], ...]  # grouped, kept layouts included
    per_gpu: tuple[dict[str, int], ...]  # kept GPUs first (existing order), then new ones
    served: dict[str, int]  # demand key -> instances this pool provides
    kept: int = 0
    reconfigured: int = 0
    added: int = 0
    released: int = 0
    cost_per_hour: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "gpu": self.gpu,
            "max_gpus": self.max_gpus,
            "gpus": self.gpus,
            "layouts": [{"layout": dict(lay), "gpus": n} for lay, n in self.layouts],
            "served": dict(self.served),
            "kept": self.kept,
            "reconfigured": self.reconfigured,
            "added": self.added,
            "released": self.released,
            "cost_per_hour": self.cost_per_hour,
        }


@dataclass(frozen=True)
class FleetPlan:
    objective: str
    gpus: int
    cost_per_hour: float | None  # None unless every used pool has a price
    objective_value: float
    lower_bound: float  # proved bound on the primary objective
    pools: tuple[PoolPlan, ...]
    changes: tuple[LayoutChange, ...]
    changed_gpus: int  # existing GPUs that get a new layout (each drains its node)
    method: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gap(self) -> float:
        return self.objective_value - self.lower_bound

    @property
    def optimal(self) -> bool:
        return self.gap <= 1e-6 * max(1.0, abs(self.objective_value))

    def pool(self, name: str) -> PoolPlan:
        return next(p for p in self.pools if p.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "gpus": self.gpus,
            "cost_per_hour": self.cost_per_hour,
            "objective_value": self.objective_value,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "optimal": self.optimal,
            "changed_gpus": self.changed_gpus,
            "pools": [p.to_dict() for p in self.pools],
            "changes": [c.to_dict() for c in self.changes],
            "method": self.method,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- layout diff


def _canon(layout: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((n, int(c)) for n, c in (layout or {}).items() if c))


def layout_changes(
    current: Mapping[str, Sequence[Mapping[str, int]]],
    new: Mapping[str, Sequence[Mapping[str, int]]],
    *,
    capacity: Mapping[str, int] | None = None,
) -> tuple[LayoutChange, ...]:
    """Structured change list between per-pool, per-GPU layouts (order ignored).

    GPUs whose layout appears in both lists are unchanged. Remaining new layouts
    go first onto the pool's GPUs that have no current layout (``capacity[pool] -
    len(current[pool])`` of them; 0 when capacity is not given), then replace
    remaining current layouts (``reconfigure``: a drain); current layouts left over
    are ``release``. Deterministic: sorted by pool, kind, layouts."""
    cap = capacity or {}
    out: list[LayoutChange] = []
    for pool in sorted(set(current) | set(new)):
        cur = [dict(x) for x in current.get(pool, ())]
        nxt = [dict(x) for x in new.get(pool, ())]
        left_old = Counter(_canon(x) for x in cur)
        left_new = Counter(_canon(x) for x in nxt)
        same = left_old & left_new
        left_old -= same
        left_new -= same
        olds = sorted(left_old.elements())
        news = sorted(left_new.elements())
        fresh = max(cap.get(pool, len(cur)) - len(cur), 0)
        adds, news = news[:fresh], news[fresh:]
        pairs = list(zip(olds, news))
        adds += news[len(pairs) :]
        releases = olds[len(pairs) :]
        rows: Counter = Counter()
        for o, n in pairs:
            rows[("reconfigure", o, n)] += 1
        for n in adds:
            rows[("add", None, n)] += 1
        for o in releases:
            rows[("release", o, None)] += 1
        order = {"reconfigure": 0, "add": 1, "release": 2}
        for (kind, o, n), k in sorted(rows.items(), key=lambda t: (order[t[0][0]], t[0][1] or (), t[0][2] or ())):
            out.append(LayoutChange(pool, k, dict(o) if o is not None else None, dict(n) if n is not None else None, kind))
    return tuple(out)


# --------------------------------------------------------------------------- fleet planning


@dataclass(frozen=True)
class _Pool:
    spec: PoolCapacity
    model: Any
    geo: Any
    rel: tuple[int, ...]  # profile indices (into geo.names) some demand key may use
    columns: tuple[tuple[int, ...], ...]
    existing: tuple[tuple[tuple[str, int], ...], ...]  # canonical existing layouts, per GPU
    keepable: tuple[tuple[tuple[tuple[str, int], ...], int, tuple[int, ...]], ...]  # (layout, count, projected)


def _parse_key(key: str) -> tuple[str | None, str]:
    scope, _, profile = key.rpartition("/")
    if not profile:
        raise PlanError(f"bad demand key {key!r}: expected PROFILE or TIER/PROFILE")
    return (scope or None), profile


def _eligible(pools: Sequence[_Pool], key: str) -> list[tuple[int, int]]:
    """(pool index, profile index in geo.names) pairs that may serve ``key``."""
    from gpuplan.catalog import resolve_gpu

    scope, profile = _parse_key(key)
    chosen = list(range(len(pools)))
    if scope is not None:
        by_name = [i for i, p in enumerate(pools) if p.spec.name == scope]
        if by_name:
            chosen = by_name
        else:
            model = resolve_gpu(scope)
            chosen = [i for i, p in enumerate(pools) if model is not None and p.geo.key == model.key]
            if not chosen:
                names = ", ".join(sorted({p.spec.name for p in pools} | {p.geo.key for p in pools}))
                raise PlanError(f"demand key {key!r}: {scope!r} is neither a pool nor a GPU model of the fleet ({names})")
    pairs = [(i, pools[i].geo.names.index(profile)) for i in chosen if profile in pools[i].geo.names]
    if not pairs:
        import difflib

        known = sorted({n for i in chosen for n in pools[i].geo.names})
        hints = tuple(difflib.get_close_matches(profile, known, n=3, cutoff=0.5))
        models = ", ".join(sorted({pools[i].geo.key for i in chosen}))
        raise UnknownProfileError(profile, f"{scope or 'any pool'} ({models})", hints, known)
    return pairs


def plan_fleet(
    pools: Sequence[PoolCapacity],
    demand: Mapping[str, int],
    *,
    objective: str = "gpus",
    existing: Mapping[str, Sequence[Mapping[str, int]]] | None = None,
    keep_existing: bool = True,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> FleetPlan:
    """Choose per-pool MIG layouts that meet ``demand`` with the fewest GPUs (or the
    lowest cost); with ``existing`` layouts and ``keep_existing``, among those
    optimal plans pick one that changes the fewest existing GPUs (lexicographic)."""
    if objective not in OBJECTIVES:
        raise PlanError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if not pools:
        raise PlanError("no pools to plan on")
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise PlanError(f"pool names must be unique: {names}")
    if objective == "cost":
        missing = [p.name for p in pools if p.price_per_gpu_hour is None]
        if missing:
            raise PlanError(f"objective 'cost' needs a price for every pool; missing: {', '.join(missing)}")
    existing = {k: list(v) for k, v in (existing or {}).items()}
    unknown = sorted(set(existing) - set(names))
    if unknown:
        raise PlanError(f"existing layouts for unknown pools: {', '.join(unknown)}")
    for p in pools:
        if p.max_gpus < 0 or len(existing.get(p.name, ())) > p.max_gpus:
            raise PlanError(f"pool {p.name}: {len(existing.get(p.name, ()))} existing GPUs but max_gpus={p.max_gpus}")
    for key, count in demand.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PlanError(f"demand for {key} must be a whole number >= 0, got {count!r}")

    base = []
    for p in pools:
        model = _resolve(p.gpu)
        base.append(_Pool(p, model, _geometry(model), (), (), (), ()))
    keys = [k for k, d in demand.items() if d]
    eligible = {k: _eligible(base, k) for k in demand}  # validates zero-count keys too

    from gpuplan.mig.solver import check_layout

    prepared: list[_Pool] = []
    notes: list[str] = []
    for i, bp in enumerate(base):
        rel = tuple(sorted({r for k in keys for (pi, r) in eligible[k] if pi == i}))
        cols = _columns(bp.geo, rel) if rel else ()
        cur = tuple(_canon(x) for x in existing.get(bp.spec.name, ()))
        keepable = []
        if keep_existing:
            for lay, n in sorted(Counter(cur).items()):
                if not check_layout(bp.model, dict(lay)).ok:
                    notes.append(f"pool {bp.spec.name}: existing layout {dict(lay)} is not creatable on {bp.geo.key}; it must change")
                    continue
                proj = tuple(dict(lay).get(bp.geo.names[r], 0) for r in rel)
                keepable.append((lay, n, proj))
        prepared.append(_Pool(bp.spec, bp.model, bp.geo, rel, cols, cur, tuple(keepable)))

    return _solve_fleet(prepared, keys, {k: demand[k] for k in keys}, eligible, objective, existing, keep_existing, time_limit, tuple(notes))


def _solve_fleet(
    pools: list[_Pool],
    keys: list[str],
    demand: Mapping[str, int],
    eligible: Mapping[str, list[tuple[int, int]]],
    objective: str,
    existing: Mapping[str, Sequence[Mapping[str, int]]],
    keep_existing: bool,
    time_limit: float,
    notes: tuple[str, ...],
) -> FleetPlan:
    from gpuplan.mig import highs

    # ---- variables
    lb: list[float] = []
    ub: list[float] = []
    integral: list[int] = []
    price: list[float] = []  # stage-1 objective
    gpu_coef: list[float] = []

    def var(lo: float, hi: float, integer: bool, p: float = 0.0, g: float = 0.0) -> int:
        lb.append(lo), ub.append(hi), integral.append(1 if integer else 0), price.append(p), gpu_coef.append(g)
        return len(lb) - 1

    x: list[list[int]] = []
    keep: list[list[int]] = []
    chg: list[int | None] = []
    track_changes = keep_existing and any(p.existing for p in pools)
    for p in pools:
        unit = 1.0 if objective == "gpus" else float(p.spec.price_per_gpu_hour or 0.0)
        x.append([var(0, p.spec.max_gpus, True, unit, 1.0) for _ in p.columns])
        keep.append([var(0, n, True, unit, 1.0) for _, n, _ in p.keepable])
        chg.append(var(0, highs.INF, False) if track_changes and p.existing else None)
    y: dict[tuple[int, int, str], int] = {}
    for key in keys:
        for pi, r in eligible[key]:
            if r in pools[pi].rel:
                y[(pi, r, key)] = var(0, demand[key], True)

    # ---- constraints
    rows: list[dict[int, float]] = []
    row_lo: list[float] = []
    row_hi: list[float] = []

    def row(coefs: dict[int, float], lo: float, hi: float) -> None:
        rows.append(coefs), row_lo.append(lo), row_hi.append(hi)

    for pi, p in enumerate(pools):
        for ri, r in enumerate(p.rel):
            coefs: dict[int, float] = {v: 1.0 for (qi, rr, _), v in y.items() if qi == pi and rr == r}
            for c, v in zip(p.columns, x[pi]):
                if c[ri]:
                    coefs[v] = -float(c[ri])
            for (_, _, proj), v in zip(p.keepable, keep[pi]):
                if proj[ri]:
                    coefs[v] = -float(proj[ri])
            row(coefs, -highs.INF, 0.0)
        row({v: 1.0 for v in x[pi] + keep[pi]}, -highs.INF, float(p.spec.max_gpus))
        if chg[pi] is not None:
            fresh = p.spec.max_gpus - len(p.existing)
            coefs = {v: 1.0 for v in x[pi]}
            coefs[chg[pi]] = -1.0
            row(coefs, -highs.INF, float(fresh))
    for key in keys:
        row({v: 1.0 for (_, _, k), v in y.items() if k == key}, float(demand[key]), highs.INF)

    n = len(lb)
    integer = [bool(k) for k in integral]

    def run(cost: list[float], extra: Sequence[tuple[dict[int, float], float, float]] = ()) -> highs.Solution:
        return highs.solve(cost, rows + [r for r, _, _ in extra], row_lo + [lo for _, lo, _ in extra],
                           row_hi + [hi for _, _, hi in extra], lb, ub, integer, time_limit=time_limit)

    res = run(price)
    if res.x is None:
        if res.infeasible:
            raise InfeasibleError(_infeasible_message(pools, demand))
        raise PlanError(f"the fleet MILP found no plan within {time_limit:g}s ({res.message})")
    optimal1 = res.optimal
    value1 = float(res.value or 0.0)
    lower = value1 if optimal1 else (res.dual_bound if res.dual_bound is not None else 0.0)
    if objective == "gpus":
        lower = math.ceil(lower - 1e-6)
    method = "MILP (HiGHS)" + ("" if optimal1 else ", time limit")
    sol = res.x

    # ---- stage 2: lexicographic secondary objective at the primary optimum
    secondary: list[float] | None = None
    if track_changes:
        # changed GPUs first; then, by a weight too small to trade away one change
        # (eps x every GPU < 1), fewest new layouts: keep a GPU rather than release it
        # and configure a fresh one
        secondary = [0.0] * n
        for v in chg:
            if v is not None:
                secondary[v] = 1.0
        eps = 1.0 / (sum(p.spec.max_gpus for p in pools) + 1)
        for xs in x:
            for v in xs:
                secondary[v] = eps
        method += "; then fewest changed GPUs"
    elif objective == "cost":
        secondary = list(gpu_coef)
        method += "; then fewest GPUs"
    if secondary is not None:
        slack = 1e-6 * max(1.0, abs(value1)) if objective == "cost" else 1e-6
        at_optimum = ({j: c for j, c in enumerate(price) if c}, -highs.INF, value1 + slack)
        res2 = run(secondary, [at_optimum])
        if res2.x is not None:
            sol = res2.x
            if not res2.optimal:
                method += " (time limit)"

    return _extract(pools, keys, y, x, keep, [int(round(v)) for v in sol], objective, lower, existing, method, notes)


def _infeasible_message(pools: Sequence[_Pool], demand: Mapping[str, int]) -> str:
    caps = ", ".join(f"{p.spec.name}: {p.spec.max_gpus}x {p.geo.key}" for p in pools)
    asked = ", ".join(f"{k}={v}" for k, v in demand.items())
    return f"the pools cannot provide {asked} (capacity {caps})"


def _extract(
    pools: list[_Pool],
    keys: list[str],
    y: Mapping[tuple[int, int, str], int],
    x: list[list[int]],
    keep: list[list[int]],
    sol: list[int],
    objective: str,
    lower: float,
    existing: Mapping[str, Sequence[Mapping[str, int]]],
    method: str,
    notes: tuple[str, ...],
) -> FleetPlan:
    plans: list[PoolPlan] = []
    new_lists: dict[str, list[dict[str, int]]] = {}
    for pi, p in enumerate(pools):
        served = {k: sol[v] for (qi, _, k), v in y.items() if qi == pi and sol[v]}
        used = [sum(sol[v] for (qi, rr, _), v in y.items() if qi == pi and rr == r) for r in p.rel]
        kept_gpus: list[dict[str, int]] = []
        kept_supply = [0] * len(p.rel)
        for (lay, _, proj), v in zip(p.keepable, keep[pi]):
            kept_gpus += [dict(lay)] * sol[v]
            kept_supply = [s + a * sol[v] for s, a in zip(kept_supply, proj)]
        new = [list(c) for c, v in zip(p.columns, x[pi]) for _ in range(sol[v])]
        supply = [sum(g[r] for g in new) for r in range(len(p.rel))]
        # kept GPUs stay as they are, so surplus is trimmed from new GPUs only
        surplus = [max(min(s + k - u, s), 0) for s, k, u in zip(supply, kept_supply, used)]
        new = _trim(new, surplus)
        new_layouts = [{p.geo.names[p.rel[r]]: g[r] for r in range(len(p.rel)) if g[r]} for g in new]
        _assert_creatable(p.model, {tuple(d.items()): d for d in new_layouts}.values())
        per_gpu = kept_gpus + new_layouts
        new_lists[p.spec.name] = per_gpu
        order = {name: i for i, name in enumerate(p.geo.names)}

        def ordered(lay: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
            return tuple(sorted(((n, c) for n, c in lay.items() if c), key=lambda t: (order.get(t[0], len(order)), t[0])))

        counts = Counter(ordered(d) for d in per_gpu)
        layouts = tuple(
            (dict(lay), cnt)
            for lay, cnt in sorted(
                counts.items(), key=lambda t: (-t[1], tuple((order.get(n, len(order)), -c) for n, c in t[0]))
            )
        )
        price = p.spec.price_per_gpu_hour
        plans.append(
            PoolPlan(
                name=p.spec.name,
                gpu=p.geo.key,
                max_gpus=p.spec.max_gpus,
                gpus=len(per_gpu),
                layouts=layouts,
                per_gpu=tuple(per_gpu),
                served=served,
                kept=len(kept_gpus),
                cost_per_hour=None if price is None else price * len(per_gpu),
            )
        )
    capacity = {p.spec.name: p.spec.max_gpus for p in pools}
    current = {p.spec.name: [dict(e) for e in p.existing] for p in pools}
    # no existing layouts given: nothing to compare against, so no change list
    changes = layout_changes(current, new_lists, capacity=capacity) if existing else ()
    final: list[PoolPlan] = []
    for pp in plans:
        count = Counter()
        for ch in changes:
            if ch.pool == pp.name:
                count[ch.kind] += ch.gpus
        unchanged = len(pp.per_gpu) - count["reconfigure"] - count["add"]
        final.append(
            PoolPlan(
                **{
                    **pp.__dict__,
                    "kept": unchanged,
                    "reconfigured": count["reconfigure"],
                    "added": count["add"],
                    "released": count["release"],
                }
            )
        )
    total = sum(pp.gpus for pp in final)
    costs = [pp.cost_per_hour for pp in final]
    cost = None if any(c is None for c in costs) else float(sum(costs))  # type: ignore[arg-type]
    value = float(total) if objective == "gpus" else float(cost or 0.0)
    return FleetPlan(
        objective=objective,
        gpus=total,
        cost_per_hour=cost,
        objective_value=value,
        lower_bound=min(lower, value) if objective == "cost" else lower,
        pools=tuple(final),
        changes=changes,
        changed_gpus=sum(c.gpus for c in changes if c.kind == "reconfigure"),
        method=method,
        notes=notes,
    )
