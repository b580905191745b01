"""Start-up cost of `gpuplan validate`, side by side with its baseline.

    python benchmarks/bench_startup.py [--runs 40] [--python PY] [--gpuplan GPUPLAN]

Runs each command ``--runs`` times, interleaved round-robin so that machine
noise falls on all of them alike, and prints a Markdown table of wall time
(min, median) and CPU time (user+sys, median) with the ratio of medians to
the baseline. Figures are recorded in docs/performance.md.

- baseline: ``python -c "import pydantic, ruamel.yaml, click"``, the yardstick
  the foundation issue sets;
- pydantic floor: the baseline plus one one-field pydantic model: what any
  program with a pydantic model pays, before any of its own code;
- validate: ``gpuplan validate examples/fleet.yaml``, as every run pays it
  (nothing is cached between runs).

Measure an installed gpuplan (``pip install .``), not an editable checkout
when ``PYTHONDONTWRITEBYTECODE`` is set: without byte-code files every run
compiles gpuplan from source and the figures say nothing about users. And
compare like with like: both commands are started as real executables, never
one through a version manager's shell-script shim.
"""

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
FLOOR = (
    "import pydantic, ruamel.yaml, click\n"
    "from pydantic import BaseModel, ConfigDict\n"
    "class A(BaseModel):\n"
    "    model_config = ConfigDict(defer_build=True)\n"
    "    x: int\n"
)


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of one run; wait4 gives the child's own rusage."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a chatty child cannot block
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--gpuplan", default=None,
                    help="the gpuplan script (default: the one beside --python's interpreter)")
    args = ap.parse_args()
    if args.gpuplan is None:
        # Beside the interpreter, not from PATH: version managers put shell-script shims on
        # PATH (pyenv's cost ~100 ms) that the baseline, run by the interpreter itself, skips.
        beside = Path(args.python).parent / "gpuplan"
        args.gpuplan = str(beside) if beside.exists() else shutil.which("gpuplan") or "gpuplan"

    fleet = "examples/fleet.yaml"
    env = dict(os.environ)
    cases = [
        ("baseline: `import pydantic, ruamel.yaml, click`",
         [args.python, "-c", "import pydantic, ruamel.yaml, click"]),
        ("pydantic floor: baseline + one model", [args.python, "-c", FLOOR]),
        ("`gpuplan validate examples/fleet.yaml`", [args.gpuplan, "validate", fleet]),
    ]
    for _ in range(args.warmup):
        for _, cmd in cases:
            _run(cmd, env)
    wall: dict[str, list[float]] = {name: [] for name, _ in cases}
    cpu: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(args.runs):
        for name, cmd in cases:
            w, c = _run(cmd, env)
            wall[name].append(w)
            cpu[name].append(c)

    base = cases[0][0]
    bw, bc = statistics.median(wall[base]), statistics.median(cpu[base])
    print(f"{args.runs} interleaved runs each, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}\n")
    print("| Command | wall min | wall median | CPU median | ratio (wall) | ratio (CPU) |")
    print("|---|---|---|---|---|---|")
    for name, _ in cases:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"| {name} | {min(wall[name]) * 1000:.0f} ms | {w * 1000:.0f} ms | {c * 1000:.0f} ms "
              f"| {w / bw:.2f}x | {c / bc:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
