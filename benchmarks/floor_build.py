#!/usr/bin/env python3
"""`gpuplan build` beside the floors it is measured against, in one interleaved run.

    python benchmarks/floor_build.py [--sizes 2000:1000,20000:10000] [--runs 5] [--json OUT]

For each NODES:TENANTS fleet from benchmarks/make_fleet.py (3 namespaces per
tenant), whole processes, one after the other in rotating order within each
round, each measured with wait4: CPU time (user + sys: wall time means little
on a shared machine) and peak resident memory.

* build      `gpuplan build FLEET -o DIR` into an empty directory.
* io-floor   load FLEET with libyaml (yaml.CSafeLoader), then write gpuplan's
             exact bytes (read from a pickle made once, untimed, from the
             build's own tree) into the same files: no program can build the
             tree for less than reading its input and writing its output.
* json-floor load FLEET with libyaml, then write the same objects (parsed from
             the build's tree) through the C `json` encoder into the same
             files: the cost of serialising these objects with a C encoder.
* pyyaml     peer, not a floor: the same objects through stock PyYAML with
             libyaml (`yaml.dump_all(..., Dumper=yaml.CSafeDumper)`).
* validate   `gpuplan validate FLEET` (its growth across sizes is the
             linearity figure).

Ratios are build / floor of medians; docs/performance.md records them."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarks.make_fleet import make  # noqa: E402

# The floor programs: run as `python -c CODE FLEET PICKLE OUT`.
_PRELUDE = """
import os, pickle, sys, yaml
fleet, pk, out = sys.argv[1:4]
with open(fleet, "rb") as fh:
    yaml.load(fh, Loader=yaml.CSafeLoader)
with open(pk, "rb") as fh:
    files = pickle.load(fh)
made = set()
def target(rel):
    full = os.path.join(out, rel)
    d = os.path.dirname(full)
    if d not in made:
        os.makedirs(d, exist_ok=True)
        made.add(d)
    return full
"""
FLOORS = {
    "io-floor": _PRELUDE + """
for rel, data in files.items():
    with open(target(rel), "wb") as fh:
        fh.write(data)
""",
    "json-floor": _PRELUDE + """
import json
enc = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
for rel, docs in files.items():
    with open(target(rel), "wb") as fh:
        if isinstance(docs, str):
            fh.write(docs.encode())
        else:
            fh.write("\\n".join(map(enc, docs)).encode())
""",
    "pyyaml": _PRELUDE + """
for rel, docs in files.items():
    with open(target(rel), "wb") as fh:
        if isinstance(docs, str):
            fh.write(docs.encode())
        else:
            fh.write(yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,
                                   allow_unicode=True, explicit_start=True, encoding="utf-8"))
