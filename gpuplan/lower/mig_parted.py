"""The mig-parted ConfigMap the GPU Operator's MIG manager applies.

Key ``config.yaml`` (the only key mig-manager reads), content mig-parted v1
(reference/k8s/facts.md §e)::

    version: v1
    mig-configs:
      all-disabled:                    # kept: ClusterPolicy migManager.config.default
        - devices: all
          mig-enabled: false
      gpuplan-<pool>-<hash>:           # one per MIG pool = node label nvidia.com/mig.config
        - device-filter: ["0x20B210DE"]   # the pool's GPU model (PCI device id + vendor 10DE)
          devices: all                    # or [0, 1] per GPU when the layouts differ
          mig-enabled: true
          mig-devices: {"3g.40gb": 1, ...}

Per-GPU layouts (``sharing.devices``): GPUs with the same layout share one
entry (``devices: [indices]``); GPUs with MIG disabled get an explicit
``mig-enabled: false`` entry, since mig-parted leaves GPUs that no entry names
as they are. The ``device-filter`` restricts every entry to the pool's model,
so a node of another model is not partitioned with the wrong profile table.

Kept names: old configs whose names nodes of a Karpenter MIG pool may still
carry stay, with their old entries, listed in the ``gpuplan.dev/kept-configs``
annotation (:func:`gpuplan.identity.kept_mig_configs`, docs/transitions.md).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.lower.common import object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import (
    KEPT_CONFIGS_ANNOTATION, MIG_ALL_DISABLED_CONFIG, MIG_PARTED_CONFIGMAP, MIG_PARTED_CONFIG_KEY, kept_mig_configs,
    mig_config_name, mig_manager_needed, pool_entries,
)


def mig_parted_config(rf: ResolvedFleet) -> dict[str, Any]:
    configs: dict[str, Any] = {MIG_ALL_DISABLED_CONFIG: [{"devices": "all", "mig-enabled": False}]}
    named = [(mig_config_name(pv), pv) for pv in rf.pools]
    pools = {n: pool_entries(pv) for n, pv in named if n is not None}
    # old names nodes of a Karpenter pool may still carry, their entries verbatim (docs/transitions.md)
    pools.update({n: entries for n, (_, entries) in kept_mig_configs(rf).items() if n not in pools})
    for name in sorted(pools):
        configs[name] = pools[name]
    return {"version": "v1", "mig-configs": configs}


def configmap(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    import json

    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    annotations = dict(object_annotations(rf, "ConfigMap"))
    kept = kept_mig_configs(rf)
    if kept:  # read back by the next build
        annotations[KEPT_CONFIGS_ANNOTATION] = json.dumps({n: pool for n, (pool, _) in kept.items()},
                                                          sort_keys=True, separators=(",", ":"))
    meta = metadata(rf, MIG_PARTED_CONFIGMAP, namespace=ns, annotations=annotations or None)
    return obj("v1", "ConfigMap", meta, data={MIG_PARTED_CONFIG_KEY: dump(mig_parted_config(rf))})


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not mig_manager_needed(rf):
        return []
    return [Artifact(
        path="gpu-operator/mig-parted-config.yaml",
        documents=(configmap(rf),),
        description="mig-parted ConfigMap (key config.yaml): all-disabled + one MIG layout per MIG pool, "
                    "chosen by the node label nvidia.com/mig.config",
    )]
