"""CPU and memory per GPU: what a pod of a pool's tiers may request beside each GPU it requests.

A pod that holds one GPU of an eight-GPU node and requests the node's CPU keeps the seven other
GPUs from every pod granted them: the scheduler places a pod only where its CPU and memory
requests fit too (kubernetes v1.36.3 pkg/scheduler/framework/plugins/noderesources/fit.go
``fitsRequest``). So each tier's class policy bounds its pods' CPU and memory requests by the
pool's share per GPU times the GPUs the pod requests (a MIG slice or a shared replica counts as
its part of a GPU, :func:`gpuplan.units.resource_gpu_fraction`).

The share is ``pools[].perGPU`` where the spec states it, else the node's size divided by its
GPUs, where gpuplan knows the size: an EC2 instance type of a Karpenter pool (the smallest share
among the pool's instance types), a Cluster API pool's ``capi.cpu`` / ``capi.memory``, or the
node probe's online CPUs of a static pool's nodes (the smallest). Elsewhere (GKE and AKS
machines, static pools without an inventory) it is unbounded, and the boundary proof says so.

The node's size, not its allocatable: a ceiling against one pod taking its neighbours' share,
not a promise that every GPU's pod fits at its full share beside the system daemons.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from gpuplan.k8squantity import binary, cores, parse

if TYPE_CHECKING:
    from gpuplan.resolve import PoolView, ResolvedFleet
    from gpuplan.spec.models import Tier

MIB = 2 ** 20


@dataclass(frozen=True)
class Share:
    """A pool's CPU (thousandths of a core) and memory (bytes) per GPU, and where it comes from."""

    cpu_milli: int | None
    memory: int | None
    source: str

    def describe(self) -> str:
        parts = ([f"{cores(self.cpu_milli)} CPU"] if self.cpu_milli is not None else []) + \
                ([f"{binary(self.memory)} memory"] if self.memory is not None else [])
        return " and ".join(parts)


def cpulist_count(text: str | None) -> int | None:
    """CPUs in a Linux cpulist (``0-3,8``: 5); None when absent."""
    if not text:
        return None
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n += (int(hi) - int(lo) + 1) if hi else 1
    return n or None


def _node_sizes(rf: "ResolvedFleet", pv: "PoolView") -> list[tuple[str, Fraction | None, int | None]]:
    """(what, CPUs, memory bytes) of each node size the pool may have, where gpuplan knows it."""
    pool = pv.pool
    if pool.karpenter is not None:
        from gpuplan.cloud.aws import instance_type

        out = []
        for name in pool.karpenter.instance_types:
            it = instance_type(name)
            if it is not None and it.gpu_count == pv.gpus_per_node and it.cpu:
                out.append((name, Fraction(it.cpu), it.memory_mib * MIB if it.memory_mib else None))
        return out
    if pool.capi is not None:
        cpu, mem = parse(pool.capi.cpu), parse(pool.capi.memory)
        if cpu is None and mem is None:
            return []
        return [("the capi machine", cpu, int(mem) if mem is not None else None)]
    if pool.nodes is not None:
        names = set(pool.nodes)
        counts = [(inv.metadata.name, n) for inv in rf.inventory
                  if inv.metadata.name in names and (n := cpulist_count(inv.system.online_cpus))]
        return [(f"node {name} (probe)", Fraction(n), None) for name, n in sorted(counts)]
    return []


def pool_share(rf: "ResolvedFleet", pv: "PoolView") -> Share | None:
    """The pool's CPU and memory per GPU (None: unbounded)."""
    own = pv.pool.per_gpu
    cpu = parse(own.cpu) if own is not None and own.cpu is not None else None
    mem = parse(own.memory) if own is not None and own.memory is not None else None
    spec = ["pools[].perGPU"] if cpu is not None or mem is not None else []
    derived: dict[str, list[str]] = {}  # node size -> what of it the share is
    gpus = pv.gpus_per_node
    if gpus and (cpu is None or mem is None):
        sizes = _node_sizes(rf, pv)
        if cpu is None:
            known = [(c / gpus, what) for what, c, _ in sizes if c is not None]
            if known:
                cpu, what = min(known)
                derived.setdefault(what, []).append(f"{cores(int(cpu * gpus * 1000))} CPUs")
        if mem is None:
            known_m = [(Fraction(m, gpus), what) for what, _, m in sizes if m is not None]
            if known_m:
                mem, what = min(known_m)
                derived.setdefault(what, []).append(binary(int(mem * gpus)))
    if cpu is None and mem is None:
        return None
    src = spec + [f"{what}: {' and '.join(parts)} ÷ {gpus} GPUs" for what, parts in derived.items()]
    return Share(int(cpu * 1000) if cpu is not None else None, int(mem) if mem is not None else None, "; ".join(src))


def unit_share(rf: "ResolvedFleet", tier: "Tier") -> Share | None:
    """CPU and memory per unit of the tier's resource: the pool's share per GPU times the part of a
    GPU one unit is (rounded down to a thousandth of a CPU and a byte). None: unbounded, or the
    unit's part of a GPU is unknown."""
    from gpuplan.units import resource_gpu_fraction

    pv = rf.tier_pool(tier)
    res = rf.tier_resource(tier)
    if pv is None or res is None:
        return None
    share = pool_share(rf, pv)
    frac = resource_gpu_fraction(pv, res)
    if share is None or frac is None:
        return None
    f = Fraction(frac).limit_denominator(1000)
    return Share(int(share.cpu_milli * f) if share.cpu_milli is not None else None,
                 int(share.memory * f) if share.memory is not None else None, share.source)
