"""GP633, GP675, GP679: what the cluster's autoscaler and its version make of the pools' objects.

A Karpenter pool's GPU ceiling is the NodePool's ``limits.nodes`` (``maxGPUs`` in whole
nodes); Karpenter enforces a node-count limit only from v1.11.0 (kubernetes-sigs/karpenter
commit 9f749d9, "feat(limits): support NodePool node limits (#2526)", first tagged v1.11.0;
issue #2657). On an older Karpenter the field is accepted and ignored: the pool has no
ceiling, and the capacity report's numbers are not what the cluster holds to.

A Cluster API pool is sized by the Cluster Autoscaler's clusterapi provider
(``cluster.capi.autoscalerVersion``; kubernetes/autoscaler@cluster-autoscaler-1.36.1,
cluster-autoscaler/cloudprovider/clusterapi/). The autoscaler counts a node that carries the GPU
label and has no allocatable ``nvidia.com/gpu`` as unready, so an autoscaled pool whose nodes
advertise only MIG or renamed shared resources stalls the whole cluster's scale-up (GP675,
kubernetes/autoscaler#8095, see ``gpuplan.provisioning.capi``); and the scale-from-zero template
node has the pool's labels and taints only from cluster-autoscaler 1.27.1, which first reads the
``capacity.cluster-autoscaler.kubernetes.io/labels`` and ``/taints`` annotations (commit
e63244a136, "Use capacity annotations to set labels and taints for cluster api node groups")
(GP679).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

NODE_LIMITS_FROM = (1, 11, 0)
CAPACITY_LABELS_FROM = (1, 27, 1)  # cluster-autoscaler: capacity labels/taints annotations (e63244a136)

W_NO_NODE_LIMIT = Code(
    "GP633", "Karpenter too old to enforce the pools' GPU ceiling", Severity.WARNING,
    "gpuplan caps a Karpenter pool at its `maxGPUs` with the NodePool's `limits.nodes`. Karpenter enforces "
    "node-count limits only from v1.11.0 (kubernetes-sigs/karpenter #2526, commit 9f749d9); an older "
    "Karpenter ignores the field, so the pool can grow past every quota and price gpuplan reports.",
    bad="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.10.2}",
    good="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.14.1}",
)

E_CA_GPU_UNREADY = Code(
    "GP675", "Cluster Autoscaler would count the pool's nodes as unready", Severity.ERROR,
    "The Cluster Autoscaler treats a node with its GPU label (`cluster-api/accelerator`) and no "
    "allocatable `nvidia.com/gpu` as unready, forever on a node that advertises only "
    "`nvidia.com/mig-*` or renamed shared resources (kubernetes/autoscaler#8095, open through "
    "cluster-autoscaler 1.36.1: processors/customresources/gpu_processor.go:41-70, utils/gpu/gpu.go:137-146). "
    "Enough such nodes and it stops scaling the whole cluster (clusterstate/clusterstate.go:493-505); "
    "without the label it would not know the nodes are GPU nodes, scale up again while the device "
    "plugin starts, and could never scale the pool from zero (the template node has no MIG resources). "
    "An autoscaled Cluster API pool must advertise `nvidia.com/gpu`; a fixed-size pool (`minNodes` at "
    "the ceiling) is not autoscaled and gpuplan leaves the label off its nodes.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
        "capi: {infrastructureRef: {kind: Metal3MachineTemplate, name: a100}, maxGPUs: 32}",
    good="sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
         "capi: {infrastructureRef: {kind: Metal3MachineTemplate, name: a100}, maxGPUs: 32, minNodes: 4}",
)
E_CA_NO_CAPACITY_LABELS = Code(
    "GP679", "Cluster Autoscaler too old for scale-from-zero labels and taints", Severity.ERROR,
    "gpuplan tells the Cluster Autoscaler the labels and taints of a Cluster API pool's future nodes "
    "with the `capacity.cluster-autoscaler.kubernetes.io/labels` and `/taints` annotations, read from "
    "cluster-autoscaler 1.27.1 (kubernetes/autoscaler commit e63244a136). An older autoscaler builds "
    "the scale-from-zero template node without them: the tiers' pods select `gpuplan.dev/pool`, never "
    "fit the template, and a pool at zero nodes never scales up.",
    bad="cluster:\n  capi: {clusterName: lab, version: v1.33.4, autoscalerVersion: 1.26.8}",
    good="cluster:\n  capi: {clusterName: lab, version: v1.33.4, autoscalerVersion: 1.36.1}",
)

CODES = (W_NO_NODE_LIMIT, E_CA_GPU_UNREADY, E_CA_NO_CAPACITY_LABELS)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _karpenter(rf)
    yield from _cluster_autoscaler(rf)


def _karpenter(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    aws = rf.fleet.spec.cluster.aws
    pools = [pv for pv in rf.pools if pv.pool.karpenter is not None]
    if aws is None or not pools:
        return
    version = version_tuple(aws.karpenter_version)
    if version < NODE_LIMITS_FROM:
        names = ", ".join(pv.name for pv in pools)
        yield rf.diag(W_NO_NODE_LIMIT, f"Karpenter {aws.karpenter_version} does not enforce NodePool limits.nodes "
                      f"(from 1.11.0): pools {names} have no GPU ceiling", ("spec", "cluster", "aws", "karpenterVersion"),
                      hint="upgrade Karpenter to 1.11.0 or later (gpuplan's NodePools are written for 1.14)")


def _cluster_autoscaler(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    from gpuplan.provisioning import capi

    cfg = rf.fleet.spec.cluster.capi
    pools = [pv for pv in rf.pools if pv.pool.capi is not None and pv.gpus_per_node]
    if cfg is None or not pools:
        return
    version = version_tuple(cfg.autoscaler_version)
    for pv in pools:
        if capi.fixed_size(pv) or capi.gpu_ready_to_autoscaler(pv, version):
            continue
        what = ", ".join(pv.node_resources()) or "no GPU resource"
        yield rf.diag(E_CA_GPU_UNREADY, f"pool {pv.name} is autoscaled by the Cluster Autoscaler "
                      f"{cfg.autoscaler_version}, which counts its nodes ({what}, no nvidia.com/gpu) as unready "
                      "(kubernetes/autoscaler#8095): its scale-up and the cluster's stall",
                      (*pv.path, "sharing"),
                      hint=f"make the pool fixed-size (capi.minNodes: {capi.max_nodes(pv)}), or share it so that "
                           "nodes advertise nvidia.com/gpu (MIG strategy single, time-slicing without "
                           "renameByDefault)")
    scaling = [pv.name for pv in pools if not capi.fixed_size(pv) and pv.pool.capi.min_nodes == 0]
    if scaling and version < CAPACITY_LABELS_FROM:
        yield rf.diag(E_CA_NO_CAPACITY_LABELS, f"Cluster Autoscaler {cfg.autoscaler_version} ignores the "
                      "capacity labels/taints annotations (from 1.27.1): pools " + ", ".join(scaling) +
                      " never scale up from zero nodes", ("spec", "cluster", "capi", "autoscalerVersion"),
                      hint="upgrade the Cluster Autoscaler to 1.27.1 or later (gpuplan is checked against 1.36.1)")
