"""Benchmark the NVML node probe on the 8x H100 fixture (fake NVML).

    python benchmarks/bench_probe.py [--repeat 200] [--fleet 1000]

Prints a Markdown table (figures in docs/performance-probe.md). What is timed:
- probe: ``probe_node`` on a fresh fake (all NVML queries, model building);
- dump: the deterministic YAML writer on that inventory;
- CLI: ``python -m gpuplan probe --fake ...`` end to end, interpreter start included;
- load: ``load_inventory`` of ``--fleet`` copies of the inventory, as YAML and as
  JSON (``inventory pull --format``): what a fleet rule run pays for reading
  inventory/ at that many nodes.
The target from the issue: one 8-GPU node probed in under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpuplan.probe.collect import probe_node  # noqa: E402
from gpuplan.probe.fake import load_fake  # noqa: E402
from gpuplan.probe.inventory import dump_json, dump_yaml  # noqa: E402
from gpuplan.probe.reader import load_inventory  # noqa: E402

FIXTURE = REPO / "tests" / "probe" / "fixtures" / "h100-sxm-8x.yaml"


def _stats(samples: list[float]) -> tuple[float, float, float]:
    s = sorted(samples)
    p95 = s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]
    return s[0], statistics.median(s), p95


def _row(name: str, samples: list[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    lo, med, p95 = _stats(samples)
    return f"| {name} | {len(samples)} | {lo * unit:.2f} {suffix} | {med * unit:.2f} {suffix} | {p95 * unit:.2f} {suffix} |"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--cli-repeat", type=int, default=10)
    ap.add_argument("--fleet", type=int, default=1000)
    args = ap.parse_args()

    probe_t, calls, dump_t = [], 0, []
    for _ in range(args.repeat):
        fake = load_fake(FIXTURE)  # fresh state each time; parse not timed
        t = time.perf_counter()
        inv = probe_node(fake, node_name="dgx-h100-01", hostname="dgx-h100-01", version="bench", source="fake")
        probe_t.append(time.perf_counter() - t)
        calls = sum(fake.calls.values())
        t = time.perf_counter()
        text = dump_yaml(inv)
        dump_t.append(time.perf_counter() - t)

    cli_t = []
    for _ in range(args.cli_repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gpuplan", "probe", "--fake", str(FIXTURE)], cwd=REPO,
                       check=True, capture_output=True)
        cli_t.append(time.perf_counter() - t)

    load_t: dict[str, list[float]] = {}
    for suffix, dump in ((".yaml", dump_yaml), (".json", dump_json)):
        with tempfile.TemporaryDirectory() as d:
            for i in range(args.fleet):
                meta = inv.metadata.model_copy(update={"name": f"node-{i:04d}"})
                Path(d, f"node-{i:04d}{suffix}").write_text(dump(inv.model_copy(update={"metadata": meta})))
            t = time.perf_counter()
            invs, diags = load_inventory([d])
            load_t[suffix] = [time.perf_counter() - t]
            assert len(invs) == args.fleet and not diags, diags[:3]

    print(f"8x H100 fixture: {len(inv.gpus)} GPUs, {calls} NVML calls per probe, {len(text)} bytes of YAML\n")
    print("| step | runs | min | median | p95 |")
    print("|---|---|---|---|---|")
    print(_row("probe_node (fake NVML)", probe_t))
    print(_row("dump_yaml", dump_t))
    print(_row("gpuplan probe --fake (process)", cli_t))
    for suffix, samples in load_t.items():
        print(_row(f"load_inventory, {args.fleet} {suffix} files", samples, unit=1.0, suffix="s"))
    worst = max(probe_t)
    print(f"\nslowest probe: {worst * 1000:.2f} ms (target < 1000 ms): {'OK' if worst < 1.0 else 'TOO SLOW'}")
    return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
