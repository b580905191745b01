"""Static pools' rollouts: ``rollout`` says how many nodes take a MIG layout or sharing change
per step (gpuplan.provisioning.rollout). Only a static pool's nodes are labelled one by one, by
nfd-master through the pool's NodeFeatureRule; the other back-ends have their own: a Karpenter
NodePool's disruption budgets, a node group's upgrade settings.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import static_nodes
from gpuplan.resolve import ResolvedFleet

E_ROLLOUT_NOT_STATIC = Code(
    "GP993", "rollout on a pool that is not static", Severity.ERROR,
    "`rollout.maxUnavailable` sets how many nodes of a static pool (`nodes`) take a new MIG layout "
    "or device-plugin config per step: gpuplan keeps the others at their old labels in the pool's "
    "NodeFeatureRule until `gpuplan build --advance POOL`. An autoscaled pool's nodes get their "
    "labels from their template and are replaced by their own back-end: a Karpenter NodePool as "
    "its disruption budgets allow, a node group by its upgrade settings.",
    bad="pools:\n  - name: burst\n    karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 32}\n"
        "    rollout: {maxUnavailable: 1}",
    good="pools:\n  - name: infer\n    nodes: [gpu-01, gpu-02]\n    gpusPerNode: 4\n    rollout: {maxUnavailable: 1}",
)

CODES = (E_ROLLOUT_NOT_STATIC,)


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    for pv in rf.pools:
        if pv.pool.rollout is not None and not static_nodes(pv.pool):
            yield rf.diag(
                E_ROLLOUT_NOT_STATIC,
                f"pool {pv.name}: `rollout` applies to static pools only; its nodes are replaced by "
                f"its {pv.pool.provisioner} back-end, not relabelled one by one",
                (*pv.path, "rollout"), key=True,
                hint="delete the `rollout:` block of this pool")
