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
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.lower import Artifact, Produced
from gpuplan.lower.common import content_name, metadata, obj
from gpuplan.lower.gitops import object_annotations
from gpuplan.resolve import PoolView, ResolvedFleet
from gpuplan.spec.models import Mig

CONFIGMAP_NAME = "gpuplan-mig-parted-config"
CONFIG_KEY = "config.yaml"
ALL_DISABLED = "all-disabled"


def mig_manager_needed(rf: ResolvedFleet) -> bool:
    """MIG manager runs when a pool uses MIG or has MIG-capable GPUs (to keep them disabled)."""
    return any(
        isinstance(pv.pool.sharing, Mig) or (pv.gpu is not None and pv.gpu.mig_capable) for pv in rf.pools
    )


def _entry(pv: PoolView, devices: Any, layout: dict[str, int] | None) -> dict[str, Any]:
    e: dict[str, Any] = {}
    if pv.gpu is not None and pv.gpu.device_filters:
        e["device-filter"] = list(pv.gpu.device_filters)
    e["devices"] = devices
    e["mig-enabled"] = layout is not None
    if layout is not None:
        e["mig-devices"] = dict(layout)
    return e


def pool_entries(pv: PoolView) -> list[dict[str, Any]]:
    """The mig-parted entries of one MIG pool."""
    s = pv.pool.sharing
    assert isinstance(s, Mig)
    if s.layout is not None:
        return [_entry(pv, "all", dict(s.layout))]
    if pv.gpus_per_node:
        per = pv.gpu_layouts()
        if all(layout == per[0] for layout in per):
            return [_entry(pv, "all", per[0])]
        groups: list[tuple[dict[str, int] | None, list[int]]] = []
        for i, layout in enumerate(per):
            for g_layout, idx in groups:
                if g_layout == layout:
                    idx.append(i)
                    break
            else:
                groups.append((layout, [i]))
        return [_entry(pv, idx, layout) for layout, idx in groups]
    # GPUs per node unknown (rules report it): the spec's groups as written
    return [
        _entry(pv, list(g.devices), dict(g.layout) if g.layout is not None else None) for g in s.devices or ()
    ]


def config_name(pv: PoolView) -> str | None:
    """The pool's mig-parted config name = its ``nvidia.com/mig.config`` label
    value (None: not a MIG pool): ``gpuplan-<pool>-<hash of its entries>``.
    mig-manager repartitions a node only when that label's value changes
    (NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577), so a
    changed layout must change the name or it reaches no node."""
    if not isinstance(pv.pool.sharing, Mig):
        return None
    return content_name(f"gpuplan-{pv.name}", pool_entries(pv))


def mig_parted_config(rf: ResolvedFleet) -> dict[str, Any]:
    configs: dict[str, Any] = {ALL_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    named = [(config_name(pv), pv) for pv in rf.pools]
    for name, pv in sorted(((n, pv) for n, pv in named if n is not None), key=lambda x: x[0]):
        configs[name] = pool_entries(pv)
    return {"version": "v1", "mig-configs": configs}


def configmap(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    meta = metadata(rf, CONFIGMAP_NAME, namespace=ns, annotations=object_annotations(rf, "ConfigMap"))
    return obj("v1", "ConfigMap", meta, data={CONFIG_KEY: dump(mig_parted_config(rf))})


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not mig_manager_needed(rf):
        return []
    return [Artifact(
        path="gpu-operator/mig-parted-config.yaml",
        documents=(configmap(rf),),
        description="mig-parted ConfigMap (key config.yaml): all-disabled + one MIG layout per MIG pool, "
                    "chosen by the node label nvidia.com/mig.config",
    )]
