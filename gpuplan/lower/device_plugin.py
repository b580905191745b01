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
only set when it is right for every node, and is then written into every config
too (the file says what the node really runs; on GPUs without MIG enabled
none/single/mixed all advertise whole ``nvidia.com/gpu``). Otherwise it is
left empty: the chart then omits ``spec.mig.strategy`` (``{{- if
.Values.mig.strategy }}``), the operator sets no ``MIG_STRATEGY`` ("let plugin
decide this per node"), and each pool's config decides. See
:func:`cluster_mig_strategy`.
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.lower import Artifact, Produced
from gpuplan.lower.common import content_name, metadata, obj
from gpuplan.lower.gitops import object_annotations
from gpuplan.resolve import GPU, PoolView, ResolvedFleet
from gpuplan.spec.models import Mig

CONFIGMAP_NAME = "gpuplan-device-plugin-config"
# Pool names are DNS labels (no '.'), so this key can never be a pool's key.
DEFAULT_CONFIG = "gpuplan.default"
MPS_MAX_REPLICAS = 48


def cluster_mig_strategy(rf: ResolvedFleet) -> str:
    """The fleet-wide MIG strategy (Helm ``mig.strategy``).

    - ``none`` when no pool uses MIG;
    - the one strategy all MIG pools share, when it suits every node;
    - ``""`` (each node's config decides) when MIG pools differ, or when they
      all use ``mixed`` but a pool shares GPUs with MPS: the device plugin
      refuses to start with ``mixed`` and MPS ("using --mig-strategy=mixed is
      not supported with MPS"), and a cluster-wide value would override the
      MPS pool's own ``none``."""
    # asked once per pool: remembered on the fleet so lowering stays linear in pools
    memo = rf.__dict__.get("_cluster_mig_strategy")
    if memo is None:
        memo = rf.__dict__["_cluster_mig_strategy"] = _cluster_mig_strategy(rf)
    return memo


def _cluster_mig_strategy(rf: ResolvedFleet) -> str:
    seen: list[str] = []
    mps = False
    for pv in rf.pools:
        s = pv.pool.sharing
        if isinstance(s, Mig) and s.strategy not in seen:
            seen.append(s.strategy)
        mps = mps or s.mode == "mps"
    if not seen:
        return "none"
    if len(seen) == 1 and not (seen[0] == "mixed" and mps):
        return seen[0]
    return ""


def pool_mig_strategy(rf: ResolvedFleet, pv: PoolView) -> str:
    """The MIG strategy the pool's nodes effectively run."""
    cluster = cluster_mig_strategy(rf)
    if cluster:
        return cluster
    s = pv.pool.sharing
    return s.strategy if isinstance(s, Mig) else "none"


def pool_config(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    """The device-plugin config (as data) for one pool."""
    s = pv.pool.sharing
    if s.mode in ("time-slicing", "mps"):
        # The rules reject these first; lowering must still never write a config
        # the device plugin refuses (it crashes on it, together with GFD).
        if s.replicas < 2:
            raise ValueError(f"pool {pv.name}: sharing replicas must be >= 2, got {s.replicas}")
        if s.mode == "mps" and s.replicas > MPS_MAX_REPLICAS:
            raise ValueError(f"pool {pv.name}: MPS allows at most {MPS_MAX_REPLICAS} replicas")
    return _config(rf, pv)


def _config(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    cfg: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": pool_mig_strategy(rf, pv)}}
    s = pv.pool.sharing
    if s.mode in ("time-slicing", "mps"):
        key = "timeSlicing" if s.mode == "time-slicing" else "mps"
        cfg["sharing"] = {
            key: {
                "renameByDefault": s.rename_by_default,
                "failRequestsGreaterThanOne": s.fail_requests_greater_than_one,
                "resources": [{"name": GPU, "replicas": s.replicas}],
            }
        }
    return cfg


def config_key(rf: ResolvedFleet, pv: PoolView) -> str:
    """The pool's key in the ConfigMap = its ``nvidia.com/device-plugin.config``
    label value: ``<pool>-<hash of the config>``. A changed replica count or
    sharing mode gives a new value, which is what makes config-manager switch
    (it reacts to label changes only; cmd/config-manager/main.go:272-278). The
    ConfigMap is applied before the labels change (Argo CD wave -1 vs the
    NodeFeatureRule's 1; Karpenter nodes drift to the new template); if the
    kubelet has not refreshed the mounted ConfigMap yet, config-manager exits
    on the unknown key ("specified config ... does not exist", main.go:356-358)
    and is restarted until it has. Rules read it too, on specs that may still
    be invalid: the name is computed without ``pool_config``'s guard."""
    return content_name(pv.name, _config(rf, pv))


def default_config(rf: ResolvedFleet) -> dict[str, Any]:
    """For GPU nodes without the label: whole GPUs, no sharing."""
    return {"version": "v1", "flags": {"migStrategy": cluster_mig_strategy(rf) or "none"}}


def configs(rf: ResolvedFleet) -> dict[str, dict[str, Any]]:
    """Config key -> config data: the default first, then pools by key."""
    out: dict[str, dict[str, Any]] = {DEFAULT_CONFIG: default_config(rf)}
    for key, pv in sorted(((config_key(rf, pv), pv) for pv in rf.pools), key=lambda x: x[0]):
        out[key] = pool_config(rf, pv)
    return out


def configmap(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    data = {key: dump(cfg) for key, cfg in configs(rf).items()}
    meta = metadata(rf, CONFIGMAP_NAME, namespace=ns, annotations=object_annotations(rf, "ConfigMap"))
    return obj("v1", "ConfigMap", meta, data=data)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    return [Artifact(
        path="gpu-operator/device-plugin-config.yaml",
        documents=(configmap(rf),),
        description="device-plugin ConfigMap: one config per pool (sharing, MIG strategy), chosen by the "
                    "node label nvidia.com/device-plugin.config",
    )]
