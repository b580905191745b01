"""`gpuplan import` on one export that mixes the shapes real clusters hold, each written by the
tests of its own reader from the upstream formats (their docstrings cite the upstream lines):

* Karpenter NodePools selecting by instance family x size and by category + GPU manufacturer,
  name and count (tests/importer/test_foreign.py), a Bottlerocket NodePool time-sliced in its TOML
  userData with a NodeOverlay stating its shared units, a price-only NodeOverlay and a CPU NodePool
  (tests/importer/test_sharing_import.py);
* static nodes labelled by GPU Feature Discovery under MIG `single`, `mixed` and `-MIG-INVALID`;
* NVIDIA's device plugin deployed by its own Helm chart, without the GPU Operator
  (tests/importer/test_platform_import.py);
* GKE node pools on GKE's own GPU stack, with and without their Config Connector objects, and
  Kueue's single-ClusterQueue setup on them (tests/importer/test_kueue_import.py).

The draft must validate and build, every fault the cluster shows is a finding (not capacity), and
the round trip lists every difference that changes what the cluster does, each with its line,
counted in the summary."""

from __future__ import annotations

import yaml

from gpuplan.importer.pipeline import import_cluster
from tests.importer import test_platform_import as PL
from tests.importer.snapshot import dump
from tests.importer.test_foreign import NODECLASS, K, _gfd, _launched, _nodepool
from tests.importer.test_kueue_import import DEFAULT_FLAVOR, _local, _ns, _queue
from tests.importer.test_sharing_import import G6E, TIME_SLICED, _bottlerocket, _on, _overlay


