#!/usr/bin/env python3
"""Bounded work: `gpuplan validate` time and peak memory against input size.

    python benchmarks/bench_bounds.py [--sizes 1,4,16] [--inventories 250,500,1000] [--runs 1]

Each case is one whole `gpuplan validate --format json` process (start-up
included), measured with wait4: CPU time (user + sys, steadier than wall time
on a shared machine), wall time, and peak resident memory (ru_maxrss). Spec
shapes, each written to the given size in MB (10^6 bytes; the limit is 16 MiB):

* ``fleet``: a valid fleet (benchmarks/make_fleet.py, nodes and tenants scaled);
* ``unknown-keys``: a valid fleet plus one pool holding as many misspelt keys
  as fit (the hostile case: one schema error per key);
* ``bad-items``: ``tiers:`` as a list of integers (one type error per item).

Inventories: a valid fleet whose pool names N nodes, ``inventory: [inventory/]``
with N 8x H100 inventory files (YAML, as `gpuplan inventory pull` writes them).

Prints a Markdown table; the last column is the time per MB (or per 1,000
inventories) relative to the smallest case, 1.00 meaning exactly linear.
Figures in docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.make_fleet import make  # noqa: E402

MB = 1_000_000


def fleet(size: int) -> str:
    # make_fleet: ~167 bytes per node at 2 tenants per 4 nodes
    nodes = max(20, int(size / 167))
    text = make(nodes, nodes // 2)
    while len(text) > size:
        nodes = int(nodes * 0.97)
        text = make(nodes, nodes // 2)
    return text


def unknown_keys(size: int) -> str:
    head = make(20, 10)
    i = head.index("      gpusPerNode:")  # inside the first pool
    keys: list[str] = []
    room = size - len(head)
    n = 0
    while room > 0:
        line = f"      k{n}: 1\n"
        room -= len(line)
        keys.append(line)
        n += 1
    return head[:i] + "".join(keys[:-1]) + head[i:]


def bad_items(size: int) -> str:
    head = make(20, 10)
    i = head.index("  tiers:\n")
    lines = head[i:].split("\n")
    k = 1
    while k < len(lines) and lines[k].startswith("    "):
        k += 1  # the tiers block ends at the next key of spec
    rest = "\n".join(lines[k:])
    n = (size - len(head)) // 2
    return head[:i] + "  tiers: [" + ",".join(["1"] * n) + "]\n" + rest


def run(args: list[str], cwd: Path | None = None) -> tuple[float, float, float, int]:
    """(cpu s, wall s, peak MiB, exit code) of one gpuplan process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss / 1024, proc.returncode


def best(args: list[str], runs: int, cwd: Path | None = None) -> tuple[float, float, float, int]:
    results = [run(args, cwd) for _ in range(runs)]
    return min(results)


def inventory_fleet(work: Path, n: int) -> Path:
    from gpuplan.probe.collect import probe_node
    from gpuplan.probe.fake import load_fake
    from gpuplan.probe.inventory import dump_yaml

    d = work / f"inv{n}"
    (d / "inventory").mkdir(parents=True)
    fake = load_fake(REPO / "tests" / "probe" / "fixtures" / "h100-sxm-8x.yaml")
    inv = probe_node(fake, node_name="node-0", hostname="node-0", version="0.1.0", source="fake")
    template = dump_yaml(inv)
    names = [f"gpu-{i:05d}" for i in range(n)]
    for name in names:
        (d / "inventory" / f"{name}.yaml").write_text(template.replace("node-0", name))
    (d / "fleet.yaml").write_text(
        "apiVersion: gpuplan.dev/v1alpha1\nkind: Fleet\nmetadata: {name: inv}\nspec:\n"
        '  cluster:\n    kubernetesVersion: "1.33"\n    gitops: {repoURL: "https://git.example.com/f.git"}\n'
        "  inventory: [inventory/]\n  pools:\n    - name: train\n      gpu: H100-SXM5-80GB\n"
        "      gpusPerNode: 8\n      nodes: [" + ", ".join(names) + "]\n")
    return d / "fleet.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,4,16", help="spec sizes in MB")
    ap.add_argument("--inventories", default="250,500,1000")
    ap.add_argument("--shapes", default="fleet,unknown-keys,bad-items")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    sizes = [float(s) for s in args.sizes.split(",") if s]
    makers = {"fleet": fleet, "unknown-keys": unknown_keys, "bad-items": bad_items}
    print("| case | input | exit | CPU s | wall s | peak MiB | CPU per unit vs smallest |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for shape in args.shapes.split(","):
            base = None
            for mb in sizes:
                p = work / f"{shape}-{mb:g}.yaml"
                text = makers[shape](int(mb * MB))
                p.write_text(text)
                cpu, wall, peak, code = best(["validate", "--format", "json", str(p)], args.runs)
                per = cpu / mb
                base = base or per
                print(f"| {shape} | {len(text.encode()) / MB:.2f} MB | {code} | {cpu:.2f} | {wall:.2f} | "
                      f"{peak:.0f} | {per / base:.2f} |", flush=True)
        base = None
        for n in [int(x) for x in args.inventories.split(",") if x]:
            spec = inventory_fleet(work, n)
            cpu, wall, peak, code = best(["validate", "--format", "json", str(spec)], args.runs)
            per = cpu / n
            base = base or per
            print(f"| inventories | {n} files | {code} | {cpu:.2f} | {wall:.2f} | {peak:.0f} | {per / base:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
