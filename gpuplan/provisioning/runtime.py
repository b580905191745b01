"""The container runtime a pool's GPU nodes give the GPU Operator's operands, from the node-facts
tables (:mod:`gpuplan.nodefacts`): which table describes a pool's nodes, the runtime handler the
operator's RuntimeClass must name, and the pools whose container toolkit gpuplan cannot
configure.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuplan.nodefacts import fact, table
from gpuplan.provisioning.pools import karpenter_cloud, platform_gpu_stack
from gpuplan.spec.models import Pool

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet


def toolkit_platform(cluster: Any, pool: Pool, toolkit: str | None) -> str | None:
    """The table that says what container runtime a pool's GPU nodes run for the operator's
    operands: ``operator`` where the GPU Operator installs the toolkit, the platform image's
    table where the node ships it, None where no operand runs (the platform's own GPU stack)
    or nothing is known (static nodes with a preinstalled toolkit: the owner's image)."""
    if platform_gpu_stack(pool):
        return None
    k = pool.karpenter
    if k is not None:
        if karpenter_cloud(cluster) == "azure":
            return "operator" if k.driver == "gpu-operator" else "aks-nap"
        if k.ami_family != "AL2023":
            return None  # Bottlerocket: its own device plugin, no operand
        return "operator" if toolkit == "managed" else "eks-al2023"
    if toolkit == "managed":
        return "operator"
    if pool.provisioner == "aks":
        return "aks"
    return None


def operand_pools(rf: "ResolvedFleet") -> list[tuple[Any, str | None]]:
    """(pool, node-facts table) of every pool whose nodes run the operator's operands; the table
    is None where the owner's image decides (static nodes with a preinstalled toolkit)."""
    out = []
    for pv in rf.pools:
        k = pv.pool.karpenter
        if platform_gpu_stack(pv.pool) or (k is not None and k.ami_family == "Bottlerocket"
                                           and karpenter_cloud(rf.fleet.spec.cluster) == "aws"):
            continue
        out.append((pv, toolkit_platform(rf.fleet.spec.cluster, pv.pool, rf.toolkit)))
    return out


def runtime_handlers(rf: "ResolvedFleet") -> dict[str, list[Any]]:
    """containerd runtime handler -> the operand pools whose nodes define it for GPU containers:
    the platform table's ``runtimeHandler``; ``nvidia`` for nodes whose owner installs the toolkit
    (the README's prerequisite)."""
    out: dict[str, list[Any]] = {}
    for pv, platform in operand_pools(rf):
        handler = fact(platform or "operator", "runtimeHandler")
        out.setdefault(handler, []).append(pv)
    return out


def runtime_class(rf: "ResolvedFleet") -> str:
    """``operator.runtimeClass``: the one handler the operand pools share (GP990 refuses a
    fleet whose pools disagree); the chart's default ``nvidia`` when no pool runs operands."""
    handlers = runtime_handlers(rf)
    return next(iter(handlers)) if len(handlers) == 1 else fact("operator", "runtimeHandler")


def unconfigurable_toolkit_pools(rf: "ResolvedFleet") -> list[Any]:
    """Operand pools with a preinstalled toolkit whose settings no object gpuplan writes can change
    (the platform table's ``nodeConfig`` names no field: AKS agent pools, AKS NAP): the device
    plugin keeps its ``envvar`` strategy there, the one the node's toolkit serves (GP991)."""
    if rf.toolkit != "preinstalled":
        return []
    return [pv for pv, platform in operand_pools(rf)
            if platform is not None and not table(platform).node_config.get("fields")]
