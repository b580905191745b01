"""Benchmark the MIG geometry engine.

    python benchmarks/bench_mig.py [--runs N]

Prints a Markdown table: `gpuplan mig layouts` for every model (whole process,
wall and CPU; and in-process, cold and cached) and single `check_layout`
decisions (cold process-wide, uncached, cached).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

LAYOUTS = [
    {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},  # creatable, needs backtracking
    {"4g.20gb": 1, "2g.10gb": 2},  # not creatable (alignment)
    {"1g.5gb": 7},
    {"3g.20gb": 2, "1g.5gb": 1},  # not creatable (memory)
    {"4g.20gb": 1, "3g.20gb": 1},
]


def proc(cmd: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    gp = [sys.executable, "-m", "gpuplan"]
    rows: list[tuple[str, str]] = []

    for label, cmd in [
        ("`python -c pass` (interpreter floor)", [sys.executable, "-c", "pass"]),
        ("`gpuplan --version`", gp + ["--version"]),
        ("`gpuplan mig layouts all` (30 MIG models)", gp + ["mig", "layouts", "all"]),
        ("`gpuplan mig layouts all --maximal --json`", gp + ["mig", "layouts", "all", "--maximal", "--json"]),
        ("`gpuplan mig layouts A100-SXM4-80GB`", gp + ["mig", "layouts", "A100-SXM4-80GB"]),
        ("`gpuplan mig check A100-40GB 3g.20gb,2g.10gb,1g.5gb=2`",
         gp + ["mig", "check", "A100-40GB", "3g.20gb,2g.10gb,1g.5gb=2"]),
    ]:
        res = [proc(cmd) for _ in range(args.runs)]
        rows.append((label, f"wall {med([w for w, _ in res]) * 1e3:.0f} ms, CPU {med([c for _, c in res]) * 1e3:.0f} ms"))

    from gpuplan.catalog import all_gpus, mig_gpus
    from gpuplan.mig import solver

    all_gpus()
    cold = []
    for _ in range(args.runs):
        solver._enumerate_table.cache_clear()
        solver._maximal_table.cache_clear()
        solver._place.cache_clear()
        solver._check.cache_clear()
        t = time.perf_counter()
        for g in mig_gpus():
            solver.enumerate_layouts(g)
            solver.enumerate_layouts(g, maximal=True)
        cold.append(time.perf_counter() - t)
    t = time.perf_counter()
    for g in mig_gpus():
        solver.enumerate_layouts(g)
    warm = time.perf_counter() - t
    rows.append(("in-process: all + maximal layouts, every model, cold caches", f"{med(cold) * 1e3:.1f} ms"))
    rows.append(("in-process: all layouts, every model, cached", f"{warm * 1e6:.0f} µs"))

    n = 2000
    t = time.perf_counter()
    for i in range(n):
        solver._check.cache_clear()
        solver._place.cache_clear()
        solver._instances.cache_clear()
        solver.check_layout("A100-SXM4-40GB", LAYOUTS[i % len(LAYOUTS)])
    uncached = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for i in range(n * 10):
        solver.check_layout("A100-SXM4-40GB", LAYOUTS[i % len(LAYOUTS)])
    cached = (time.perf_counter() - t) / (n * 10)
    solver._check.cache_clear()
    t = time.perf_counter()
    r = solver.check_layout("A100-SXM4-40GB", {"4g.20gb": 1, "2g.10gb": 2})
    _ = r.suggestions
    first_fail = time.perf_counter() - t
    rows.append(("`check_layout` uncached (mean of 5 layouts, caches cleared each call)", f"{uncached * 1e6:.0f} µs"))
    rows.append(("`check_layout` cached (memo hit)", f"{cached * 1e6:.1f} µs"))
    rows.append(("failing `check_layout` + its suggestions (layouts cached)", f"{first_fail * 1e6:.0f} µs"))

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"runs={args.runs} (median)\n")
    print("| what | time |\n|---|---|")
    for a, b in rows:
        print(f"| {a} | {b} |")


if __name__ == "__main__":
    main()
