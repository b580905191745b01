"""AWS GPU instance types, as Karpenter v1.14 describes them.

Data: ``data/aws-gpu-instance-types.json`` — a copy of the reference file
(Karpenter's generated instance-type docs, reference/k8s/facts.md §b), kept as
package data. ``instance-gpu-memory`` there is MiB *per GPU*, as Karpenter's
``karpenter.k8s.aws/instance-gpu-memory`` label.

What the data does not say, and this module adds (marked inferred):

* the NUMA layout: 8-GPU instance types (p3dn, p4d, p4de, p5, p5e, p5en,
  p6-*, g4dn.metal, g5/g6/g6e/g7/g7e.48xlarge) are two-socket hosts with
  four GPUs behind each socket; instance types with one to four GPUs are
  treated as a single NUMA node. **[inferred from the published host
  layouts; an inventory from the node probe always wins.]**
* GPU-to-GPU paths: the SXM parts (p3dn, p4d/p4de, p5*, p6-*) are HGX boards
  with NVLink/NVSwitch; every g* family is PCIe only.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplan.catalog import GpuModel

# Families whose GPUs sit on an NVLink/NVSwitch (HGX/SXM) board.
NVLINK_FAMILIES = frozenset({"p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"})


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
    local_nvme_gib: int = 0  # instance-store NVMe, all drives together (Karpenter's instance-local-nvme)
    network_bandwidth_mbps: int = 0  # Karpenter's instance-network-bandwidth (0: not in the data)

    def describe_gpus(self) -> str:
        if not self.gpu_count or not self.gpu_name:
            return "no GPU Karpenter can count"
        mem = f" {round(self.gpu_memory_mib / 1024)}GB" if self.gpu_memory_mib else ""
        return f"{self.gpu_count}× {self.gpu_name.upper()}{mem}"

    @property
    def numa_nodes(self) -> int:
        """NUMA nodes of the host [inferred, see module docstring]."""
        return 2 if self.gpu_count >= 8 else 1

    @property
    def gpus_per_numa_node(self) -> int:
        return max(1, self.gpu_count // self.numa_nodes) if self.gpu_count else 0

    @property
    def nvlink(self) -> bool:
        return self.family in NVLINK_FAMILIES

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces the instance type takes (0: no EFA), Karpenter's ``vpc.amazonaws.com/efa``
        capacity in the instance-type data (from EC2 DescribeInstanceTypes ``EfaInfo``;
        aws/karpenter-provider-aws@v1.14.1 pkg/apis/v1/labels.go:140). Karpenter attaches this many
        when a pod asks for the resource (pkg/providers/instance/instance.go:699-720)."""
        return int(dict(self.resources).get("vpc.amazonaws.com/efa", "0") or 0)


@lru_cache(maxsize=1)
def instance_types() -> dict[str, InstanceType]:
    # Beside this file, as the GPU catalog is: importlib.resources costs ~5 ms of imports.
    raw = json.loads((Path(__file__).parent / "data" / "aws-gpu-instance-types.json").read_text("utf-8"))
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
            local_nvme_gib=int(r.get("local_nvme_gib") or 0),
            network_bandwidth_mbps=int(r.get("network_bandwidth_mbps") or 0),
        )
    return out


# --- The labels Karpenter sets from an instance type ----------------------------------------

_G = "karpenter.k8s.aws/"
# aws/karpenter-provider-aws@v1.14.1 pkg/providers/instancetype/types.go:49 instanceTypeScheme
_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
# Keys the provider sets on every instance type (types.go:186-218), that this table holds
INSTANCE_LABEL_KEYS = frozenset({
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/windows-build",
    *(_G + k for k in ("instance-category", "instance-generation", "instance-family", "instance-size",
                       "instance-cpu", "instance-memory", "instance-local-nvme", "instance-capability-flex",
                       "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer",
                       "instance-gpu-count", "instance-gpu-memory", "instance-accelerator-name",
                       "instance-accelerator-manufacturer", "instance-accelerator-count"))})
# ... and those it sets that this table does not hold (pkg/apis/v1/labels.go:146-159)
UNREAD_INSTANCE_KEYS = frozenset(_G + k for k in (
    "instance-hypervisor", "instance-encryption-in-transit-supported", "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz", "instance-ebs-bandwidth"))


