"""A cluster snapshot made from an example's own generated tree: the objects
`kubectl get nodes,configmaps,priorityclasses,resourcequotas,namespaces -A -o json`
(and NodePools, EC2NodeClasses) would return once the tree is synced, in the
shapes the controllers write them.

Shapes: Node labels as GPU Feature Discovery writes them
(NVIDIA/k8s-device-plugin gpu-feature-discovery, `internal/lm/resource.go`:
nvidia.com/gpu.product, gpu.count, gpu.memory, mig.capable, gpu.present is
NFD's), nvidia.com/mig.config.state as mig-manager writes it
(NVIDIA/mig-parted cmd/nvidia-mig-manager: success|pending|failed),
status.nodeInfo and capacity as the kubelet reports them; server fields
(managedFields, resourceVersion, uid, creationTimestamp) and nulls as the
API server returns them (kubernetes/kubernetes staging apimachinery
ObjectMeta); Karpenter NodePool status.conditions/resources as
kubernetes-sigs/karpenter v1 pkg/apis/v1/nodepool_status.go defines them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
KINDS = ("ConfigMap", "PriorityClass", "Namespace", "ResourceQuota", "NodePool", "EC2NodeClass", "NodeOverlay",
         # kubectl get resourceflavors,clusterqueues,cohorts,localqueues,workloadpriorityclasses,topologies -A
         "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "Topology",
         # kubectl get deviceclasses,resourceclaimtemplates -A; kubectl get applications -n argocd
         "DeviceClass", "ResourceClaimTemplate", "Application",
         # kubectl get queues.scheduling.volcano.sh,podgroups -A
         "Queue", "PodGroup")


def _server(obj: dict, i: int) -> dict:
    o = copy.deepcopy(obj)
    meta = o.setdefault("metadata", {})
    meta["uid"] = f"00000000-0000-4000-8000-{i:012d}"
    meta["resourceVersion"] = str(1000 + i)
    meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
    meta["managedFields"] = [{"manager": "argocd-controller", "operation": "Apply", "apiVersion": o["apiVersion"],
                              "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
    if o["kind"] == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        o["spec"] = {"finalizers": ["kubernetes"]}
        o["status"] = {"phase": "Active"}
    if o["kind"] == "NodePool":
        o["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
                       "resources": {"cpu": "0", "memory": "0", "nodes": "0", "pods": "0"}}
    return o


def _node(name: str, labels: dict, taints: list, gpu_product: str, gpus: int, version: str, i: int,
          mig_state: str | None) -> dict:
    lb = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/arch": "amd64", "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": gpu_product, "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": "81920", "nvidia.com/cuda.driver.major": "595",
        "nvidia.com/gfd.timestamp": "1767225600",
    }
    lb.update(labels)
    if mig_state:
        lb["nvidia.com/mig.config.state"] = mig_state
    return _server({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": lb, "annotations": {
            "nfd.node.kubernetes.io/feature-labels": "pci-10de.present",
            "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"taints": taints or None, "podCIDR": None},
        "status": {"nodeInfo": {"kubeletVersion": f"v{version}.4", "containerRuntimeVersion": "containerd://2.0.5",
                                "osImage": "Ubuntu 24.04.2 LTS", "architecture": "amd64", "operatingSystem": "linux"},
                   "capacity": {"cpu": "128", "nvidia.com/gpu": str(gpus)},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }, i)


def generated_objects(tree: Path) -> list[dict]:
    out = []
    for f in sorted(tree.rglob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if isinstance(d, dict) and "kind" in d:
                out.append(d)
    return out


def snapshot(example: str, tree: Path) -> dict:
    """`kind: List` of the example's cluster as synced from ``tree`` (its generated/)."""
    from gpuplan.catalog import resolve_gpu

    fleet = yaml.safe_load((REPO / "examples" / example).read_text())
    version = fleet["spec"]["cluster"]["kubernetesVersion"]
    objs = generated_objects(tree)
    items = [_server(o, i) for i, o in enumerate(objs) if o["kind"] in KINDS]
    values = tree / "kueue" / "values.yaml"
    if values.is_file():
        # the Kueue chart writes managerConfig.controllerManagerConfigYaml into its ConfigMap
        # (kueue charts/kueue/templates/manager/manager-config.yaml)
        text = yaml.safe_load(values.read_text())["managerConfig"]["controllerManagerConfigYaml"]
        items.append(_server({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system",
                                           "labels": {"app.kubernetes.io/name": "kueue",
                                                      "app.kubernetes.io/managed-by": "Helm"}},
                              "data": {"controller_manager_config.yaml": text + "\n"}}, len(items)))
    rules = {o["metadata"]["labels"]["gpuplan.dev/pool"]: o["spec"]["rules"][0] for o in objs
             if o["kind"] == "NodeFeatureRule"}
    for p in fleet["spec"]["pools"]:
        if "nodes" not in p or p["name"] not in rules:
            continue
        rule = rules[p["name"]]
        model = resolve_gpu(p["gpu"])
        for n in p["nodes"]:
            state = "success" if model.mig_capable else None
            items.append(_node(n, rule["labels"], rule.get("taints") or [], model.gfd_product, p["gpusPerNode"],
                               version, len(items), state))
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def dump(obj: dict) -> bytes:
    return json.dumps(obj, indent=2).encode()
