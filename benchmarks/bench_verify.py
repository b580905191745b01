#!/usr/bin/env python3
"""`gpuplan verify` against the tools people use to check manifests, on the
XL tree (the output of a 2,000-node, 1,000-tenant fleet: ~15,000 objects).

    pip install -e '.[bench]'
    python benchmarks/bench_verify.py [--nodes 2000 --tenants 1000] [--sample 10] [--runs 3]

Tools, each as a whole process, CPU time (user+sys of the children: the
machine is shared, wall time is noisy) and wall time, medians:

* ``gpuplan verify DIR`` — pinned strict CRD schemas + every CEL rule, core
  kinds through kubernetes-validate's schemas;
* ``kubernetes-validate --strict`` (PyPI) — core kinds only (CRDs: "schema not
  found"); it reloads its schemas for every object, so it runs on every
  ``--sample``-th file and the figure is scaled to the whole tree;
* ``check-jsonschema`` (PyPI) — one JSON Schema per run and one document per
  file: the tree is split into one file per object and the tool runs once per
  kind, with the pinned CRD schema or kubernetes-validate's strict schema; no
  CEL;
* kubeconform is not on PyPI, npm or Debian (a Go binary from GitHub releases),
  so it is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from benchmarks.make_fleet import make  # noqa: E402


def run(cmd: list[str], runs: int, cwd: Path | None = None) -> tuple[float, float, int]:
    """(median CPU s, median wall s, exit code) of ``cmd``."""
    cpu, wall = [], []
    rc = 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        rc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(REPO)}).returncode
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall), rc


def split_tree(tree: Path, out: Path) -> dict[tuple[str, str], list[Path]]:
    """One file per object, grouped by (apiVersion, kind)."""
    import yaml

    groups: dict[tuple[str, str], list[Path]] = {}
    n = 0
    for f in sorted(tree.rglob("*.yaml")):
        if f.name in ("values.yaml", "kustomization.yaml"):
            continue
        for d in yaml.safe_load_all(f.read_text()):
            if not isinstance(d, dict) or "kind" not in d:
                continue
            n += 1
            p = out / f"{n:06d}.json"
            p.write_text(json.dumps(d))
            groups.setdefault((d["apiVersion"], d["kind"]), []).append(p)
    return groups


def schema_for(api: str, kind: str, version: str, local: Path) -> str | None:
    """The schema file check-jsonschema gets: the pinned CRD, or
    kubernetes-validate's strict schema with its ``/api/_definitions.json``
    references pointed at a local copy (offline: it would fetch them)."""
    import re

    import kubernetes_validate

    from gpuplan.upstream.pins import crd_groups, crd_schema_path

    group, _, v = api.rpartition("/")
    if group in crd_groups():
        p = crd_schema_path(group, kind, v)
        return str(p) if p.is_file() else None
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
    p = root / f"{kind.lower()}-{short}.json"
    if not p.is_file():
        return None
    local.mkdir(exist_ok=True)
    defs = local / "_definitions.json"
    for src, dst in ((root / "_definitions.json", defs), (p, local / p.name)):
        if not dst.exists():
            doc = json.loads(src.read_text())
            doc.pop("$id", None)
            dst.write_text(json.dumps(doc).replace('"/api/_definitions.json', f'"{defs.as_uri()}'))
    return str(local / p.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sample", type=int, default=10, help="kubernetes-validate runs on every N-th file")
    args = ap.parse_args(argv)
    k8s = "1.33.0"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "fleet.yaml").write_text(make(args.nodes, args.tenants))
        subprocess.run([sys.executable, "-m", "gpuplan", "build", "fleet.yaml"], cwd=root, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
        tree = root / "generated"
        files = sorted(str(p) for p in tree.rglob("*.yaml") if p.name not in ("values.yaml", "kustomization.yaml"))
        split = root / "split"
        split.mkdir()
        groups = split_tree(tree, split)
        objects = sum(len(v) for v in groups.values())
        print(f"XL tree: {args.nodes} nodes, {args.tenants} tenants -> {len(files)} manifest files, {objects} objects "
              f"({', '.join(f'{len(v)} {k[1]}' for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1])))})")
        rows = []
        cpu, wall, rc = run([sys.executable, "-m", "gpuplan", "verify", "generated"], args.runs, cwd=root)
        rows.append(("gpuplan verify", objects, cpu, wall, rc, "CRD schemas + CEL rules; core kinds"))
        sample = files[:: args.sample]
        cpu, wall, rc = run(["kubernetes-validate", "--strict", "--quiet", "-k", k8s, *sample], 1)
        f = len(files) / len(sample)
        rows.append((f"kubernetes-validate (1/{args.sample} of the files, scaled)", objects, cpu * f, wall * f, rc,
                     "core kinds only; CRDs: schema not found"))
        exe = shutil.which("check-jsonschema")
        if exe:
            tot_cpu = tot_wall = 0.0
            worst = 0
            for (api, kind), paths in sorted(groups.items()):
                schema = schema_for(api, kind, k8s, root / "core-schemas")
                if schema is None:
                    continue
                c, w, r = run([exe, "--schemafile", schema, *map(str, paths)], args.runs)
                tot_cpu += c
                tot_wall += w
                worst = max(worst, r)
            rows.append(("check-jsonschema (one run per kind)", objects, tot_cpu, tot_wall, worst,
                         "CRD and core schemas; no CEL; one object per file"))
        print("\n| tool | objects | CPU s | wall s | exit | checks |\n|---|---|---|---|---|---|")
        for name, n, c, w, r, what in rows:
            print(f"| {name} | {n} | {c:.2f} | {w:.2f} | {r} | {what} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
