"""The NVIDIA device-plugin ConfigMap: one named config per pool, plus a default.

The GPU Operator mounts this ConfigMap (``devicePlugin.config.name``) into the
device plugin and GPU Feature Discovery; the config-manager sidecar picks the
key named by the node label ``nvidia.com/device-plugin.config`` (set per pool,
see :mod:`gpuplan.lower.node_labels`), else ``devicePlugin.config.default``.
Pool keys are content-addressed (:func:`config_key`): ``<pool>-<hash>``.

Each value is a device-plugin config file (k8s-device-plugin v0.20.0,
reference/k8s/facts.md §d)::

    version: v1
    flags: {migStrategy: none|single|mixed}
    sharing:                     # time-slicing / MPS pools only
      timeSlicing:               # or mps
        renameByDefault: true    # -> nvidia.com/gpu.shared
        failRequestsGreaterThanOne: true
        resources: [{name: nvidia.com/gpu, replicas: N}]

Never emitted: ``rename`` and ``devices`` (parsed but ignored upstream),
``resources.gpus/mig`` (ignored with a warning).

MIG strategy: the GPU Operator passes ClusterPolicy ``mig.strategy`` to the
plugin (and GFD) as the ``MIG_STRATEGY`` environment variable, and the plugin
lets a set flag or environment variable override ``flags.migStrategy`` from the
file (``updateFromCLIFlag``: ``c.IsSet`` wins). So a cluster-wide strategy is
only set when it is right for every node (on GPUs without MIG enabled
none/single/mixed all advertise whole ``nvidia.com/gpu``). Otherwise it is left
empty: the chart then omits ``spec.mig.strategy`` (``{{- if
.Values.mig.strategy }}``), the operator sets no ``MIG_STRATEGY`` ("let plugin
decide this per node"), and each pool's config decides. Each pool's file says
the pool's own strategy either way (:func:`gpuplan.identity.own_mig_strategy`):
where the cluster sets one it overrides the file, and the pool's config name
then does not depend on the other pools. See :func:`cluster_mig_strategy`.

Kept names: the ConfigMap also carries, verbatim, the old configs whose names
nodes of a Karpenter pool may still carry (:func:`gpuplan.identity.kept_plugin_configs`,
read from the existing tree by the driver), listed in the
``gpuplan.dev/kept-configs`` annotation so a later build keeps them too.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.lower.common import object_annotations
from gpuplan.provisioning.pools import platform_gpu_stack
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import (
    DEFAULT_CONFIG, DEVICE_PLUGIN_CONFIGMAP, KEPT_CONFIGS_ANNOTATION, cluster_mig_strategy, kept_plugin_configs,
    plugin_config_key, pool_config, reads_plugin_config,
)


def default_config(rf: ResolvedFleet) -> dict[str, Any]:
    """For GPU nodes without the label: whole GPUs, no sharing."""
    return {"version": "v1", "flags": {"migStrategy": cluster_mig_strategy(rf) or "none"}}


def configs(rf: ResolvedFleet) -> dict[str, dict[str, Any]]:
    """Config key -> config data: the default first, then pools by key."""
    out: dict[str, dict[str, Any]] = {DEFAULT_CONFIG: default_config(rf)}
    # GKE's own plugin reads none; Bottlerocket's neither (reads_plugin_config)
    served = (pv for pv in rf.pools if not platform_gpu_stack(pv.pool) and reads_plugin_config(pv))
    for key, pv in sorted(((plugin_config_key(rf, pv), pv) for pv in served), key=lambda x: x[0]):
        out[key] = pool_config(rf, pv)
    return out


def configmap(rf: ResolvedFleet) -> dict[str, Any]:
    import json

    from gpuplan.render.yamlwriter import dump

    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    data = {key: dump(cfg) for key, cfg in configs(rf).items()}
    kept = kept_plugin_configs(rf)
    annotations = dict(object_annotations(rf, "ConfigMap"))
    if kept:
        for key, (_, text) in kept.items():
            data[key] = text
        data = {DEFAULT_CONFIG: data.pop(DEFAULT_CONFIG), **dict(sorted(data.items()))}
        annotations[KEPT_CONFIGS_ANNOTATION] = json.dumps(
            {key: pool for key, (pool, _) in kept.items()}, sort_keys=True, separators=(",", ":"))
    meta = metadata(rf, DEVICE_PLUGIN_CONFIGMAP, namespace=ns, annotations=annotations or None)
    return obj("v1", "ConfigMap", meta, data=data)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    return [Artifact(
        path="gpu-operator/device-plugin-config.yaml",
        documents=(configmap(rf),),
        description="device-plugin ConfigMap: one config per pool (sharing, MIG strategy), chosen by the "
                    "node label nvidia.com/device-plugin.config",
    )]
