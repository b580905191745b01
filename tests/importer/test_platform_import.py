"""`gpuplan import` on GKE, AKS and Cluster API node groups, and on a cluster whose NVIDIA device
plugin runs without the GPU Operator.

Fixture shapes:

* GKE nodes on GKE's own GPU stack carry GKE's labels, no GFD's: ``cloud.google.com/gke-nodepool``,
  ``cloud.google.com/gke-accelerator`` (kubernetes/autoscaler cluster-autoscaler-1.36.1
  cluster-autoscaler/cloudprovider/gce/gce_cloud_provider.go:47), the partition-size and sharing
  labels gpuplan.provisioning.gke names (from GKE's how-to pages it cites), the machine type as
  ``node.kubernetes.io/instance-type``; the Config Connector ContainerNodePool
  (container.cnrm.cloud.google.com/v1beta1) with the fields gpuplan.lower writes for one;
* AKS nodes: ``kubernetes.azure.com/agentpool`` and ``kubernetes.azure.com/accelerator: nvidia``
  (gpuplan/upstream/nodes/aks.json), GFD labels from the GPU Operator; the Azure Service Operator
  ManagedClustersAgentPool (containerservice.azure.com/v1api20250801);
* Cluster API: a MachineDeployment (cluster.x-k8s.io/v1beta2) with the Cluster Autoscaler's
  min/max-size annotations, and a Node with the owner annotations Cluster API sets
  (kubernetes-sigs/cluster-api@v1.14.0 core/reconcilers/machine/machine_controller_noderef.go:49-56);
* the stand-alone device plugin: NVIDIA/k8s-device-plugin@v0.20.0 Helm chart's DaemonSet
  (deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml:75-82 config-manager
  env, 189-192 CONFIG_FILE, 256-260 the ``available-configs`` ConfigMap volume)."""

from __future__ import annotations

import yaml

from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import dump

G = "cloud.google.com/"


def _run(items):
    r = import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert r.text is not None, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def _node(name, labels, annotations=None, taints=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  **labels}, "annotations": annotations or {}},
            "spec": {"taints": taints or []}, "status": {"nodeInfo": {"kubeletVersion": "v1.33.5"}}}


def _pool(spec, name):
    return next(p for p in spec["pools"] if p["name"] == name)


def _round_trip(r):
    rt = r.round_trip
    assert rt.built, r.diagnostics  # the draft passes gpuplan validate
    return rt