""",
}


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(CPU seconds, of them in the kernel, peak RSS MiB) of one child process."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]}")
    return ru.ru_utime + ru.ru_stime, ru.ru_stime, ru.ru_maxrss / 1024


def prepare(nodes: int, tenants: int, work: Path, env: dict[str, str]) -> dict:
    import yaml

    d = work / f"{nodes}n"
    d.mkdir(parents=True)
    fleet = d / "fleet.yaml"
    fleet.write_text(make(nodes, tenants))
    ref = d / "ref"
    subprocess.run([sys.executable, "-m", "gpuplan", "build", str(fleet), "-o", str(ref)], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    raw: dict[str, bytes] = {}
    objs: dict[str, object] = {}
    for p in sorted(ref.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            rel = p.relative_to(ref).as_posix()
            raw[rel] = p.read_bytes()
            text = raw[rel].decode()
            objs[rel] = list(yaml.load_all(text, Loader=yaml.CSafeLoader)) if rel.endswith(".yaml") else text
    (d / "raw.pickle").write_bytes(pickle.dumps(raw))
    (d / "objs.pickle").write_bytes(pickle.dumps(objs))
    return {"dir": d, "fleet": fleet, "files": len(raw), "out_bytes": sum(map(len, raw.values())),
            "objects": sum(len(v) for v in objs.values() if isinstance(v, list)),
            "fleet_bytes": fleet.stat().st_size}


def commands(case: dict, name: str, out: Path) -> list[str]:
    py = sys.executable
    if name == "build":
        return [py, "-m", "gpuplan", "build", str(case["fleet"]), "-o", str(out)]
    if name == "validate":
        return [py, "-m", "gpuplan", "validate", str(case["fleet"])]
    pk = case["dir"] / ("raw.pickle" if name == "io-floor" else "objs.pickle")
    return [py, "-c", FLOORS[name], str(case["fleet"]), str(pk), str(out)]


NAMES = ["build", "io-floor", "json-floor", "pyyaml", "validate"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000:1000,20000:10000", help="NODES:TENANTS,...")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--prepare", help=argparse.SUPPRESS)
    ap.add_argument("work", nargs="?", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.prepare:
        nodes, tenants = map(int, a.prepare.split(":"))
        case = prepare(nodes, tenants, Path(a.work), os.environ.copy())
        print(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in case.items()}))
        return 0
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    sizes = [tuple(map(int, s.split(":"))) for s in a.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for nodes, tenants in sizes:
            # Prepared in a child: a child's peak RSS (wait4) starts from the
            # size of the process that forked it, so this one must stay small.
            info = subprocess.run([sys.executable, __file__, "--prepare", f"{nodes}:{tenants}", tmp], env=env,
                                  check=True, capture_output=True, text=True).stdout
            case = {k: Path(v) if k in ("dir", "fleet") else v for k, v in json.loads(info).items()}
            cpu: dict[str, list[float]] = {n: [] for n in NAMES}
            sys_: dict[str, list[float]] = {n: [] for n in NAMES}
            rss: dict[str, float] = {n: 0.0 for n in NAMES}
            for r in range(a.runs):
                order = NAMES[r % len(NAMES):] + NAMES[: r % len(NAMES)]  # rotate: no fixed neighbour
                for name in order:
                    out = case["dir"] / "out"
                    shutil.rmtree(out, ignore_errors=True)
                    os.sync()  # the last case's deletions are not charged to this one
                    c, k, m = measure(commands(case, name, out), env)
                    cpu[name].append(c)
                    sys_[name].append(k)
                    rss[name] = max(rss[name], m)
            med = {n: statistics.median(v) for n, v in cpu.items()}
            # creating thousands of files is kernel time, which varies several-fold with the
            # file system's state: both floors are mostly that, gpuplan's own work is user time
            sys_med = {n: statistics.median(v) for n, v in sys_.items()}
            results.append({"nodes": nodes, "tenants": tenants, "files": case["files"], "objects": case["objects"],
                            "fleet_bytes": case["fleet_bytes"], "out_bytes": case["out_bytes"],
                            "cpu_s": med, "sys_s": sys_med, "peak_mib": rss, "runs": a.runs})
            print(f"{nodes} nodes:", json.dumps(results[-1]), file=sys.stderr, flush=True)
    print("| nodes | tenants | objects | output | build CPU s (kernel) | peak MiB | I/O floor (kernel) | build ÷ I/O | "
          "C-JSON floor | build ÷ C-JSON | stock PyYAML | validate CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        c, k = r["cpu_s"], r["sys_s"]
        print(f"| {r['nodes']:,} | {r['tenants']:,} | {r['objects']:,} | {r['out_bytes'] / 2**20:.1f} MiB | "
              f"{c['build']:.2f} ({k['build']:.2f}) | {r['peak_mib']['build']:.0f} | "
              f"{c['io-floor']:.2f} ({k['io-floor']:.2f}) | "
              f"{c['build'] / c['io-floor']:.2f}× | {c['json-floor']:.2f} | {c['build'] / c['json-floor']:.2f}× | "
              f"{c['pyyaml']:.2f} | {c['validate']:.2f} |")
    for small, big in zip(results, results[1:]):
        k = big["nodes"] / small["nodes"]
        print(f"{k:g}× nodes: validate {big['cpu_s']['validate'] / small['cpu_s']['validate']:.2f}×, "
              f"build {big['cpu_s']['build'] / small['cpu_s']['build']:.2f}×")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
