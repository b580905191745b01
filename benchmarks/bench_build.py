#!/usr/bin/env python3
"""Scale benchmark for `gpuplan build` (whole processes, medians).

    python benchmarks/bench_build.py [--nodes 2000 --tenants 1000 --runs 5] [--kustomize]

Reports, for the generated fleet:
  * gpuplan build vs the libyaml floor process (target: at most 2x);
  * gpuplan build vs `kubectl kustomize` of the resulting tree (target: at least 10x faster);
  * linearity: the same at 1/10 of the size (target: 10x input takes at most 11x time),
    both as whole processes and in-process (compile + render only)."""

from __future__ import annotations

import argparse
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.floor_build import FLOORS  # noqa: E402
from benchmarks.make_fleet import make  # noqa: E402


def timed(cmd: list[str], runs: int, setup=None) -> float:
    xs = []
    for _ in range(runs):
        if setup:
            setup()
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        xs.append(time.perf_counter() - t)
    return statistics.median(xs)


def in_process(fleet: Path, runs: int) -> float:
    code = (
        "import time, statistics\n"
        "from gpuplan.compiler import compile_fleet\n"
        f"compile_fleet({str(fleet)!r})\n"
        "xs=[]\n"
        f"for _ in range({runs}):\n"
        "    t=time.perf_counter()\n"
        f"    compile_fleet({str(fleet)!r})\n"
        "    xs.append(time.perf_counter()-t)\n"
        "print(statistics.median(xs))\n"
    )
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def bench(nodes: int, tenants: int, runs: int, work: Path, kustomize: bool) -> dict:
    d = work / f"{nodes}n"
    d.mkdir(parents=True)
    fleet = d / "fleet.yaml"
    fleet.write_text(make(nodes, tenants))
    out = d / "generated"

    def clean():
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(d / "floor", ignore_errors=True)

    gp = timed(["gpuplan", "build", str(fleet), "-o", str(out)], runs, clean)
    subprocess.run(["gpuplan", "build", str(fleet), "-o", str(out)], check=True, stdout=subprocess.DEVNULL)

    import yaml

    objects = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            rel = p.relative_to(out).as_posix()
            text = p.read_text()
            objects[rel] = list(yaml.load_all(text, Loader=yaml.CSafeLoader)) if rel.endswith(".yaml") else text
    pk = d / "objects.pickle"
    pk.write_bytes(pickle.dumps(objects))
    floor = timed([sys.executable, "-c", FLOORS["pyyaml"], str(fleet), str(pk), str(d / "floor")], runs, clean)
    subprocess.run(["gpuplan", "build", str(fleet), "-o", str(out)], check=True, stdout=subprocess.DEVNULL)
    result = {"nodes": nodes, "tenants": tenants, "files": len(objects), "fleet_bytes": fleet.stat().st_size,
              "gpuplan_s": gp, "floor_s": floor, "ratio_floor": gp / floor,
              "compile_s": in_process(fleet, runs)}
    if kustomize and shutil.which("kubectl"):
        k = timed(["kubectl", "kustomize", str(out)], max(1, runs // 2))
        result["kustomize_s"] = k
        result["kustomize_over_gpuplan"] = k / gp
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kustomize", action="store_true", help="also time kubectl kustomize (slow)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = bench(a.nodes, a.tenants, a.runs, Path(tmp), a.kustomize)
        small = bench(a.nodes // 10, a.tenants // 10, a.runs, Path(tmp), False)
    for r in (small, big):
        line = (f"{r['nodes']:>5} nodes {r['tenants']:>5} tenants {r['files']:>5} files "
                f"{r['fleet_bytes'] / 1024:>7.0f} KiB spec | build {r['gpuplan_s']:.2f}s floor {r['floor_s']:.2f}s "
                f"ratio {r['ratio_floor']:.2f} | in-process compile {r['compile_s']:.2f}s")
        if "kustomize_s" in r:
            line += f" | kubectl kustomize {r['kustomize_s']:.2f}s ({r['kustomize_over_gpuplan']:.1f}x slower)"
        print(line)
    print(f"linearity (10x input): whole process {big['gpuplan_s'] / small['gpuplan_s']:.2f}x, "
          f"in-process {big['compile_s'] / small['compile_s']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