def test_gke_node_pools_without_gfd_labels_are_gke_pools():
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    mig = _node("gke-ml-infer-a100-0", {G + "gke-nodepool": "infer-a100", G + "gke-accelerator": "nvidia-a100-80gb",
                                        G + "gke-gpu-partition-size": "3g.40gb",
                                        "node.kubernetes.io/instance-type": "a2-ultragpu-1g",
                                        "topology.kubernetes.io/region": "us-central1"}, taints=gpu_taint)
    shared = [_node(f"gke-ml-notebooks-{i}", {G + "gke-nodepool": "notebooks", G + "gke-accelerator": "nvidia-l4",
                                              G + "gke-gpu-sharing-strategy": "time-sharing",
                                              G + "gke-max-shared-clients-per-gpu": "4", G + "gke-spot": "true",
                                              "node.kubernetes.io/instance-type": "g2-standard-8"}, taints=gpu_taint)
              for i in range(3)]
    cnp = {"apiVersion": "container.cnrm.cloud.google.com/v1beta1", "kind": "ContainerNodePool",
           "metadata": {"name": "infer-a100", "namespace": "config-control",
                        "annotations": {"cnrm.cloud.google.com/project-id": "ml-platform-prod"}},
           "spec": {"location": "us-central1",
                    "clusterRef": {"external": "projects/ml-platform-prod/locations/us-central1/clusters/ml-gke"},
                    "autoscaling": {"totalMinNodeCount": 2, "totalMaxNodeCount": 8},
                    "nodeConfig": {"machineType": "a2-ultragpu-1g", "imageType": "COS_CONTAINERD",
                                   "guestAccelerator": [{"type": "nvidia-a100-80gb", "count": 1,
                                                         "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"},
                                                         "gpuPartitionSize": "3g.40gb"}]}}}
    r, spec = _run([mig, *shared, cnp])
    a100, l4 = _pool(spec, "infer-a100"), _pool(spec, "notebooks")
    # the declared config (ContainerNodePool) over the running nodes
    assert a100["gpu"] == "A100-SXM4-80GB" and "nodes" not in a100
    assert a100["gke"] == {"machineType": "a2-ultragpu-1g", "maxGPUs": 8, "minNodes": 2}
    assert a100["sharing"] == {"mode": "mig", "layout": {"3g.40gb": 2}}  # as many as fit on an A100 80GB
    # nodes only: the machine type from the nodes, sized to the nodes seen, with a TODO
    assert l4["gpu"] == "L4" and l4["gke"] == {"machineType": "g2-standard-8", "maxGPUs": 3, "spot": True}
    assert l4["sharing"] == {"mode": "time-slicing", "replicas": 4}
    assert "autoscaling limits are not visible" in r.text
    assert spec["cluster"]["gcp"] == {"project": "ml-platform-prod", "location": "us-central1",
                                      "clusterName": "ml-gke", "namespace": "config-control"}
    assert not [d for d in r.diagnostics if d.code in ("GP950", "GP952")]
    rt = _round_trip(r)
    # gpuplan's ContainerNodePool adds its pool label and binding taint (immutable nodeConfig.labels:
    # Config Connector would refuse it) and creates the node pool it did not see: each one listed
    assert "ContainerNodePool.container.cnrm.cloud.google.com config-control/infer-a100: spec.nodeConfig.labels " \
           "added" in rt.unexplained
    assert "ContainerNodePool.container.cnrm.cloud.google.com config-control/notebooks: added" in rt.unexplained
    assert len(rt.unexplained) == int(next(ln for ln in rt.summary_lines() if "unexplained" in ln).split(": ")[1]
                                      .split()[0])


TS = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def _device_plugin_chart():
    """The device plugin chart's DaemonSet and its configs ConfigMap (`config.map` values)."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "nvdp-nvidia-device-plugin-configs", "namespace": "kube-system"},
          "data": {"exclusive": "version: v1\nflags:\n  migStrategy: none\n", "ts4": TS}}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvdp-nvidia-device-plugin",
                                                                      "namespace": "kube-system"},
          "spec": {"template": {"spec": {
              "initContainers": [{"name": "config-manager-init", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
                                  "env": [{"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
                                          {"name": "DEFAULT_CONFIG", "value": "ts4"}]}],
              "containers": [{"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
                              "env": [{"name": "CONFIG_FILE", "value": "/config/config.yaml"}]}],
              "volumes": [{"name": "available-configs",
                           "configMap": {"name": "nvdp-nvidia-device-plugin-configs"}},
                          {"name": "config", "emptyDir": {}}]}}}}
    return cm, ds


MIG = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n" \
      "  all-3g.40gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 2}\n"


def _mig_manager():
    """A mig-manager DaemonSet as the operator's asset lays it out (NVIDIA/gpu-operator@v26.7.0
    assets/state-mig-manager/0600_daemonset.yaml:80-81 and 110-112, the `mig-parted-config` volume;
    image k8s-mig-manager, deployments/gpu-operator/values.yaml:370-374), deployed by hand."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig-parted-config", "namespace": "nvidia-mig"},
          "data": {"config.yaml": MIG}}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-mig-manager", "namespace": "nvidia-mig"},
          "spec": {"template": {"spec": {
              "containers": [{"name": "nvidia-mig-manager", "image": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
                              "volumeMounts": [{"mountPath": "/mig-parted-config", "name": "mig-parted-config"}]}],
              "volumes": [{"name": "mig-parted-config", "configMap": {"name": "mig-parted-config"}}]}}}}
    return cm, ds