def instance_labels(it: InstanceType) -> dict[str, str | None]:
    """The value of every :data:`INSTANCE_LABEL_KEYS` key on a node of ``it`` (None: the provider
    leaves it DoesNotExist), as aws/karpenter-provider-aws@v1.14.1
    pkg/providers/instancetype/types.go:163-310 ``computeRequirements`` sets them: os ``linux``
    (Linux AMIs, :313-321), category and generation from the name (:247-251), family and size
    (:252-256), local NVMe (:257-259), flex (:260-264), bandwidth (:266-269), GPU (:270-277);
    GPU instance types carry no inference accelerator (:278-291)."""
    m = _SCHEME.match(it.name)
    family, _, size = it.name.partition(".")
    gpu = bool(it.gpu_count and it.gpu_name)
    return {
        "node.kubernetes.io/instance-type": it.name, "kubernetes.io/arch": it.arch, "kubernetes.io/os": "linux",
        "node.kubernetes.io/windows-build": None,
        _G + "instance-category": m[1] if m else None, _G + "instance-generation": m[3] if m else None,
        _G + "instance-family": family if size else None, _G + "instance-size": size or None,
        _G + "instance-cpu": str(it.cpu), _G + "instance-memory": str(it.memory_mib),
        _G + "instance-local-nvme": str(it.local_nvme_gib) if it.local_nvme_gib else None,
        _G + "instance-capability-flex": "true" if "-flex" in family else "false",
        _G + "instance-network-bandwidth": str(it.network_bandwidth_mbps) if it.network_bandwidth_mbps else None,
        _G + "instance-gpu-name": it.gpu_name if gpu else None,
        _G + "instance-gpu-manufacturer": it.gpu_manufacturer if gpu else None,
        _G + "instance-gpu-count": str(it.gpu_count) if gpu else None,
        _G + "instance-gpu-memory": str(it.gpu_memory_mib) if gpu and it.gpu_memory_mib else None,
        _G + "instance-accelerator-name": None, _G + "instance-accelerator-manufacturer": None,
        _G + "instance-accelerator-count": None,
    }


def instance_type(name: str) -> InstanceType | None:
    return instance_types().get(name)


def suggest_instance_types(name: str, n: int = 3) -> list[str]:
    """Known GPU instance types that look like ``name`` ("did you mean")."""
    names = list(instance_types())
    out = difflib.get_close_matches(name.strip().lower(), names, n=n, cutoff=0.6)
    if not out:  # same family, any size: "p4d.12xlarge" -> p4d.24xlarge
        fam = name.split(".")[0].lower()
        out = [k for k in names if k.split(".")[0] == fam][:n]
    return out


def instance_gpu_model(it: InstanceType) -> "GpuModel | None":
    """The catalog GPU model an instance type carries: same Karpenter
    ``instance-gpu-name``, nearest per-GPU memory (p4d -> A100-SXM4-40GB,
    p4de -> A100-SXM4-80GB; the catalog's nominal MiB and EC2's reported MiB
    differ a little, e.g. L40S 49152 vs 45776)."""
    if not it.gpu_name:
        return None
    from gpuplan.catalog import all_gpus

    cands = [g for g in all_gpus() if g.karpenter_gpu_name == it.gpu_name]
    if not cands:
        return None
    if it.gpu_memory_mib is None or len(cands) == 1:
        return cands[0]
    return min(cands, key=lambda g: (abs(g.memory_mib - it.gpu_memory_mib), g.key))


def instance_types_for(gpu: "GpuModel") -> list[InstanceType]:
    """Instance types whose GPU is ``gpu`` (for hints), fewest GPUs first."""
    out = [it for it in instance_types().values() if it.gpu_count and instance_gpu_model(it) == gpu]
    return sorted(out, key=lambda it: (it.gpu_count, it.cpu, it.name))


# --- What every pod of a multi-node job must request -------------------------------------------

EFA = "vpc.amazonaws.com/efa"


def gang_pod_resources(karpenter: Any, gang: bool) -> dict[str, int]:
    """The resources every pod of a multi-node job on a Karpenter pool of these instance types
    must request, ``{resource: count}`` (empty: none): the pool's EFA interfaces, one entry per
    fabric, so the next fabric is one more entry here. ``karpenter``: the pool's ``karpenter``
    block; ``gang``: a tier with ``gang`` runs on the pool.

    EFA is on with ``karpenter.efa: true``, else when ``gang`` holds and every instance type takes
    EFA (GP653 refuses ``efa: true`` on one that takes none). Karpenter attaches the interfaces,
    one per network card, only to a node it launches for a pod that requests ``vpc.amazonaws.com/efa``
    (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go:699-720), and advertises
    the resource on the NodeClaim only then (pkg/cloudprovider/cloudprovider.go:442-446); without
    it NCCL falls back to TCP sockets.

    The count is the *fewest* interfaces of the pool's instance types (p5e.48xlarge has 32,
    p5en.48xlarge 16: 16): the scheduler fits an extended resource against each node's allocatable
    (kubernetes v1.36.3 pkg/scheduler/framework/plugins/noderesources/fit.go:731-759 ``fitsRequest``), so a
    pod that asks for more than the smallest type has fits none of its nodes, and Karpenter would
    launch only the larger types for it."""
    types = [instance_type(name) for name in karpenter.instance_types]
    counts = [t.efa_interfaces if t is not None else 0 for t in types]
    if not counts or min(counts) == 0:
        return {}
    on = gang if karpenter.efa is None else karpenter.efa
    return {EFA: min(counts)} if on else {}
