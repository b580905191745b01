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

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.lower.common import object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import (
    MIG_ALL_DISABLED_CONFIG, MIG_PARTED_CONFIGMAP, MIG_PARTED_CONFIG_KEY, mig_config_name, mig_manager_needed,
    pool_entries,
)


def mig_parted_config(rf: ResolvedFleet) -> dict[str, Any]:
    configs: dict[str, Any] = {MIG_ALL_DISABLED_CONFIG: [{"devices": "all", "mig-enabled": False}]}
    named = [(mig_config_name(pv), pv) for pv in rf.pools]
    for name, pv in sorted(((n, pv) for n, pv in named if n is not None), key=lambda x: x[0]):
        configs[name] = pool_entries(pv)
    return {"version": "v1", "mig-configs": configs}


def configmap(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    meta = metadata(rf, MIG_PARTED_CONFIGMAP, namespace=ns, annotations=object_annotations(rf, "ConfigMap"))
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