def test_standalone_device_plugin_is_a_finding_and_its_config_is_drafted():
    cm, ds = _device_plugin_chart()
    nodes = [_node("gpu-1", {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4"}),
             _node("gpu-2", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
                             "nvidia.com/device-plugin.config": "exclusive"}),
             _node("gpu-3", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "nvidia.com/gpu.count": "16",
                             "nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-3g.40gb",
                             "nvidia.com/device-plugin.config": "exclusive"})]
    r, spec = _run([cm, ds, *_mig_manager(), *nodes])
    [mm] = [d for d in r.diagnostics if d.code == "GP943" and "nvidia-mig/nvidia-mig-manager" in d.message
            and "outside the GPU Operator" in d.message]
    assert mm.line is not None
    a100 = next(p for p in spec["pools"] if p["gpu"] == "A100-SXM4-80GB")
    assert a100["sharing"] == {"mode": "mig", "strategy": "single", "layout": {"3g.40gb": 2}}
    assert "mig-parted config all-3g.40gb (ConfigMap mig-parted-config)" in r.text
    [f] = [d for d in r.diagnostics if d.code == "GP943" and "nvdp-nvidia-device-plugin" in d.message
           and "outside the GPU Operator" in d.message]
    assert f.line is not None and "kubectl delete daemonset -n kube-system nvdp-nvidia-device-plugin" in f.hint
    l4 = next(p for p in spec["pools"] if p["gpu"] == "L4")
    h100 = next(p for p in spec["pools"] if p["gpu"] == "H100-SXM5-80GB")
    # the chart's DEFAULT_CONFIG for unlabelled nodes, the node's label for the other
    assert l4["sharing"]["mode"] == "time-slicing" and l4["sharing"]["replicas"] == 4
    assert h100["sharing"] == {"mode": "exclusive"}
    # the plugin runs on the nodes' own driver and toolkit: the operator must not install others
    assert spec["cluster"]["gpuOperator"]["driver"] == "preinstalled"
    assert spec["cluster"]["gpuOperator"]["toolkit"] == "preinstalled"
    assert "GP965" not in {d.code for d in r.diagnostics}  # the mounted ConfigMap is configuration
    rt = _round_trip(r)
    [i] = [i for i, u in enumerate(rt.unexplained) if u.startswith("DaemonSet.apps kube-system/nvdp-nvidia-device-plugin")]
    assert rt.codes[i].code == "GP943"


