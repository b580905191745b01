"""Benchmark the MIG planner (figures recorded in docs/performance-planner.md).

    python benchmarks/bench_planner.py                # all three parts
    python benchmarks/bench_planner.py --per-model 200 --seed 7

1. Random demand mixes of up to 200 instances on every MIG model: how often the
   plan is proved optimal (gap 0), the largest gap, which path solved it, time.
2. A fleet-sized demand (10,000 instances across three models), cold (first call
   in this process: catalog, layout enumeration and the highspy import included) and warm,
   both as three `plan()` calls and as one `plan_fleet()` over three pools.
3. Savings against the naive one-profile-per-GPU plan on realistic mixes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter

FLEET_DEMAND = {
    # 10,000 instances: inference-heavy small slices, some training-size slices
    "A100-SXM4-80GB": {"3g.40gb": 700, "2g.20gb": 900, "1g.20gb": 400, "1g.10gb": 1800},
    "H100-SXM5-80GB": {"7g.80gb": 150, "4g.40gb": 250, "3g.40gb": 600, "2g.20gb": 800, "1g.10gb": 1200},
    "H200-SXM-141GB": {"3g.71gb": 500, "2g.35gb": 700, "1g.35gb": 600, "1g.18gb": 1400},
}

REALISTIC = [
    ("A100-SXM4-80GB", "LLM inference mix", {"3g.40gb": 24, "2g.20gb": 30, "1g.10gb": 50}),
    ("A100-SXM4-80GB", "notebooks + small training", {"4g.40gb": 6, "3g.40gb": 9, "2g.20gb": 14, "1g.20gb": 9, "1g.10gb": 17}),
    ("H100-SXM5-80GB", "embedding + rerank services", {"2g.20gb": 41, "1g.20gb": 13, "1g.10gb": 97}),
    ("H100-SXM5-80GB", "one of every size", {"7g.80gb": 1, "4g.40gb": 1, "3g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1, "1g.10gb": 1}),
    ("A30", "A30 dev pool", {"2g.12gb": 5, "1g.6gb": 11, "1g.6gb+me": 2}),
    ("H200-SXM-141GB", "H200 serving", {"4g.71gb": 5, "3g.71gb": 13, "2g.35gb": 20, "1g.18gb": 40}),
]


def random_mixes(seed: int, per_model: int) -> None:
    from gpuplan.catalog import mig_gpus
    from gpuplan.mig.planner import plan

    print(f"== 1. random mixes, up to 200 instances, {per_model} per model, seed {seed}")
    print(f"{'model':32} {'cases':>5} {'gap 0':>7} {'max gap':>7} {'fast':>5} {'milp':>5} {'p50 ms':>7} {'max ms':>7}")
    rng = random.Random(seed)
    total = optimal = worst = 0
    gaps: Counter = Counter()
    for gpu in mig_gpus():
        plan(gpu, {gpu.profile_names[0]: 1})  # warm the layout cache: time the planning, not the enumeration
        names = list(gpu.profile_names)
        times, gap0, maxgap, milp = [], 0, 0, 0
        for _ in range(per_model):
            k = rng.randint(1, min(5, len(names)))
            chosen = rng.sample(names, k)
            n = rng.randint(1, 200)
            cuts = sorted(rng.randint(0, n) for _ in range(k - 1))
            demand = {p: b - a for p, a, b in zip(chosen, [0, *cuts], [*cuts, n])}
            t = time.perf_counter()
            p = plan(gpu, demand)
            times.append((time.perf_counter() - t) * 1000)
            gap0 += p.gap == 0
            maxgap = max(maxgap, p.gap)
            milp += p.method.startswith("MILP")
            gaps[p.gap] += 1
        total += per_model
        optimal += gap0
        worst = max(worst, maxgap)
        print(
            f"{gpu.key:32} {per_model:5d} {100 * gap0 / per_model:6.1f}% {maxgap:7d} {per_model - milp:5d} {milp:5d} "
            f"{statistics.median(times):7.2f} {max(times):7.1f}"
        )
    print(f"ALL: {total} cases, proved optimal {optimal} ({100 * optimal / total:.2f}%), largest gap {worst} GPU(s); gaps {dict(gaps)}")


_COLD = """
import time
t0 = time.perf_counter()
from gpuplan.mig.planner import plan
from gpuplan.mig.planner_fleet import PoolCapacity, plan_fleet
D = {demand!r}
if {fleet!r}:
    pools = [PoolCapacity(m.lower(), m, 5000) for m in D]
    plan_fleet(pools, {{f"{{m}}/{{p}}": n for m, d in D.items() for p, n in d.items()}})
else:
    for m, d in D.items():
        plan(m, d)
