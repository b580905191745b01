"""Answers the fleet rules need from one node's inventory. Pure functions of a
``NodeInventory``; unknown stays unknown (``None``), never guessed.

    from gpuplan.probe.facts import node_facts
    f = node_facts(inv)
    f.gpu_count, f.model_counts, f.max_gpus_per_numa, f.all_pairs_nvlink, f.mig_layouts

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from gpuplan.probe.inventory import GpuInfo, NodeInventory

_NV = re.compile(r"^NV([0-9]+)$")

Interconnect = Literal["nvlink", "pcie", "mixed", "unknown", "single"]


def gpu_model_key(gpu: GpuInfo) -> str | None:
    """Catalog key (e.g. "H100-SXM5-80GB") from the PCI device id, else the
    NVML name, else the GFD product name; None when the catalog knows none."""
    try:
        from gpuplan.catalog import resolve_gpu
    except ImportError:  # pragma: no cover - the catalog ships with gpuplan
        return None
    for text in (gpu.pci.device_id if gpu.pci else None, gpu.name, gpu.product):
        if text:
            model = resolve_gpu(text)
            if model is not None:
                return model.key
    return None


def gpu_models(inv: NodeInventory) -> dict[int, str | None]:
    """GPU index -> catalog key (None: not in the catalog)."""
    return {g.index: gpu_model_key(g) for g in inv.gpus}


def model_counts(inv: NodeInventory) -> dict[str, int]:
    """How many GPUs of each model; GPUs unknown to the catalog count under
    their GFD product name (or "unknown")."""
    c: Counter[str] = Counter()
    for g in inv.gpus:
        c[gpu_model_key(g) or g.product or "unknown"] += 1
    return dict(sorted(c.items()))


def gpu_count(inv: NodeInventory) -> int:
    return len(inv.gpus)


def mig_capable(inv: NodeInventory) -> dict[int, bool | None]:
    """GPU index -> MIG capable (None: NVML did not say)."""
    return {g.index: (g.mig.capable if g.mig is not None else None) for g in inv.gpus}


def mig_enabled(inv: NodeInventory) -> dict[int, bool | None]:
    """GPU index -> MIG mode now on (None: unknown or not capable)."""
    return {g.index: (g.mig.current if g.mig is not None else None) for g in inv.gpus}


def numa_nodes(inv: NodeInventory) -> dict[int, int | None]:
    return {g.index: g.numa_node for g in inv.gpus}


def gpus_per_numa_node(inv: NodeInventory) -> dict[int, int] | None:
    """NUMA node -> number of GPUs on it; None when any GPU's node is unknown."""
    nodes = numa_nodes(inv)
    if any(v is None for v in nodes.values()):
        return None
    return dict(sorted(Counter(v for v in nodes.values() if v is not None).items()))


def max_gpus_per_numa_node(inv: NodeInventory) -> int | None:
    """The most GPUs one NUMA node holds: a pod asking for more cannot be
    NUMA-aligned under Topology Manager `single-numa-node`."""
    per = gpus_per_numa_node(inv)
    if per is None:
        return None
    return max(per.values(), default=0)


def pair_levels(inv: NodeInventory) -> dict[tuple[int, int], str]:
    """(i, j) with i < j -> topology level as `nvidia-smi topo -m` prints it."""
    t = inv.topology
    out: dict[tuple[int, int], str] = {}
    for a, ia in enumerate(t.gpus):
        for b, ib in enumerate(t.gpus):
            if ia < ib:
                out[(ia, ib)] = t.matrix[a][b]
    return out


def nvlink_count(level: str) -> int:
    m = _NV.match(level)
    return int(m.group(1)) if m else 0


def interconnect(inv: NodeInventory) -> Interconnect:
    """"nvlink": every GPU pair has an NVLink path (direct or NVSwitch);
    "pcie": no pair has one; "mixed": some do; "unknown": some pair's level
    could not be read and the rest do not decide it; "single": < 2 GPUs."""
    levels = list(pair_levels(inv).values())
    if not levels:
        return "single"
    nv = [nvlink_count(l) > 0 for l in levels]
    unknown = [l == "UNKNOWN" for l in levels]
    if all(nv):
        return "nvlink"
    if any(nv):
        return "mixed"
    if any(unknown):
        return "unknown"
    return "pcie"


def all_pairs_nvlink(inv: NodeInventory) -> bool | None:
    """True: every pair has NVLink/NVSwitch; False: some pair is PCIe only;
    None: cannot tell (unknown levels) or fewer than two GPUs."""
    kind = interconnect(inv)
    if kind == "nvlink":
        return True
    if kind in ("pcie", "mixed"):
        return False
    return None


def mig_layout(gpu: GpuInfo) -> dict[str, int] | None:
    """Profile name -> instance count on one GPU; {} with MIG on and nothing
    created; None when MIG is off, not capable, or instances were not read."""
    if gpu.mig is None or not gpu.mig.current or gpu.mig.instances is None:
        return None
    c: Counter[str] = Counter(i.profile or f"profile-{i.profile_id}" for i in gpu.mig.instances)
    return dict(sorted(c.items()))


def mig_layouts(inv: NodeInventory) -> dict[int, dict[str, int] | None]:
    return {g.index: mig_layout(g) for g in inv.gpus}


def mig_placements(gpu: GpuInfo) -> list[tuple[str, int, int]] | None:
    """(profile, start, size) of each existing GPU instance, by start."""
    if gpu.mig is None or not gpu.mig.current or gpu.mig.instances is None:
        return None
    return [
        (i.profile or f"profile-{i.profile_id}", i.placement.start, i.placement.size)
        for i in sorted(gpu.mig.instances, key=lambda x: (x.placement.start, x.id))
    ]


@dataclass(frozen=True)
class NodeFacts:
    node: str
    gpu_count: int
    models: dict[int, str | None]
    model_counts: dict[str, int]
    mig_capable: dict[int, bool | None]
    mig_enabled: dict[int, bool | None]
    mig_layouts: dict[int, dict[str, int] | None]
    numa_nodes: dict[int, int | None]
    gpus_per_numa: dict[int, int] | None
    max_gpus_per_numa: int | None
    interconnect: Interconnect
    all_pairs_nvlink: bool | None
    driver_version: str | None
    incomplete: bool  # some field could not be read (see the inventory's errors)


def node_facts(inv: NodeInventory) -> NodeFacts:
    return NodeFacts(
        node=inv.metadata.name,
        gpu_count=gpu_count(inv),
        models=gpu_models(inv),
        model_counts=model_counts(inv),
        mig_capable=mig_capable(inv),
        mig_enabled=mig_enabled(inv),
        mig_layouts=mig_layouts(inv),
        numa_nodes=numa_nodes(inv),
        gpus_per_numa=gpus_per_numa_node(inv),
        max_gpus_per_numa=max_gpus_per_numa_node(inv),
        interconnect=interconnect(inv),
        all_pairs_nvlink=all_pairs_nvlink(inv),
        driver_version=inv.system.driver_version,
        incomplete=bool(inv.system.errors or inv.topology.errors or any(g.errors for g in inv.gpus)),
    )
