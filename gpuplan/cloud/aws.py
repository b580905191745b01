"""AWS GPU instance types, as Karpenter v1.14 describes them.

Data: ``data/aws-gpu-instance-types.json`` — a copy of the reference file
(Karpenter's generated instance-type docs), kept as package data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    gpu_name: str | None  # Karpenter's karpenter.k8s.aws/instance-gpu-name (t4, a100, h100, ...)
    gpu_manufacturer: str | None
    gpu_count: int
    gpu_memory_mib: int | None  # per GPU
    cpu: int
    memory_mib: int
    arch: str
    resources: tuple[tuple[str, str], ...]

    def describe_gpus(self) -> str:
        if not self.gpu_count or not self.gpu_name:
            return "no GPU Karpenter can count"
        mem = f" {self.gpu_memory_mib // 1024}GB" if self.gpu_memory_mib else ""
        return f"{self.gpu_count}× {self.gpu_name.upper()}{mem}"


@lru_cache(maxsize=1)
def instance_types() -> dict[str, InstanceType]:
    raw = json.loads(resources.files("gpuplan.cloud").joinpath("data/aws-gpu-instance-types.json").read_text("utf-8"))
    out = {}
    for name in sorted(raw):
        r = raw[name]
        out[name] = InstanceType(
            name=name,
            family=r.get("family", name.split(".")[0]),
            gpu_name=r.get("gpu_name"),
            gpu_manufacturer=r.get("gpu_manufacturer"),
            gpu_count=int(r.get("gpu_count") or 0),
            gpu_memory_mib=int(r["gpu_memory_mib_per_gpu"]) if r.get("gpu_memory_mib_per_gpu") else None,
            cpu=int(r.get("cpu") or 0),
            memory_mib=int(r.get("memory_mib") or 0),
            arch=r.get("arch", "amd64"),
            resources=tuple(sorted((k, str(v)) for k, v in (r.get("resources") or {}).items())),
        )
    return out


def instance_type(name: str) -> InstanceType | None:
    return instance_types().get(name)
