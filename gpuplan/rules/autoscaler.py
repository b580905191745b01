"""GP633: what the cluster's autoscaler version makes of the pools' objects.

A Karpenter pool's GPU ceiling is the NodePool's ``limits.nodes`` (``maxGPUs`` in whole
nodes); Karpenter enforces a node-count limit only from v1.11.0 (kubernetes-sigs/karpenter
commit 9f749d9, "feat(limits): support NodePool node limits (#2526)", first tagged v1.11.0;
issue #2657). On an older Karpenter the field is accepted and ignored: the pool has no
ceiling, and the capacity report's numbers are not what the cluster holds to.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

NODE_LIMITS_FROM = (1, 11, 0)

W_NO_NODE_LIMIT = Code(
    "GP633", "Karpenter too old to enforce the pools' GPU ceiling", Severity.WARNING,
    "gpuplan caps a Karpenter pool at its `maxGPUs` with the NodePool's `limits.nodes`. Karpenter enforces "
    "node-count limits only from v1.11.0 (kubernetes-sigs/karpenter #2526, commit 9f749d9); an older "
    "Karpenter ignores the field, so the pool can grow past every quota and price gpuplan reports.",
    bad="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.10.2}",
    good="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.14.1}",
)

CODES = (W_NO_NODE_LIMIT,)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    aws = rf.fleet.spec.cluster.aws
    pools = [pv for pv in rf.pools if pv.pool.karpenter is not None]
    if aws is None or not pools:
        return
    version = tuple(int(x) for x in aws.karpenter_version.split("."))
    if version < NODE_LIMITS_FROM:
        names = ", ".join(pv.name for pv in pools)
        yield rf.diag(W_NO_NODE_LIMIT, f"Karpenter {aws.karpenter_version} does not enforce NodePool limits.nodes "
                      f"(from 1.11.0): pools {names} have no GPU ceiling", ("spec", "cluster", "aws", "karpenterVersion"),
                      hint="upgrade Karpenter to 1.11.0 or later (gpuplan's NodePools are written for 1.14)")
