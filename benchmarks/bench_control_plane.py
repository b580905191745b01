"""What the test control plane costs: the build, a control plane's start-up, the end-to-end tests.

    python benchmarks/bench_control_plane.py [--cold] [--runs 5] [--tests]

- build: ``scripts/control-plane build`` as the README runs it; with ``--cold``, into a fresh
  cache directory and with an empty Go build cache (``GOCACHE``), so every package compiles (the
  Go module cache is kept: downloading is the network's, not the build's);
- up: ``ControlPlane.start`` until the API server is ready, the pinned CRDs are established and
  the controller manager has made the default ServiceAccount, then stop; ``--runs`` times;
- tests: ``python -m pytest -q tests/e2e`` once, with ``--tests``.

Prints a Markdown table (min and median wall seconds); the figures are recorded in
docs/performance.md. No timing is asserted anywhere in the test suite."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from controlplane import ControlPlane, build, built  # noqa: E402
from crds import crd_documents  # noqa: E402


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true", help="build into an empty cache and Go build cache")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tests", action="store_true", help="also time python -m pytest -q tests/e2e")
    a = ap.parse_args()
    rows: list[tuple[str, list[float]]] = []
    if a.cold:
        tmp = Path(tempfile.mkdtemp(prefix="gpuplan-cp-bench-"))
        os.environ["GPUPLAN_CONTROL_PLANE_CACHE"] = str(tmp / "cache")
        os.environ["GOCACHE"] = str(tmp / "gocache")
        rows.append(("build, cold (every package compiled)", [_timed(lambda: build(log=lambda s: print(s, file=sys.stderr)))]))
    else:
        rows.append(("build, cached", [_timed(lambda: build(log=lambda s: None))]))
    bin_dir = built()
    assert bin_dir is not None
    crds = crd_documents()
    ups = []
    for i in range(a.runs):
        d = Path(tempfile.mkdtemp(prefix="gpuplan-cp-up-"))
        cp = ControlPlane(d, bin_dir)
        try:
            ups.append(_timed(lambda: cp.start(("ExtendedResourceToleration",), crds)))
        finally:
            cp.stop()
            shutil.rmtree(d, ignore_errors=True)
    rows.append((f"up: ready, {len(crds)} CRDs established, default ServiceAccount", ups))
    if a.tests:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/e2e"], cwd=REPO)
        rows.append((f"python -m pytest -q tests/e2e (exit {r.returncode})", [time.perf_counter() - t]))
    print("| what | runs | min (s) | median (s) |\n|---|---|---|---|")
    for what, xs in rows:
        print(f"| {what} | {len(xs)} | {min(xs):.1f} | {statistics.median(xs):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
