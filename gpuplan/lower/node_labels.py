"""Node labels of each pool: which device-plugin config, which MIG layout, which pool.

Static pools get an NFD ``NodeFeatureRule`` per pool that matches the pool's
nodes by name (feature ``system.name``, element ``nodename``) and sets the
labels; nfd-master (bundled with the GPU Operator) applies them and removes
them again when a node leaves the rule. Karpenter pools put the same labels
into their NodePool template: :func:`pool_node_labels` is the one place the
label set is decided, so both kinds of pool agree.

Labels set (reference/k8s/facts.md §c, §k):

- ``gpuplan.dev/pool=<pool>``;
- ``nvidia.com/device-plugin.config=<pool>``: the pool's key in the generated
  device-plugin ConfigMap (per-node sharing / MIG strategy);
- ``nvidia.com/mig.config``: the pool's mig-parted config for MIG pools, and
  ``all-disabled`` for every other pool whose GPU model is MIG-capable, so that
  a node that once ran a MIG layout (or was labelled by hand) is returned to
  whole GPUs when its pool says so. GPUs that cannot do MIG get no
  ``mig.config`` label: mig-manager does not run there;
- ``nvidia.com/gpu.deploy.device-plugin=false`` on pools with ``allocation.backend: dra``:
  the GPU Operator's device plugin stays off those nodes and the DRA driver's
  kubelet plugin runs there instead (:mod:`gpuplan.lower.dra`);
- the pool's own ``labels`` from the spec (they never override the labels above).

Taints of static pools go into the same rule (``taints:``), and the operator
values turn on nfd-master's ``-enable-taints`` (:func:`gpuplan.lower.operator.
nfd_taints_needed`). kubelet ``registerWithTaints`` applies only when a node first
registers, so a taint changed in fleet.yaml would never reach an existing node;
nfd-master adds the rule's taints to every matching node, records them in the
node annotation ``nfd.node.kubernetes.io/taints``, and removes exactly those
when the node leaves the rule or the taint leaves the spec
(kubernetes-sigs/node-feature-discovery@v0.19.0 pkg/nfd-master/nfd-master.go:986-1056,
``setTaints``). A taint that kubelet registered and the rule also lists is
adopted the same way.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import POOL_LABEL
from gpuplan.lower.common import object_annotations
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.identity import pool_node_labels, static_pool_taints
from gpuplan.provisioning.rollout import held_rule_name, pool_step, target_rule_name

NFD_API = "nfd.k8s-sigs.io/v1alpha1"


def rule_name(pv: PoolView) -> str:
    return f"gpuplan-pool-{pv.name}"


def node_feature_rule(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    """The one NodeFeatureRule of a static pool: everything gpuplan puts on its
    nodes (labels, taints) comes from here. While a change rolls through the pool
    (:mod:`gpuplan.provisioning.rollout`) the nodes not yet at the pool's MIG layout and
    device-plugin config keep theirs in one more rule each, the other labels and the
    taints being the pool's."""
    assert pv.pool.nodes is not None
    step = pool_step(rf, pv)
    assert step is not None
    labels = pool_node_labels(rf, pv)
    taints = static_pool_taints(pv)
    rules = [_rule(target_rule_name(pv.name), labels, taints, step.target)]
    for i, (values, nodes) in enumerate(step.held, 1):
        rules.append(_rule(held_rule_name(pv.name, i), {**labels, **dict(values)}, taints, nodes))
    meta = metadata(
        rf, rule_name(pv), extra_labels={POOL_LABEL: pv.name},
        annotations=object_annotations(rf, "NodeFeatureRule"),
    )
    return obj(NFD_API, "NodeFeatureRule", meta, spec={"rules": rules})


def _rule(name: str, labels: dict[str, str], taints: list[dict[str, str]], nodes: Sequence[str]) -> dict[str, Any]:
    rule: dict[str, Any] = {"name": name, "labels": labels}
    if taints:
        rule["taints"] = taints
    rule["matchFeatures"] = [
        {"feature": "system.name", "matchExpressions": {"nodename": {"op": "In", "value": list(nodes)}}}
    ]
    return rule


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    out = []
    for pv in rf.pools:
        if not pv.pool.is_static or not pv.pool.nodes:
            continue
        out.append(Artifact(
            path=f"pools/{pv.name}/node-labels.yaml",
            documents=(node_feature_rule(rf, pv),),
            description=f"NFD NodeFeatureRule: labels the {len(pv.pool.nodes)} static node(s) of pool "
                        f"{pv.name} (pool, device-plugin config, MIG config)",
        ))
    return out
