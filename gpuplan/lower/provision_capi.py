"""Cluster API objects for the pools whose nodes a MachineDeployment creates, sized by the
Cluster Autoscaler's clusterapi provider. They are applied to the **management cluster** (where
the Cluster API controllers and the autoscaler's management client read them), not to the
workload cluster the rest of the tree goes to: they are not listed in the root kustomization.

Per Cluster API pool, ``provisioning/capi/<pool>.yaml`` holds two objects:

- ``cluster.x-k8s.io/v1beta2`` MachineDeployment in the Cluster's
  namespace, referencing the user's infrastructure machine template by name
  (``capi.infrastructureRef``: it differs per provider and carries the machine's hardware) and
  the KubeadmConfigTemplate below. An autoscaled pool carries the autoscaler's annotations
  (kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/clusterapi/
  README.md "Enabling Autoscaling", "Scale from zero support"; clusterapi_utils.go:35-47, 320-334):
  ``cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size`` = ``minNodes`` and the
  ceiling (``maxGPUs`` in whole nodes), and the scale-from-zero capacity: ``gpu-type:
  nvidia.com/gpu`` (its *value* becomes the template node's resource name,
  clusterapi_unstructured.go:331-338), ``gpu-count`` (the ``nvidia.com/gpu`` one node
  advertises: its physical GPUs on an exclusive pool), ``cpu``/``memory`` when given, and
  ``labels``/``taints`` = the node labels and taints below, so that the template node the
  autoscaler simulates selects and repels pods as the real node will; and
  ``cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime`` from ``maxNodeProvisionTime``. It has no
  ``spec.replicas``: Cluster API's webhook defaults a new MachineDeployment to the min-size
  annotation (kubernetes-sigs/cluster-api@v1.14.0 core/webhooks/admission/machinedeployment.go:
  360-388) and GitOps never takes the field back from the autoscaler. A fixed-size pool
  (``minNodes`` at the ceiling) has ``replicas`` and no autoscaler annotations.
- ``bootstrap.cluster.x-k8s.io/v1beta2`` KubeadmConfigTemplate: the kubelet joins with the
  pool's labels (``--node-labels``: ``gpuplan.identity.template_node_labels`` and
  ``cluster-api/accelerator``) and taints (``nodeRegistration.taints``:
  ``gpuplan.identity.template_taints``), plus the pool's
  Topology/CPU Manager drop-in (a ``files`` entry and ``--config-dir``) when it has one. Cluster
  API does not copy these labels from a Machine to its Node, nor taints without an alpha gate
  (``gpuplan.provisioning.capi``). Its name is content-addressed: Cluster API rolls a
  MachineDeployment's machines only when its ``spec.template`` changes, and a changed template
  under the same name reaches no machine; a new name rolls the pool
  (:func:`gpuplan.provisioning.capi.machine_rollout`).
``provisioning/capi/kustomization.yaml`` lists them for a sync of their own, and
``provisioning/capi/README.md`` says what to apply where and the flags the Cluster Autoscaler
must run with.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import POOL_LABEL, content_name, template_node_labels, template_taints, topology_is_default
from gpuplan.lower.common import cell, folder_kustomization, metadata, obj
from gpuplan.lower.kubelet import DROPIN_NAME, kubelet_dropin
from gpuplan.provisioning import capi
from gpuplan.resolve import GPU, PoolView, ResolvedFleet

MD_API = "cluster.x-k8s.io/v1beta2"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
BOOTSTRAP_API = f"{BOOTSTRAP_GROUP}/v1beta2"
DIR = "provisioning/capi"

CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
# kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/clusterapi/clusterapi_utils.go
MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPACITY = "capacity.cluster-autoscaler.kubernetes.io/"
# per node group options: clusterapi_utils.go getNodeGroupAutoscalingOptionsKeyPrefix,
# clusterapi_nodegroup.go:456-482 GetOptions (config/const.go:40 "maxnodeprovisiontime")
PROVISION_TIME = "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime"
KUBELET_CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"
DROPIN_PATH = f"{KUBELET_CONFIG_DIR}/{DROPIN_NAME}"  # the static pools' drop-in, as a bootstrap file


def capi_pools(rf: ResolvedFleet) -> list[PoolView]:
    return [pv for pv in rf.pools if pv.pool.capi is not None]


def deployment_name(pv: PoolView) -> str:
    return capi.deployment_name(pv.name)


def node_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """Every label the kubelet registers the pool's nodes with."""
    return {**template_node_labels(rf, pv), **capi.platform_labels(pv)}