print(time.perf_counter() - t0)
"""


def _cold(fleet: bool) -> float:
    """Seconds in a fresh interpreter: gpuplan, catalog, layout enumeration, highspy if used."""
    import subprocess

    code = _COLD.format(demand=FLEET_DEMAND, fleet=fleet)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def fleet_sized() -> None:
    print("\n== 2. fleet-sized demand: 10,000 instances across three models")
    total = sum(sum(d.values()) for d in FLEET_DEMAND.values())
    assert total == 10_000, total
    for fleet in (False, True):
        runs = sorted(_cold(fleet) for _ in range(3))
        what = "plan_fleet(3 pools)" if fleet else "plan() x3"
        print(f"{what}, fresh process incl. imports: median {runs[1]:.3f} s, max {runs[2]:.3f} s (3 runs)")
    from gpuplan.mig.planner import plan
    from gpuplan.mig.planner_fleet import PoolCapacity, plan_fleet

    for label in ("first call", "warm"):
        t = time.perf_counter()
        plans = {m: plan(m, d) for m, d in FLEET_DEMAND.items()}
        dt = time.perf_counter() - t
        gpus = sum(p.gpus for p in plans.values())
        naive = sum(p.naive_gpus for p in plans.values())
        print(f"plan() x3 ({label}): {dt:.3f} s -> {gpus} GPUs (bound {sum(p.lower_bound for p in plans.values())}), naive {naive}")
        for m, p in plans.items():
            print(f"    {m:16} {p.gpus:5d} GPUs  bound {p.lower_bound:5d}  naive {p.naive_gpus:5d}  {len(p.layouts)} layouts  [{p.method}]")
    # the same three plans with the cheap paths switched off, so HiGHS does all the work
    from gpuplan.mig import planner

    saved = planner._weight_bound, planner._greedy_weights
    planner._weight_bound = lambda *a, **k: (0, "")
    planner._greedy_weights = lambda geo, idx: [[1.0] * len(idx)]
    try:
        t = time.perf_counter()
        plans = {m: plan(m, d) for m, d in FLEET_DEMAND.items()}
        dt = time.perf_counter() - t
    finally:
        planner._weight_bound, planner._greedy_weights = saved
    methods = sorted({p.method for p in plans.values()})
    print(f"plan() x3 (MILP forced, first highspy import included): {dt:.3f} s -> {sum(p.gpus for p in plans.values())} GPUs {methods}")
    pools = [PoolCapacity(m.lower(), m, 5000, price) for m, price in zip(FLEET_DEMAND, (2.0, 3.5, 4.5))]
    demand = {f"{m}/{prof}": n for m, d in FLEET_DEMAND.items() for prof, n in d.items()}
    for objective in ("gpus", "cost"):
        t = time.perf_counter()
        fp = plan_fleet(pools, demand, objective=objective)
        dt = time.perf_counter() - t
        print(f"plan_fleet(objective={objective}): {dt:.3f} s -> {fp.gpus} GPUs, ${fp.cost_per_hour:,.2f}/h, optimal={fp.optimal}")
    # the same demand with keys any model may serve (shared profile names only), cost objective
    t = time.perf_counter()
    open_demand = Counter()
    for d in FLEET_DEMAND.values():
        open_demand.update(d)
    fp = plan_fleet(pools, dict(open_demand), objective="cost")
    dt = time.perf_counter() - t
    split = ", ".join(f"{p.name}={p.gpus}" for p in fp.pools)
    print(f"plan_fleet(unpinned keys, cost): {dt:.3f} s -> {fp.gpus} GPUs ({split}), ${fp.cost_per_hour:,.2f}/h, optimal={fp.optimal}")


def realistic() -> None:
    from gpuplan.mig.planner import format_layout, plan

    print("\n== 3. savings against the naive one-profile-per-GPU plan")
    for model, label, demand in REALISTIC:
        p = plan(model, demand)
        pct = 100 * p.saving / p.naive_gpus if p.naive_gpus else 0.0
        arg = ",".join(f"{k}={v}" for k, v in demand.items())
        print(f"{label} ({model}): naive {p.naive_gpus}, plan {p.gpus} (bound {p.lower_bound}), saving {p.saving} ({pct:.0f}%)")
        print(f"    gpuplan mig plan {model} --demand {arg}")
        for layout, n in p.layouts:
            print(f"      {n:3d} x {format_layout(layout)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--per-model", type=int, default=100)
    ap.add_argument("--only", choices=["random", "fleet", "realistic"])
    args = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}")
    if args.only in (None, "fleet"):
        fleet_sized()  # first, so that 'cold' really is cold
    if args.only in (None, "random"):
        random_mixes(args.seed, args.per_model)
    if args.only in (None, "realistic"):
        realistic()
    return 0


if __name__ == "__main__":
    sys.exit(main())
