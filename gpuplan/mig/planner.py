"""MIG planner: the fewest GPUs of one model whose MIG layouts cover a demand.

The problem is a covering integer program over the finite set of layouts the MIG
engine says are creatable (docs/planner.md has the formulation and the proofs):

    minimise  sum_L x_L   subject to   sum_L a[p, L] x_L >= d[p],   x_L integer >= 0

Only *maximal* layouts are needed as columns (every creatable layout is contained
in a maximal one, and layouts are closed under removing instances), and we project
them onto the demanded profiles and keep the Pareto-maximal vectors, so the
program has a handful of columns and one row per demanded profile.

Solve order, cheapest first:
1. slice bounds (compute, memory, per-profile limit) give a proved lower bound;
2. a batched greedy gives a plan; if it meets the bound, it is optimal and no
   solver is imported;
3. otherwise the LP relaxation (a stronger bound) and a MILP (HiGHS, ``mig/highs.py``
   branch and bound) settle it, within ``time_limit``.

The plan then drops surplus instances (layouts are closed under removal), so the
GPUs provide exactly the demand and every layout is re-checked with
``gpuplan.mig.solver.check_layout``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "InfeasibleError",
    "Plan",
    "PlanError",
    "UnknownGpuError",
    "UnknownProfileError",
    "format_layout",
    "naive_gpus",
    "plan",
]

DEFAULT_TIME_LIMIT = 10.0  # seconds for HiGHS; small demands finish in milliseconds

Layout = dict[str, int]
Vector = tuple[int, ...]


# --------------------------------------------------------------------------- errors


class PlanError(ValueError):
    """The demand cannot be planned (the CLI turns this into exit 1)."""

    def __init__(self, message: str, *, suggestions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions = tuple(suggestions)


class UnknownGpuError(PlanError):
    """The GPU model is not in the catalog (or does not support MIG)."""


class UnknownProfileError(PlanError):
    """A demanded profile does not exist on the GPU model."""

    def __init__(self, profile: str, gpu: str, suggestions: Sequence[str], known: Sequence[str]) -> None:
        hint = f"; did you mean {' or '.join(suggestions)}?" if suggestions else ""
        super().__init__(
            f"profile {profile!r} does not exist on {gpu}{hint} (profiles: {', '.join(known)})",
            suggestions=suggestions,
        )
        self.profile = profile
        self.gpu = gpu


class InfeasibleError(PlanError):
    """No plan can meet the demand (e.g. a mixed fleet without enough GPUs)."""


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class _Geometry:
    """What the planner needs from one GPU model, as plain vectors over ``names``."""

    key: str
    names: tuple[str, ...]  # the MIG engine's display order: largest profile first
    compute: tuple[int, ...]
    memory: tuple[int, ...]
    compute_slices: int
    memory_slices: int
    maximal: tuple[Vector, ...]  # maximal creatable layouts
    alone: tuple[int, ...]  # most instances of each profile on one GPU


_GEOMETRY: dict[str, _Geometry] = {}


def _resolve(gpu: Any) -> Any:
    if not isinstance(gpu, str):
        return gpu
    from gpuplan.catalog import resolve_gpu, suggest_gpus

    model = resolve_gpu(gpu)
    if model is None:
        hints = tuple(suggest_gpus(gpu))
        hint = f"; did you mean {' or '.join(hints)}?" if hints else ""
        raise UnknownGpuError(f"unknown GPU model {gpu!r}{hint}", suggestions=hints)
    return model


def _geometry(gpu: Any) -> _Geometry:
    cached = _GEOMETRY.get(gpu.key)
    if cached is not None:
        return cached
    if not gpu.mig_capable or not gpu.profiles:
        raise UnknownGpuError(f"{gpu.key} does not support MIG")
    from gpuplan.mig.solver import display_order, enumerate_layouts

    names = tuple(display_order(gpu.key))  # the engine's order: largest profile first
    profiles = [gpu.profile(n) for n in names]
    index = {n: i for i, n in enumerate(names)}
    maximal: set[Vector] = set()
    for layout in enumerate_layouts(gpu, maximal=True):
        vec = [0] * len(names)
        for name, count in layout.items():
            vec[index[name]] += int(count)
        maximal.add(tuple(vec))
    ordered = tuple(sorted(maximal, reverse=True))
    alone = tuple(max((v[i] for v in ordered), default=0) for i in range(len(names)))
    geo = _Geometry(
        key=gpu.key,
        names=names,
        compute=tuple(p.compute_slices for p in profiles),
        memory=tuple(p.memory_slices for p in profiles),
        compute_slices=gpu.compute_slices,
        memory_slices=gpu.memory_slices,
        maximal=ordered,
        alone=alone,
    )
    _GEOMETRY[gpu.key] = geo
    return geo


def _pareto(vectors: Iterable[Vector]) -> tuple[Vector, ...]:
    """Drop vectors dominated componentwise by another; deterministic order."""
    kept: list[Vector] = []
    for v in sorted(set(vectors), key=lambda v: (-sum(v), tuple(-x for x in v))):
        if not any(v != w and all(a <= b for a, b in zip(v, w)) for w in kept):
            kept.append(v)
    return tuple(kept)


def _columns(geo: _Geometry, idx: Sequence[int]) -> tuple[Vector, ...]:
    """Maximal layouts projected onto the demanded profiles, Pareto-maximal only.

    Projection is safe: dropping instances from a creatable layout keeps it
    creatable (fewer placements to find, media limits are upper bounds)."""
    return _pareto(tuple(v[i] for i in idx) for v in geo.maximal if any(v[i] for i in idx))


def _unknown_profile(geo: _Geometry, name: str) -> UnknownProfileError:
    close = difflib.get_close_matches(name, geo.names, n=3, cutoff=0.5)
    m = re.match(r"(\d+)g\.", name)
    if m:  # same compute size first: 3g.20gb on an 80GB part means 3g.40gb
        same = [n for n in geo.names if n.startswith(f"{m.group(1)}g.") and n not in close]
        close = [n for n in close if n.startswith(f"{m.group(1)}g.")] + same + [
            n for n in close if not n.startswith(f"{m.group(1)}g.")
        ]
    return UnknownProfileError(name, geo.key, tuple(dict.fromkeys(close))[:3], geo.names)


def _demand_vector(geo: _Geometry, demand: Mapping[str, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    index = {n.lower(): i for i, n in enumerate(geo.names)}  # names match case-insensitively, like the catalog
    for raw, count in demand.items():
        name = str(raw).strip().lower()
        if name not in index:
            raise _unknown_profile(geo, str(raw))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise PlanError(f"demand for {raw} must be a whole number >= 0, got {count!r}")
        if count:
            out[index[name]] = out.get(index[name], 0) + count
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- covering solver


@dataclass(frozen=True)
class _Cover:
    counts: tuple[int, ...]  # GPUs per column
    lower_bound: int
    bounds: dict[str, int]
    method: str


def _greedy(columns: Sequence[Vector], demand: Vector, weight: Sequence[float]) -> list[int]:
    """Batched greedy: take the column covering the most remaining (weighted) demand,
    as many times as it stays fully useful. Always feasible: every demanded profile
    appears in some column."""
    residual = list(demand)
    counts = [0] * len(columns)
    while any(r > 0 for r in residual):
        best, best_score = -1, -1.0
        for j, col in enumerate(columns):
            score = sum(min(a, r) * w for a, r, w in zip(col, residual, weight) if r > 0)
            if score > best_score + 1e-12:
                best, best_score = j, score
        col = columns[best]
        k = min((r // a for a, r in zip(col, residual) if a and r > 0), default=1)
        k = max(k, 1)
        counts[best] += k
        residual = [max(r - a * k, 0) for a, r in zip(col, residual)]
    return counts


def _greedy_weights(geo: _Geometry, idx: Sequence[int]) -> list[list[float]]:
    """Several notions of 'how much of a GPU a profile takes'; the greedy runs with
    each and keeps the best plan (cheap, and no single one wins everywhere)."""
    c = [geo.compute[i] / geo.compute_slices for i in idx]
    m = [geo.memory[i] / geo.memory_slices for i in idx]
    return [
        [a + b for a, b in zip(c, m)],
        [max(a, b) for a, b in zip(c, m)],
        c,
        m,
        [1.0 / geo.alone[i] for i in idx],
        [1.0] * len(idx),
    ]


def _slice_bounds(geo: _Geometry, idx: Sequence[int], demand: Vector) -> dict[str, int]:
    bounds = {
        "compute slices": -(-sum(geo.compute[i] * d for i, d in zip(idx, demand)) // geo.compute_slices),
        "memory slices": -(-sum(geo.memory[i] * d for i, d in zip(idx, demand)) // geo.memory_slices),
    }
    worst = max(zip(idx, demand), key=lambda t: (-(-t[1] // geo.alone[t[0]]), -t[0]))
    bounds[f"instance limit of {geo.names[worst[0]]}"] = -(-worst[1] // geo.alone[worst[0]])
    return bounds


def _weight_bound(columns: Sequence[Vector], demand: Vector, names: Sequence[str]) -> tuple[int, str]:
    """Best bound ceil(w.d / max_L w.a_L) over small integer weights w >= 0.

    Valid for every w: each GPU provides at most max_L w.a_L weighted instances.
    Compute and memory slices are two such w; the LP dual optimum is the best one,
    and on these tables it is almost always a vector of small integers, so trying
    them closes most cases without importing a solver."""
    k = len(demand)
    top = 4 if k <= 4 else 2 if k <= 6 else 1 if k <= 10 else 0
    best, label = 0, ""
    if top == 0:
        return best, label
    for w in itertools.product(range(top + 1), repeat=k):
        cap = max(sum(a * b for a, b in zip(w, col)) for col in columns)
        if cap == 0:
            continue
        bound = -(-sum(a * b for a, b in zip(w, demand)) // cap)
        if bound > best:
            terms = " + ".join(n if a == 1 else f"{a}×{n}" for a, n in zip(w, names) if a)
            best, label = bound, f"weighted instances ({terms} <= {cap} per GPU)"
    return best, label


def _solve_cover(
    columns: Sequence[Vector],
    demand: Vector,
    weights: Sequence[Sequence[float]],
    bounds: dict[str, int],
    time_limit: float,
    names: Sequence[str] = (),
) -> _Cover:
    bounds = dict(bounds)
    lb = max(bounds.values(), default=0)
    greedy = min((_greedy(columns, demand, w) for w in weights), key=sum)
    if sum(greedy) <= lb:
        return _Cover(tuple(greedy), lb, bounds, "greedy (meets the slice bound)")
    wb, label = _weight_bound(columns, demand, names or [f"p{i}" for i in range(len(demand))])
    if wb > lb:
        bounds[label] = lb = wb
    if sum(greedy) <= lb:
        return _Cover(tuple(greedy), lb, bounds, "greedy (meets the weighted bound)")

    from gpuplan.mig import highs  # HiGHS only for what the cheap paths cannot prove

    n = len(columns)
    rows = [{j: float(c[r]) for j, c in enumerate(columns) if c[r]} for r in range(len(demand))]
    lo, hi = [float(d) for d in demand], [highs.INF] * len(demand)
    bounds = dict(bounds)
    lp = highs.solve([1.0] * n, rows, lo, hi, [0.0] * n, [highs.INF] * n)
    if lp.optimal and lp.value is not None:
        bounds["LP relaxation"] = math.ceil(lp.value - 1e-6)
    res = highs.solve([1.0] * n, rows, lo, hi, [0.0] * n, [float(sum(greedy))] * n, [True] * n,
                      time_limit=time_limit)
    best, method = greedy, "greedy (MILP found nothing better in the time limit)"
    if res.x is not None:
        x = [int(round(v)) for v in res.x]
        covered = all(sum(c[r] * k for c, k in zip(columns, x)) >= demand[r] for r in range(len(demand)))
        if covered and sum(x) <= sum(best):
            best = x
            method = "MILP (HiGHS), proved optimal" if res.optimal else "MILP (HiGHS), time limit"
    if res.optimal and res.value is not None:
        bounds["MILP"] = math.ceil(res.value - 1e-6)  # HiGHS proved no integer plan is smaller
    elif res.dual_bound is not None:
        bounds["MILP dual bound"] = math.ceil(res.dual_bound - 1e-6)
    return _Cover(tuple(best), max(bounds.values()), bounds, method)


def _trim(gpus: list[list[int]], surplus: list[int]) -> list[list[int]]:
    """Remove surplus instances, emptying GPUs from the end first so that the
    changed GPUs are few and the groups stay large."""
    for r, extra in enumerate(surplus):
        for g in reversed(gpus):
            if extra <= 0:
                break
            take = min(g[r], extra)
            g[r] -= take
            extra -= take
    return [g for g in gpus if any(g)]


def _group(vectors: Iterable[Vector]) -> list[tuple[Vector, int]]:
    counts = Counter(vectors)
    return sorted(counts.items(), key=lambda t: (-t[1], tuple(-x for x in t[0])))


# --------------------------------------------------------------------------- public API


def format_layout(layout: Mapping[str, int]) -> str:
    """``{3g.40gb, 2g.20gb, 1g.10gb×2}``; ``{}`` for an empty (whole-GPU) layout."""
    parts = [name if n == 1 else f"{name}×{n}" for name, n in layout.items() if n]
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class Plan:
    """The fewest GPUs of one model that provide a MIG demand, with a proved bound."""

    gpu: str
    demand: dict[str, int]
    gpus: int
    lower_bound: int  # no plan can use fewer GPUs (see ``bounds`` for why)
    layouts: tuple[tuple[dict[str, int], int], ...]  # (layout, number of GPUs), largest group first
    naive_gpus: int  # one profile per GPU, as `all-<profile>` configs do
    idle_compute_slices: int
    idle_memory_slices: int
    bounds: dict[str, int] = field(default_factory=dict)  # every bound that was proved
    method: str = ""

    @property
    def gap(self) -> int:
        return self.gpus - self.lower_bound

    @property
    def optimal(self) -> bool:
        return self.gap == 0

    @property
    def saving(self) -> int:
        return self.naive_gpus - self.gpus

    @property
    def binding_bound(self) -> str:
        return next((k for k, v in self.bounds.items() if v == self.lower_bound), "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "demand": dict(self.demand),
            "gpus": self.gpus,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "optimal": self.optimal,
            "layouts": [{"layout": dict(lay), "gpus": n} for lay, n in self.layouts],
            "naive_gpus": self.naive_gpus,
            "saving": self.saving,
            "idle_compute_slices": self.idle_compute_slices,
            "idle_memory_slices": self.idle_memory_slices,
            "bounds": dict(self.bounds),
            "method": self.method,
        }


def naive_gpus(gpu: Any, demand: Mapping[str, int]) -> int:
    """Baseline: each profile on its own GPUs, as many per GPU as fit alone."""
    geo = _geometry(_resolve(gpu))
    dv = _demand_vector(geo, demand)
    return sum(-(-d // geo.alone[i]) for i, d in dv.items())


def plan(gpu: Any, demand: Mapping[str, int], *, time_limit: float = DEFAULT_TIME_LIMIT) -> Plan:
    """Plan ``demand`` (profile name -> instances) on the fewest GPUs of ``gpu``.

    ``gpu`` is a ``GpuModel`` or a name ``gpuplan.catalog.resolve_gpu`` knows.
    Raises ``UnknownGpuError``/``UnknownProfileError`` (both ``PlanError``)."""
    model = _resolve(gpu)
    geo = _geometry(model)
    dv = _demand_vector(geo, demand)
    clean = {geo.names[i]: d for i, d in dv.items()}
    if not dv:
        return Plan(geo.key, clean, 0, 0, (), 0, 0, 0, {}, "empty demand")
    idx, dem = tuple(dv), tuple(dv.values())
    columns = _columns(geo, idx)
    names = [geo.names[i] for i in idx]
    cover = _solve_cover(columns, dem, _greedy_weights(geo, idx), _slice_bounds(geo, idx, dem), time_limit, names)

    per_gpu = [list(col) for col, n in zip(columns, cover.counts) for _ in range(n)]
    supply = [sum(g[r] for g in per_gpu) for r in range(len(idx))]
    per_gpu = _trim(per_gpu, [s - d for s, d in zip(supply, dem)])
    groups = [({geo.names[idx[r]]: v[r] for r in range(len(idx)) if v[r]}, n) for v, n in _group(map(tuple, per_gpu))]
    _assert_creatable(model, (lay for lay, _ in groups))

    used_c = sum(geo.compute[i] * d for i, d in dv.items())
    used_m = sum(geo.memory[i] * d for i, d in dv.items())
    n_gpus = len(per_gpu)
    return Plan(
        gpu=geo.key,
        demand=clean,
        gpus=n_gpus,
        lower_bound=cover.lower_bound,
        layouts=tuple(groups),
        naive_gpus=sum(-(-d // geo.alone[i]) for i, d in dv.items()),
        idle_compute_slices=n_gpus * geo.compute_slices - used_c,
        idle_memory_slices=n_gpus * geo.memory_slices - used_m,
        bounds=cover.bounds,
        method=cover.method,
    )


def _assert_creatable(model: Any, layouts: Iterable[Mapping[str, int]]) -> None:
    """Post-condition: the MIG engine must accept every layout we emit."""
    from gpuplan.mig.solver import check_layout

    for layout in layouts:
        check = check_layout(model, dict(layout))
        if not check.ok:  # a planner bug, not a user error: let it surface as exit 4
            raise AssertionError(f"planner produced a layout the MIG engine rejects on {model.key}: {dict(layout)}")
