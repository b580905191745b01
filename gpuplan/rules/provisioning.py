"""GP637-GP639: node-group pools (GKE, AKS, Cluster API) against their back-end's machine table.

A node group's machine type (VM size) decides its GPU model and count, as an EC2 instance type
does for a Karpenter pool (GP610-GP612): the back-end's table (``gpuplan.cloud.<back-end>``,
reached through ``gpuplan.provisioning.pools.machine``) says which GPU and how many. A back-end whose
machines are not in a table (Cluster API on premises) gives no machine and declares
``gpusPerNode``; these rules then ask only for that.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import backend, machine, node_group_pool, title
from gpuplan.resolve import PoolView, ResolvedFleet

if TYPE_CHECKING:
    from gpuplan.cloud.machine import Machine

E_UNKNOWN_MACHINE = Code(
    "GP637", "node group's GPUs per node unknown", Severity.ERROR,
    "A node-group pool (GKE node pool, AKS agent pool, Cluster API MachineDeployment) takes its GPUs "
    "per node from its machine type; a machine type the back-end's table does not list (a typo, a type "
    "without GPUs, an N1 machine with attached GPUs) leaves the count unknown, and with it every "
    "capacity, quota and ceiling. Use a machine type from the table (docs/gke.md), or, where the "
    "back-end has no table, give `gpusPerNode`.",
    bad="gke: {machineType: a2-highgpu-8gg, maxGPUs: 16}",
    good="gke: {machineType: a2-highgpu-8g, maxGPUs: 16}",
)
E_MACHINE_GPU = Code(
    "GP638", "machine type has a different GPU", Severity.ERROR,
    "The machine type decides the GPU: a2-highgpu-* has A100 40GB, a2-ultragpu-* A100 80GB, "
    "a3-highgpu-* H100 80GB, g2-standard-* L4. A pool whose `gpu` names another model gets MIG "
    "layouts, device-plugin configs and quotas for hardware its nodes never have.",
    bad="gpu: A100-SXM4-80GB\ngke: {machineType: a2-highgpu-8g, maxGPUs: 16}   # A100 40GB",
    good="gpu: A100-SXM4-80GB\ngke: {machineType: a2-ultragpu-8g, maxGPUs: 16}",
)
E_MACHINE_COUNT = Code(
    "GP639", "machine type has a different number of GPUs", Severity.ERROR,
    "A node-group pool's `gpusPerNode`, when given, must be its machine type's GPU count: capacity, "
    "quotas and the node ceiling are computed from it, and the nodes have what the machine type has.",
    bad="gpusPerNode: 4\ngke: {machineType: a2-highgpu-8g, maxGPUs: 16}",
    good="gke: {machineType: a2-highgpu-8g, maxGPUs: 16}   # 8 A100s, gpusPerNode from the machine type",
)
CODES = (E_UNKNOWN_MACHINE, E_MACHINE_GPU, E_MACHINE_COUNT)
# where each back-end's machine table is described (NAP's VM sizes: the AKS page)
MACHINE_DOCS = {"karpenter": "aks"}


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    for pv in rf.pools:
        if node_group_pool(pv.pool):
            yield from _machine(rf, pv)


def machine_path(pv: PoolView) -> tuple:
    """The spec path of a node group's machine type (the back-end's ``MACHINE_FIELD``)."""
    field = getattr(backend(pv.pool), "MACHINE_FIELD", None)
    base = pv.path + (pv.pool.provisioner,)
    return base + (field,) if field else base


def _machine(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    mod = backend(pv.pool)
    yield from machine_rules(rf, pv, machine(pv.pool), machine_path(pv),
                             lambda: getattr(mod, "closest_machine", lambda _: None)(pv.pool))


def machine_rules(rf: ResolvedFleet, pv: PoolView, m: "Machine | None", where: tuple,
                  closest: Callable[[], str | None]) -> Iterator[Diagnostic]:
    """GP637-GP639 for one machine type of a pool (``m``: its table entry, None when unknown;
    ``where``: its spec path; ``closest``: a known name near it). Node groups have one; a NAP
    pool (``gpuplan.rules.nap``) one per VM size of its NodePool."""
    from gpuplan.catalog import resolve_gpu

    if m is None:
        if pv.gpus_per_node is None:
            near = closest()
            yield rf.diag(E_UNKNOWN_MACHINE,
                          f"pool {pv.name!r}: its {title(pv.pool)}'s machine type is not one gpuplan knows, so its "
                          "GPUs per node are unknown", where,
                          hint=f"did you mean {near}?" if near else "use a machine type with GPUs from "
                          f"docs/{MACHINE_DOCS.get(pv.pool.provisioner, pv.pool.provisioner)}.md, or set gpusPerNode")
        return
    want = resolve_gpu(m.gpu)
    if pv.gpu is not None and want is not None and want.key != pv.gpu.key:
        yield rf.diag(E_MACHINE_GPU,
                      f"pool {pv.name!r}: machine type {m.name} has {m.gpu_count}x {want.key}, not {pv.gpu.key}",
                      pv.path + ("gpu",), hint=f"set gpu: {want.key}, or pick a machine type with {pv.gpu.key}")
    if pv.pool.gpus_per_node is not None and pv.pool.gpus_per_node != m.gpu_count:
        yield rf.diag(E_MACHINE_COUNT,
                      f"pool {pv.name!r}: gpusPerNode is {pv.pool.gpus_per_node}, but machine type {m.name} has "
                      f"{m.gpu_count} GPUs", pv.path + ("gpusPerNode",),
                      hint="remove gpusPerNode (the machine type decides it)")