def _import(items):
    r = import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert r.text is not None, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def _aws_cluster():
    by_family = _nodepool("train-p5", [{"key": K + "instance-family", "operator": "In", "values": ["p5"]},
                                       {"key": K + "instance-size", "operator": "In", "values": ["48xlarge"]}])
    by_category = _nodepool("infer-l40s", [
        {"key": K + "instance-category", "operator": "In", "values": ["g"]},
        {"key": K + "instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
        {"key": K + "instance-gpu-name", "operator": "In", "values": ["l40s"]},
        {"key": K + "instance-gpu-count", "operator": "Gt", "values": ["3"]}])
    notebooks = _on(_nodepool("nb-l40s", G6E, limit="2"), nodeclass="br")
    cpu = _nodepool("general", [{"key": K + "instance-category", "operator": "In", "values": ["c", "m"]}])
    del cpu["spec"]["template"]["spec"]["taints"]
    shared = _overlay("l40s-shared", [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["nb-l40s"]}],
                      {"nvidia.com/gpu.shared": "16"})
    price = _overlay("p5-discount", [{"key": K + "instance-family", "operator": "In", "values": ["p5"]}],
                     price="90.0")
    single = [_gfd(f"a100-{i}", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "16", "single") for i in range(2)]
    mixed = _gfd("a100-m", "NVIDIA-A100-SXM4-80GB", "8", "mixed",
                 **{"nvidia.com/mig-3g.40gb.count": "8", "nvidia.com/mig-1g.10gb.count": "8"})
    invalid = _gfd("a100-bad", "NVIDIA-A100-SXM4-80GB-MIG-INVALID", "0", "single",
                   **{"nvidia.com/gpu.replicas": "0"})
    configs, plugin = PL._device_plugin_chart()
    plugin["spec"]["template"]["spec"]["initContainers"][0]["env"][1]["value"] = "exclusive"
    return [NODECLASS, by_family, by_category, notebooks, _bottlerocket("br", TIME_SLICED), cpu, shared, price,
            _launched("ip-10-0-0-1.ec2.internal", "train-p5", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", "8"),
            *single, mixed, invalid, configs, plugin]


def _pools(spec):
    return {p["name"]: p for p in spec["pools"]}


def _counted(rt):
    """The summary's count of unexplained differences is the length of the list it heads."""
    line = next(ln for ln in rt.summary_lines() if "unexplained differences" in ln)
    return int(line.split(": ")[1].split()[0])


def test_a_mixed_aws_cluster_drafts_builds_and_lists_every_behaviour_change():
    r, spec = _import(_aws_cluster())
    pools = _pools(spec)
    # Karpenter by family x size and by category + GPU name/count (one GPU count kept, said so)
    assert pools["train-p5"]["karpenter"]["instanceTypes"] == ["p5.48xlarge"]
    assert pools["infer-l40s"]["gpu"] == "L40S"
    assert pools["infer-l40s"]["karpenter"]["instanceTypes"] == ["g6e.12xlarge", "g6e.24xlarge"]
    # Bottlerocket time-slicing from the userData, its NodeOverlay's shared units agreeing
    assert pools["nb-l40s"]["sharing"]["mode"] == "time-slicing" and pools["nb-l40s"]["sharing"]["replicas"] == 4
    assert pools["nb-l40s"]["karpenter"]["amiFamily"] == "Bottlerocket"
    # GFD: single and mixed nodes are two pools of physical GPUs; the invalid node is no capacity
    static = {tuple(p["nodes"]): p for p in spec["pools"] if "nodes" in p}
    assert set(static) == {("a100-0", "a100-1"), ("a100-m",)}
    assert all(p["gpusPerNode"] == 8 for p in static.values())
    assert static[("a100-0", "a100-1")]["sharing"]["strategy"] == "single"
    assert static[("a100-m",)]["sharing"]["strategy"] == "mixed"
    assert "general" not in pools  # the CPU NodePool is left as it is
    codes = {d.code for d in r.diagnostics}
    assert {"GP940", "GP943", "GP944"} <= codes and "GP961" not in codes
    [fault] = [d for d in r.diagnostics if d.code == "GP940"]
    assert "a100-bad" in fault.message and fault.line
    rt = r.round_trip
    assert rt.built and rt.files  # the draft passes validate and builds
    # every behaviour change is listed, each with its line, and the summary counts them all
    assert rt.unexplained and _counted(rt) == len(rt.unexplained) == len(rt.codes) == len(rt.where)
    assert all(w is not None and w[1] for w in rt.where), [u for u, w in zip(rt.unexplained, rt.where) if not w]
    listed = "\n".join(rt.unexplained)
    for change in ("DaemonSet.apps kube-system/nvdp-nvidia-device-plugin: removed",  # the plugin gpuplan replaces
                   "NodeOverlay.karpenter.sh p5-discount: removed",  # a price gpuplan does not write
                   "NodePool.karpenter.sh infer-l40s: spec.template.spec.requirements select other instance types",
                   "Node a100-0: taint gpuplan.dev/pool:NoSchedule added"):
        assert change in listed, change
    by_code = {c.code for c in rt.codes}
    assert {"GP943", "GP966", "GP967", "GP959"} <= by_code


def test_a_gke_cluster_on_gkes_own_stack_drafts_builds_and_lists_every_behaviour_change():
    gpu_taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    g = PL.G
    nodes = [PL._node(f"gke-ml-l4-{i}", {g + "gke-nodepool": "notebooks", g + "gke-accelerator": "nvidia-l4",
                                         g + "gke-gpu-sharing-strategy": "time-sharing",
                                         g + "gke-max-shared-clients-per-gpu": "4",
                                         "node.kubernetes.io/instance-type": "g2-standard-8", "team": "web"},
                      taints=gpu_taint) for i in range(2)]
    mig = PL._node("gke-ml-a100-0", {g + "gke-nodepool": "infer-a100", g + "gke-accelerator": "nvidia-a100-80gb",
                                     g + "gke-gpu-partition-size": "3g.40gb",
                                     "node.kubernetes.io/instance-type": "a2-ultragpu-1g"}, taints=gpu_taint)
    cnp = {"apiVersion": "container.cnrm.cloud.google.com/v1beta1", "kind": "ContainerNodePool",
           "metadata": {"name": "infer-a100", "namespace": "config-control",
                        "annotations": {"cnrm.cloud.google.com/project-id": "ml-platform-prod"}},
           "spec": {"location": "us-central1",
                    "clusterRef": {"external": "projects/ml-platform-prod/locations/us-central1/clusters/ml-gke"},
                    "autoscaling": {"totalMinNodeCount": 1, "totalMaxNodeCount": 4},
                    "nodeConfig": {"machineType": "a2-ultragpu-1g", "imageType": "COS_CONTAINERD",
                                   "labels": {"team": "inference"},
                                   "taint": [{"key": "dedicated", "value": "inference", "effect": "NO_SCHEDULE"}],
                                   "guestAccelerator": [{"type": "nvidia-a100-80gb", "count": 1,
                                                         "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"},
                                                         "gpuPartitionSize": "3g.40gb"}]}}}
    queue = _queue("cluster-queue", [{"name": "default-flavor", "resources": [
        {"name": "cpu", "nominalQuota": 64}, {"name": "nvidia.com/gpu", "nominalQuota": 8}]}])
    teams = [o for t in ("team-a", "team-b") for o in (_ns(t), _local(t, "cluster-queue"))]
    r, spec = _import([*nodes, mig, cnp, DEFAULT_FLAVOR, queue, *teams])
    pools = _pools(spec)
    # the shared queue's 8 GPUs split between the two teams, on a pool that advertises nvidia.com/gpu
    grants = {t["name"]: sum(sum(q.values()) for q in t["quotas"].values()) for t in spec["tenants"]}
    assert grants == {"team-a": 4, "team-b": 4}
    assert {d.code for d in r.diagnostics} >= {"GP958", "GP963"}  # the split, and the cpu quota named
    assert pools["notebooks"]["gke"]["machineType"] == "g2-standard-8" and "nodes" not in pools["notebooks"]
    assert pools["notebooks"]["sharing"] == {"mode": "time-slicing", "replicas": 4}
    assert pools["notebooks"]["labels"] == {"team": "web"} and "taints" not in pools["notebooks"]
    assert pools["infer-a100"]["sharing"] == {"mode": "mig", "layout": {"3g.40gb": 2}}
    assert pools["infer-a100"]["labels"] == {"team": "inference"}
    assert pools["infer-a100"]["taints"] == [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
    rt = r.round_trip
    assert rt.built and rt.files
    assert _counted(rt) == len(rt.unexplained) == len(rt.where)
    listed = "\n".join(rt.unexplained)
    # the node pool gpuplan did not see as an object is one it would create; the seen one gains
    # gpuplan's pool label (immutable nodeConfig.labels: Config Connector recreates the pool)
    assert "ContainerNodePool.container.cnrm.cloud.google.com config-control/notebooks: added" in listed
    assert "config-control/infer-a100: spec.nodeConfig.labels" in listed
    assert "spec.nodeConfig.taint[key=gpuplan.dev/pool] added" in listed  # gpuplan's binding taint
    assert "key=dedicated" not in listed and '"team"' not in listed  # its own labels and taint come back
    assert "ClusterQueue.kueue.x-k8s.io cluster-queue: removed" in listed