def label_list(labels: dict[str, str]) -> str:
    """``k=v,k=v`` in key order: the kubelet's ``--node-labels`` and the autoscaler's labels
    annotation take the same form (clusterapi_unstructured.go:213-224)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def taint_list(taints: list[dict[str, str]]) -> str:
    """``key=value:Effect,...`` (clusterapi_unstructured.go:658-700, ``parseTaint``)."""
    return ",".join(f"{t['key']}={t['value']}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}"
                    for t in taints)


def bootstrap_spec(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    s = capi.settings(pv.pool)
    args = [{"name": k, "value": v} for k, v in sorted((s.kubelet_extra_args or {}).items())]
    args.append({"name": capi.NODE_LABELS_ARG, "value": label_list(node_labels(rf, pv))})
    spec: dict[str, Any] = {}
    if not topology_is_default(pv.pool.topology):
        dropin = kubelet_dropin(pv)
        args.append({"name": "config-dir", "value": KUBELET_CONFIG_DIR})
        spec["files"] = [{"path": DROPIN_PATH, "owner": "root:root", "permissions": "0644",
                          "content": json.dumps(dropin, indent=2, sort_keys=True) + "\n"}]
    args.sort(key=lambda a: a["name"])
    spec["joinConfiguration"] = {"nodeRegistration": {"kubeletExtraArgs": args, "taints": template_taints(pv)}}
    return {"template": {"spec": spec}}


def bootstrap_name(rf: ResolvedFleet, pv: PoolView) -> str:
    return content_name(deployment_name(pv), bootstrap_spec(rf, pv))


def kubeadm_config_template(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    cfg = rf.fleet.spec.cluster.capi
    meta = metadata(rf, bootstrap_name(rf, pv), namespace=cfg.namespace,
                    extra_labels={CLUSTER_NAME_LABEL: cfg.cluster_name, POOL_LABEL: pv.name})
    return obj(BOOTSTRAP_API, "KubeadmConfigTemplate", meta, spec=bootstrap_spec(rf, pv))


def autoscaler_annotations(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """What the Cluster Autoscaler reads from an autoscaled MachineDeployment (none on a fixed-size one)."""
    if capi.fixed_size(pv):
        return {}
    s = capi.settings(pv.pool)
    out = {MIN_SIZE: str(s.min_nodes), MAX_SIZE: str(capi.max_nodes(pv))}
    if s.max_node_provision_time is not None:
        out[PROVISION_TIME] = s.max_node_provision_time
    if s.cpu is not None:
        out[CAPACITY + "cpu"] = s.cpu
    if s.memory is not None:
        out[CAPACITY + "memory"] = s.memory
    gpus = pv.node_resources().get(GPU, 0)
    if gpus:
        out[CAPACITY + "gpu-type"] = GPU
        out[CAPACITY + "gpu-count"] = str(gpus)
    out[CAPACITY + "labels"] = label_list(node_labels(rf, pv))
    taints = template_taints(pv)
    if taints:
        out[CAPACITY + "taints"] = taint_list(taints)
    return dict(sorted(out.items()))


def machine_deployment(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    cfg = rf.fleet.spec.cluster.capi
    s = capi.settings(pv.pool)
    name = deployment_name(pv)
    selector = {CLUSTER_NAME_LABEL: cfg.cluster_name, DEPLOYMENT_NAME_LABEL: name}
    meta = metadata(rf, name, namespace=cfg.namespace,
                    extra_labels={CLUSTER_NAME_LABEL: cfg.cluster_name, POOL_LABEL: pv.name},
                    annotations=autoscaler_annotations(rf, pv))
    ref = s.infrastructure_ref
    machine: dict[str, Any] = {
        "bootstrap": {"configRef": {"apiGroup": BOOTSTRAP_GROUP, "kind": "KubeadmConfigTemplate",
                                    "name": bootstrap_name(rf, pv)}},
        "clusterName": cfg.cluster_name,
        "infrastructureRef": {"apiGroup": ref.api_group, "kind": ref.kind, "name": ref.name},
        "version": cfg.version,
    }
    if s.failure_domain is not None:
        machine["failureDomain"] = s.failure_domain
    spec: dict[str, Any] = {"clusterName": cfg.cluster_name}
    if capi.fixed_size(pv):
        spec["replicas"] = capi.max_nodes(pv)
    strategy = capi.rollout(pv.pool)
    if strategy is not None:
        spec["rollout"] = strategy
    spec["selector"] = {"matchLabels": dict(selector)}
    spec["template"] = {"metadata": {"labels": {**selector, POOL_LABEL: pv.name}}, "spec": machine}
    return obj(MD_API, "MachineDeployment", meta, spec=spec)


def autoscaler_flags(rf: ResolvedFleet) -> list[str]:
    """The Cluster Autoscaler flags the CAPI pools rely on (for the README and docs/capi.md)."""
    flags = ["--cloud-provider=clusterapi"]
    cfg = rf.fleet.spec.cluster.capi
    if cfg is not None and cfg.gpu_total:
        flags += [f"--gpu-total={t.type}:{t.min}:{t.max}" for t in cfg.gpu_total]
    return flags


def _readme(rf: ResolvedFleet, pools: list[PoolView]) -> str:
    cfg = rf.fleet.spec.cluster.capi
    lines = [
        "# Cluster API pools",
        "",
        f"Apply this folder to the **management cluster**, in namespace `{cfg.namespace}` of Cluster "
        f"`{cfg.cluster_name}` (`kubectl apply -k {DIR}/`, or a GitOps application of its own there). "
        "It is not part of the workload cluster's kustomization. Each pool's "
        "`infrastructureRef` names a machine template that must already exist there.",
        "",
        "| pool | MachineDeployment | nodes | accelerator label | autoscaled |",
        "|---|---|---|---|---|",
    ]
    for pv in pools:
        s = capi.settings(pv.pool)
        nodes = str(capi.max_nodes(pv)) if capi.fixed_size(pv) else f"{s.min_nodes}-{capi.max_nodes(pv)}"
        acc = capi.platform_labels(pv).get(capi.ACCELERATOR_LABEL)
        lines.append(f"| {cell(pv.name)} | `{deployment_name(pv)}` | {nodes} | "
                     f"{cell(acc) if acc else 'none (see docs/capi.md)'} | "
                     f"{'no (fixed size)' if capi.fixed_size(pv) else 'yes'} |")
    lines += [
        "",
        "## Cluster Autoscaler",
        "",
        f"The Cluster Autoscaler (`cluster.capi.autoscalerVersion`: {cfg.autoscaler_version}) must run with:",
        "",
        "```",
        *autoscaler_flags(rf),
        "```",
        "",
        "`--gpu-total` limits GPUs by the `cluster-api/accelerator` value of each node; a node counts "
        "the `nvidia.com/gpu` it advertises. Pools without that label are outside the limit.",
        "",
        "## Rollouts",
        "",
        "The KubeadmConfigTemplate's name changes with its content (labels, taints, kubelet settings). "
        "Cluster API then replaces every machine of the pool, one at a time (the MachineDeployment's "
        "rollout strategy), draining each node: `gpuplan plan --base` lists such a change.",
    ]
    metal = [pv.name for pv in pools if capi.bare_metal(pv.pool)]
    if metal:
        lines += [
            "",
            f"Bare-metal pools ({', '.join(cell(n) for n in metal)}) roll with `maxSurge: 0, maxUnavailable: 1`: "
            "each old machine is deleted (its node drained) before its replacement is created, so the "
            "replacement takes the freed BareMetalHost; no spare host is needed, and the pool runs one node "
            "short during the rollout.",
        ]
    return "\n".join(lines) + "\n"


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    pools = [pv for pv in capi_pools(rf) if pv.gpus_per_node]
    if not pools or rf.fleet.spec.cluster.capi is None:
        return
    files = [Artifact(
        path=capi.TEMPLATE_PATH.format(pool=pv.name), documents=(kubeadm_config_template(rf, pv), machine_deployment(rf, pv)),
        kustomize=False,
        description=f"Cluster API MachineDeployment and KubeadmConfigTemplate of pool {pv.name} (management "
                    "cluster; not synced with the tree: docs/capi.md)",
    ) for pv in pools]
    yield from files
    yield folder_kustomization(DIR, files, "the Cluster API pools, for a sync of their own to the management cluster")
    yield Artifact(path=f"{DIR}/README.md", text=_readme(rf, pools), kustomize=False,
                   description="how to apply the Cluster API pools, and the Cluster Autoscaler's flags")
