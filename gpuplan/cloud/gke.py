"""GKE GPU machine types: which GPU, how many, and which MIG partition sizes GKE creates.

Data: ``data/gke-gpu-machine-types.json`` (its ``source`` names the Compute Engine and GKE
pages it was copied from and the date). Only accelerator-optimized machine types, whose GPU
model and count the machine type fixes (A2, A3, A4, G2); N1 machine types with attached
GPUs (T4, V100, P100, P4) are not in the table: their GPU count is chosen per node pool, and
gpuplan reports a pool on one as an unknown machine type (GP662). Refresh: edit the JSON
from the two pages and update its ``retrieved`` date (docs/gke.md).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path

from gpuplan.cloud.machine import Machine

DATA = Path(__file__).parent / "data" / "gke-gpu-machine-types.json"


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def machine_types() -> dict[str, Machine]:
    t = _table()
    acc = t["accelerators"]
    return {name: Machine(name=name, gpu=m["gpu"], gpu_count=m["gpuCount"], accelerator=m["accelerator"],
                          mig_profiles=tuple(acc[m["accelerator"]]["migPartitionSizes"]))
            for name, m in t["machineTypes"].items()}


def machine_type(name: str) -> Machine | None:
    return machine_types().get(name)


def source() -> dict[str, str]:
    return dict(_table()["source"])


def closest(name: str) -> str | None:
    """The known machine type nearest to a misspelt one (for a "did you mean")."""
    hits = difflib.get_close_matches(name, list(machine_types()), n=1)
    return hits[0] if hits else None


def accelerator_gpu(accelerator: str) -> str | None:
    """The GPU model of a GKE accelerator name (``nvidia-a100-80gb``, the node label
    ``cloud.google.com/gke-accelerator``), from the table's machine types."""
    return next((m.gpu for m in machine_types().values() if m.accelerator == accelerator), None)