def test_aks_agent_pool_is_an_aks_pool():
    node = _node("aks-infera100-0", {"kubernetes.azure.com/agentpool": "infera100",
                                     "kubernetes.azure.com/accelerator": "nvidia",
                                     "node.kubernetes.io/instance-type": "Standard_NC96ads_A100_v4",
                                     "nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe-MIG-3g.40gb",
                                     "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "single"})
    spot = _node("aks-nbt4-0", {"kubernetes.azure.com/agentpool": "nbt4", "kubernetes.azure.com/accelerator": "nvidia",
                                "kubernetes.azure.com/scalesetpriority": "spot",
                                "node.kubernetes.io/instance-type": "Standard_NC64as_T4_v3"})
    ap = {"apiVersion": "containerservice.azure.com/v1api20250801", "kind": "ManagedClustersAgentPool",
          "metadata": {"name": "infer-a100", "namespace": "aks-ml"},
          "spec": {"owner": {"name": "aks-ml"}, "azureName": "infera100", "mode": "User", "osType": "Linux",
                   "osSKU": "Ubuntu", "vmSize": "Standard_NC96ads_A100_v4", "count": 1, "enableAutoScaling": True,
                   "minCount": 1, "maxCount": 4, "gpuProfile": {"driver": "Install"}, "gpuInstanceProfile": "MIG3g"}}
    system = {**ap, "metadata": {"name": "system", "namespace": "aks-ml"},
              "spec": {"owner": {"name": "aks-ml"}, "mode": "System", "vmSize": "Standard_D4s_v5", "count": 3}}
    r, spec = _run([node, spot, ap, system])
    a100, t4 = _pool(spec, "infer-a100"), _pool(spec, "nbt4")
    assert a100["gpu"] == "A100-PCIE-80GB" and "nodes" not in a100
    assert a100["aks"] == {"vmSize": "Standard_NC96ads_A100_v4", "name": "infera100", "maxGPUs": 16, "minNodes": 1}
    assert a100["sharing"] == {"mode": "mig", "strategy": "single", "layout": {"3g.40gb": 2}}
    assert t4["gpu"] == "T4" and t4["aks"] == {"vmSize": "Standard_NC64as_T4_v3", "maxGPUs": 4, "spot": True}
    assert spec["cluster"]["azure"] == {"managedCluster": "aks-ml", "namespace": "aks-ml"}
    assert [p["name"] for p in spec["pools"]] == ["infer-a100", "nbt4"]  # the system pool has no GPU: no pool
    assert "GP952" not in {d.code for d in r.diagnostics}
    rt = _round_trip(r)
    assert "ManagedClustersAgentPool.containerservice.azure.com aks-ml/infer-a100: spec.nodeTaints added" in \
        rt.unexplained


def test_capi_machine_deployment_is_a_capi_pool():
    md = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
          "metadata": {"name": "l40s", "namespace": "ml-onprem", "annotations": {
              "capacity.cluster-autoscaler.kubernetes.io/cpu": "64",
              "capacity.cluster-autoscaler.kubernetes.io/memory": "512Gi",
              "capacity.cluster-autoscaler.kubernetes.io/labels": "cluster-api/accelerator=l40s",
              "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "6",
              "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1"}},
          "spec": {"clusterName": "ml-onprem", "replicas": 1, "selector": {"matchLabels": {}},
                   "template": {"spec": {
                       "clusterName": "ml-onprem", "version": "v1.33.4",
                       "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                                   "kind": "KubeadmConfigTemplate", "name": "l40s"}},
                       "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                             "kind": "Metal3MachineTemplate", "name": "l40s-4u"}}}}}
    # no gpuplan label: the node is the MachineDeployment's by its MachineSet, l40s-<suffix>
    node = _node("l40s-7d9f8-x2k4p", {"cluster-api/accelerator": "l40s", "nvidia.com/gpu.product": "NVIDIA-L40S",
                                      "nvidia.com/gpu.count": "4"},
                 {"cluster.x-k8s.io/cluster-name": "ml-onprem", "cluster.x-k8s.io/owner-kind": "MachineSet",
                  "cluster.x-k8s.io/owner-name": "l40s-7d9f8"})
    r, spec = _run([md, node])
    [pool] = spec["pools"]
    assert pool["name"] == "l40s" and pool["gpu"] == "L40S" and pool["gpusPerNode"] == 4 and "nodes" not in pool
    assert pool["capi"] == {"infrastructureRef": {"kind": "Metal3MachineTemplate", "name": "l40s-4u"},
                            "maxGPUs": 24, "minNodes": 1, "cpu": "64", "memory": "512Gi"}
    assert pool["sharing"] == {"mode": "exclusive"}
    assert spec["cluster"]["capi"] == {"clusterName": "ml-onprem", "version": "v1.33.4", "namespace": "ml-onprem"}
    rt = _round_trip(r)
    # gpuplan names its MachineDeployment gpuplan-<pool>: a new one, its machines made again
    assert "MachineDeployment.cluster.x-k8s.io ml-onprem/l40s: removed (gpuplan does not write it)" in rt.unexplained
    assert "MachineDeployment.cluster.x-k8s.io ml-onprem/gpuplan-l40s: added" in rt.unexplained


def _own_tree(example, kinds):
    """The example's cluster as synced from its golden tree (tests/importer/snapshot.py), with the
    pool objects gpuplan wrote for the platform applied where they go."""
    from pathlib import Path

    from tests.importer.snapshot import REPO, generated_objects, snapshot

    tree = REPO / "tests" / "golden" / example
    snap = snapshot(example + ".yaml", tree)
    snap["items"] += [o for o in generated_objects(tree) if o["kind"] in kinds]
    r = import_cluster(["-"], stdin=dump(snap))
    fleet = yaml.safe_load(Path(REPO / "examples" / (example + ".yaml")).read_text())["spec"]
    return r, yaml.safe_load(r.text)["spec"], {p["name"]: p for p in fleet["pools"]}


def test_gpuplans_own_gke_tree_drafts_its_pools_and_round_trips_clean():
    r, spec, pools = _own_tree("gke", ("ContainerNodePool",))
    for p in spec["pools"]:
        assert p["gke"] == pools[p["name"]]["gke"] and p["gpu"] == pools[p["name"]]["gpu"], p["name"]
        assert p["sharing"] == pools[p["name"]]["sharing"], p["name"]
    assert len(spec["pools"]) == len(pools)
    assert _round_trip(r).unexplained == []


def test_gpuplans_own_aks_tree_drafts_its_pools():
    r, spec, pools = _own_tree("aks", ("ManagedClustersAgentPool",))
    for p in spec["pools"]:
        assert p["aks"] == pools[p["name"]]["aks"] and p["gpu"] == pools[p["name"]]["gpu"], p["name"]
    assert _pool(spec, "train-h100")["topology"]["policy"] == "restricted"  # from kubeletConfig
    assert spec["cluster"]["gpuOperator"]["driver"] == "preinstalled"  # no deploy.driver=false on AKS's driver
    # the tiers' workload is not in the cluster: gpuplan would drop train-h100's training upgradeSettings
    assert _round_trip(r).unexplained == [
        "ManagedClustersAgentPool.containerservice.azure.com aks-ml/train-h100: spec.upgradeSettings removed"]


def test_node_group_labels_and_taints_are_the_pools():
    """A pool object's template labels and taints become the pool's `labels` and `taints` (less
    gpuplan's own: its pool and config labels, its `gpuplan.dev/` taints), so the build writes the
    same template back; without the object, what every Node carries less the platform's own taint
    (GKE's GPU taint) and labels."""
    ap = {"apiVersion": "containerservice.azure.com/v1api20250801", "kind": "ManagedClustersAgentPool",
          "metadata": {"name": "train-h100", "namespace": "aks-ml"},
          "spec": {"owner": {"name": "aks-ml"}, "azureName": "trainh100", "mode": "User", "osType": "Linux",
                   "osSKU": "Ubuntu", "vmSize": "Standard_ND96isr_H100_v5", "count": 2, "enableAutoScaling": False,
                   "nodeLabels": {"team": "research", "gpuplan.dev/pool": "train-h100"},
                   "nodeTaints": ["dedicated=research:NoSchedule", "gpuplan.dev/pool=train-h100:NoSchedule"],
                   "gpuProfile": {"driver": "Install"}}}
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    l4 = [_node(f"gke-l4-{i}", {G + "gke-nodepool": "l4", G + "gke-accelerator": "nvidia-l4", "team": "web",
                                "node.kubernetes.io/instance-type": "g2-standard-8", **({"odd": "1"} if i else {})},
                taints=gpu_taint + [{"key": "serving", "effect": "NoSchedule"}]) for i in range(2)]
    r, spec = _run([ap])
    h100 = _pool(spec, "train-h100")
    assert h100["labels"] == {"team": "research"}
    assert h100["taints"] == [{"key": "dedicated", "value": "research", "effect": "NoSchedule"}]
    rt = _round_trip(r)
    # the template's own labels and taints come back as they were; gpuplan adds its config labels
    template = [u for u in rt.unexplained if "nodeLabels" in u or "nodeTaints" in u]
    assert template and all("nvidia.com/" in u and u.endswith(" added") for u in template), template
    _, spec = _run(l4)
    gke = _pool(spec, "l4")
    assert gke["labels"] == {"team": "web"}  # `odd` is on one node only
    assert gke["taints"] == [{"key": "serving", "effect": "NoSchedule"}]  # GKE's GPU taint is its own
