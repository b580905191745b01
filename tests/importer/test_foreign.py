"""`gpuplan import` on clusters gpuplan did not write: Karpenter NodePools that select instance
types by family, size, category or GPU (kubernetes-sigs/karpenter@v1.14.1 NodePool v1 shape, the
AWS provider's labels, aws/karpenter-provider-aws@v1.14.1 pkg/apis/v1/labels.go:143-166), and GPU
Feature Discovery labels under MIG single/mixed, a faulty MIG state and time-slicing
(NVIDIA/k8s-device-plugin@v0.20.0 internal/lm/; gpuplan/importer/gfd.py names the lines)."""

from __future__ import annotations

import yaml

from gpuplan.cloud.karpenter_requirements import select
from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import dump

K = "karpenter.k8s.aws/"


def _run(items):
    r = import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert r.text is not None, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def _codes(r):
    return {d.code for d in r.diagnostics}


def _nodepool(name, requirements, limit="4"):
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name, "generation": 1},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                "requirements": requirements + [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                 "values": ["on-demand"]}],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
                "limits": {"nodes": limit},
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m",
                               "budgets": [{"nodes": "1"}]}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "gpu"},
             "spec": {"amiSelectorTerms": [{"alias": "al2023@v20250505"}], "role": "KarpenterNodeRole-prod",
                      "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}],
                      "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "prod"}}]}}


def _node(name, labels):
    lb = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true",
          "nvidia.com/mig.capable": "true", **labels}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lb},
            "spec": {}, "status": {"nodeInfo": {"kubeletVersion": "v1.33.2"}}}


def _launched(name, nodepool, instance_type, product, count):
    # what Karpenter's AWS provider and GFD label a node it launched with
    it = select([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}]).types
    assert it == [instance_type]
    return _node(name, {"karpenter.sh/nodepool": nodepool, "node.kubernetes.io/instance-type": instance_type,
                        K + "instance-family": instance_type.split(".")[0], "nvidia.com/gpu.product": product,
                        "nvidia.com/gpu.count": count, "nvidia.com/gpu.replicas": "1",
                        "nvidia.com/gpu.sharing-strategy": "none"})


def _pool(spec, name):
    return next(p for p in spec["pools"] if p["name"] == name)


# --- Karpenter requirements ------------------------------------------------------------------


def test_nodepool_by_family_and_size_is_a_karpenter_pool():
    np_ = _nodepool("l40s", [{"key": K + "instance-family", "operator": "In", "values": ["g6e"]},
                             {"key": K + "instance-size", "operator": "In", "values": ["12xlarge", "24xlarge"]}])
    r, spec = _run([np_, NODECLASS, _launched("ip-10-0-0-1.ec2.internal", "l40s", "g6e.12xlarge", "NVIDIA-L40S", "4")])
    assert "GP950" not in _codes(r)
    [pool] = spec["pools"]  # the launched node is the NodePool's, not a static pool's
    assert pool["name"] == "l40s" and pool["gpu"] == "L40S" and "nodes" not in pool
    assert pool["karpenter"]["instanceTypes"] == ["g6e.12xlarge", "g6e.24xlarge"]
    assert pool["karpenter"]["maxGPUs"] == 16  # 4 nodes x 4 GPUs
    rt = r.round_trip
    assert rt.built and rt.conventions.get("instance-selector") == 1
    assert not [u for u in rt.unexplained if "requirements" in u], rt.unexplained


def test_nodepool_by_category_manufacturer_and_gpu_count():
    np_ = _nodepool("h100", [
        {"key": K + "instance-category", "operator": "In", "values": ["p", "g"]},
        {"key": K + "instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
        {"key": K + "instance-gpu-name", "operator": "In", "values": ["h100"]},
        {"key": K + "instance-gpu-count", "operator": "Gt", "values": ["4"]},
        {"key": K + "instance-generation", "operator": "Exists"}])
    r, spec = _run([np_, NODECLASS])
    assert "GP950" not in _codes(r)
    [pool] = spec["pools"]
    assert pool["gpu"] == "H100-SXM5-80GB" and pool["karpenter"]["instanceTypes"] == ["p5.48xlarge"]
    assert r.round_trip.built and r.round_trip.conventions.get("instance-selector") == 1


def test_nodepool_of_several_gpu_models_keeps_the_running_one_and_says_so():
    np_ = _nodepool("big", [{"key": K + "instance-family", "operator": "In", "values": ["p5", "p4d"]},
                            {"key": K + "instance-size", "operator": "In", "values": ["48xlarge", "24xlarge"]}])
    node = _launched("ip-10-0-0-9.ec2.internal", "big", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", "8")
    r, spec = _run([np_, NODECLASS, node])
    [pool] = spec["pools"]
    assert pool["gpu"] == "H100-SXM5-80GB" and pool["karpenter"]["instanceTypes"] == ["p5.48xlarge"]
    assert any(d.code == "GP958" and "A100-SXM4-40GB" in d.message for d in r.diagnostics)
    # the set gpuplan writes is smaller: Karpenter would no longer launch p4d.24xlarge (drift)
    drift = [d for d in r.diagnostics if d.code == "GP966" and "requirements" in d.message]
    assert drift and "p4d.24xlarge" in drift[0].message and drift[0].line


def test_a_changed_set_is_a_drift_difference():
    """The cluster's selector admits g6e.48xlarge too (8 GPUs beside the 4 of g6e.12xlarge and
    24xlarge): a gpuplan pool has one GPU count per node (GP612), so the draft keeps the count with
    most instance types, says so, still builds, and the round trip names the type it drops."""
    np_ = _nodepool("l40s", [{"key": K + "instance-family", "operator": "In", "values": ["g6e"]},
                             {"key": K + "instance-gpu-count", "operator": "Gt", "values": ["2"]}])
    r, spec = _run([np_, NODECLASS])
    its = _pool(spec, "l40s")["karpenter"]["instanceTypes"]
    assert its == ["g6e.12xlarge", "g6e.24xlarge"]
    [todo] = [d for d in r.diagnostics if d.code == "GP958" and "GPUs" in d.message and "count" in d.message]
    assert "4, 8" in todo.message and todo.line
    assert r.round_trip.built
    drift = [d for d in r.diagnostics if d.code == "GP966" and "requirements" in d.message]
    assert drift and "no longer launches g6e.48" in drift[0].message


def test_requirement_operators_follow_karpenter():
    h100 = {"key": K + "instance-gpu-name", "operator": "In", "values": ["h100"]}
    assert select([h100, {"key": K + "instance-gpu-count", "operator": "Lt", "values": ["2"]}]).types == ["p5.4xlarge"]
    assert select([h100, {"key": K + "instance-size", "operator": "NotIn", "values": ["4xlarge"]}]).types == \
        ["p5.48xlarge"]
    # a bound never admits a value that is not an integer (requirement.go:334-350)
    assert select([h100, {"key": K + "instance-size", "operator": "Gt", "values": ["1"]}]).types == []
    # DoesNotExist fits only instance types that leave the label unset
    assert select([h100, {"key": K + "instance-accelerator-name", "operator": "DoesNotExist"}]).types == \
        ["p5.48xlarge", "p5.4xlarge"]
    unnamed = select([{"key": K + "instance-gpu-name", "operator": "DoesNotExist"}]).types
    assert unnamed and not {"p5.48xlarge", "p5.4xlarge"} & set(unnamed)
    # two requirements on one key intersect; beta keys are normalised
    assert select([{"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge", "p4d.24xlarge"]},
                   {"key": K + "instance-family", "operator": "In", "values": ["p4d", "p5"]},
                   {"key": K + "instance-family", "operator": "NotIn", "values": ["p4d"]}]).types == ["p5.48xlarge"]
    # minValues: one family cannot give two distinct families
    sel = select([h100, {"key": K + "instance-family", "operator": "In", "values": ["p5"], "minValues": 2}])
    assert sel.unmet_min_values == {K + "instance-family": (2, 1)}
    # a key gpuplan's table does not hold is reported, not guessed
    assert select([h100, {"key": K + "instance-hypervisor", "operator": "In", "values": ["nitro"]}]).unread == \
        [K + "instance-hypervisor"]


# --- GPU Feature Discovery labels ------------------------------------------------------------

MIG_PARTED = "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n" \
             "  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n"


def _gfd(name, product, count, strategy=None, **extra):
    lb = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": count, "nvidia.com/gpu.replicas": "1",
          "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.memory": "9856"}
    if strategy:
        lb["nvidia.com/mig.strategy"] = strategy
    lb.update(extra)
    return _node(name, lb)


def test_mig_single_counts_gpus_not_mig_devices():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "default-mig-parted-config",
                                                                  "namespace": "gpu-operator"},
          "data": {"config.yaml": MIG_PARTED}}
    node = _gfd("gpu-1", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "56", "single",
                **{"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"})
    r, spec = _run([cm, node])
    [pool] = spec["pools"]
    assert pool["gpu"] == "A100-SXM4-80GB" and pool["gpusPerNode"] == 8
    assert pool["sharing"] == {"mode": "mig", "strategy": "single", "layout": {"1g.10gb": 7}}
    assert r.round_trip.built


def test_mig_single_without_a_config_reads_the_layout_from_the_labels():
    r, spec = _run([_gfd("gpu-1", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "16", "single")])
    [pool] = spec["pools"]
    assert pool["gpusPerNode"] == 8  # 16 devices, 2 per GPU (3g.40gb's most)
    assert pool["sharing"] == {"mode": "mig", "strategy": "single", "layout": {"3g.40gb": 2}}
    assert "check the GPUs per node" in r.text
    assert r.round_trip.built


def test_mig_mixed_labels():
    node = _gfd("gpu-1", "NVIDIA-A100-SXM4-80GB", "8", "mixed",
                **{"nvidia.com/mig-3g.40gb.count": "8", "nvidia.com/mig-1g.10gb.count": "8",
                   "nvidia.com/mig-3g.40gb.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"})
    r, spec = _run([node])
    [pool] = spec["pools"]
    assert pool["gpusPerNode"] == 8
    assert pool["sharing"] == {"mode": "mig", "strategy": "mixed", "layout": {"1g.10gb": 1, "3g.40gb": 1}}
    assert r.round_trip.built


def test_mig_invalid_is_a_finding_not_capacity():
    bad = _gfd("gpu-2", "NVIDIA-A100-SXM4-80GB-MIG-INVALID", "0", "single",
               **{"nvidia.com/gpu.replicas": "0", "nvidia.com/gpu.memory": "0"})
    r, spec = _run([_gfd("gpu-1", "NVIDIA-A100-SXM4-80GB", "8", "single"), bad])
    [fault] = [d for d in r.diagnostics if d.code == "GP940"]
    assert "gpu-2" in fault.message and fault.line is not None
    [pool] = spec["pools"]
    assert pool["nodes"] == ["gpu-1"] and pool["gpusPerNode"] == 8
    assert "GP957" not in _codes(r)  # the faulty node's 0 GPUs do not make the pool disagree


def test_time_slicing_shared_product_and_replicas():
    node = _gfd("l4-1", "NVIDIA-L4-SHARED", "4", None,
                **{"nvidia.com/gpu.replicas": "8", "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    r, spec = _run([node])
    [pool] = spec["pools"]
    assert pool["gpu"] == "L4" and pool["gpusPerNode"] == 4
    assert pool["sharing"] == {"mode": "time-slicing", "replicas": 8, "renameByDefault": False,
                               "failRequestsGreaterThanOne": False}
    assert r.round_trip.built


def test_mig_single_on_an_instance_type_counts_its_gpus():
    # one 3g.40gb per GPU: 8 MIG devices on 8 GPUs (not 8 / 2, the profile's most per GPU)
    node = _gfd("ip-10-0-1-1.ec2.internal", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "8", "single",
                **{"node.kubernetes.io/instance-type": "p4de.24xlarge"})
    r, spec = _run([node])
    [pool] = spec["pools"]
    assert pool["gpusPerNode"] == 8
    assert pool["sharing"]["layout"] == {"3g.40gb": 1}
    assert "check the GPUs per node" not in r.text


def test_nodes_of_a_nodepool_left_out_are_not_a_static_pool():
    unknown = _nodepool("future", [{"key": K + "instance-family", "operator": "In", "values": ["p9"]}])
    node = _launched("ip-10-0-0-5.ec2.internal", "future", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", "8")
    r, spec = _run([unknown, NODECLASS, node, _gfd("gpu-1", "NVIDIA-L4", "4")])
    assert any(d.code == "GP952" and "future" in d.message for d in r.diagnostics)
    assert [p.get("nodes") for p in spec["pools"]] == [["gpu-1"]]


def test_a_cpu_nodepool_is_left_as_it_is_not_an_unknown_gpu():
    """A NodePool for the cluster's CPU capacity (instance-category c, m, r: no GPU key, family,
    limit or taint) is GP944 (info), not GP952 "GPU model unknown"; one that asks for a GPU the
    table lacks (a GPU name, or a family of the GPU categories) is still GP952."""
    cpu = _nodepool("general", [{"key": K + "instance-category", "operator": "In", "values": ["c", "m", "r"]},
                                {"key": K + "instance-generation", "operator": "Gt", "values": ["5"]}])
    del cpu["spec"]["template"]["spec"]["taints"]
    named = _nodepool("mystery", [{"key": K + "instance-gpu-name", "operator": "In", "values": ["x900"]}])
    del named["spec"]["template"]["spec"]["taints"]
    gpu = _nodepool("gpu", [{"key": K + "instance-family", "operator": "In", "values": ["p4d"]}])
    node = _launched("n1", "gpu", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", "8")
    r, spec = _run([gpu, cpu, named, NODECLASS, node])
    by = {(d.code, d.message.split()[1].rstrip(":")) for d in r.diagnostics if d.code in ("GP944", "GP952")}
    assert by == {("GP944", "general"), ("GP952", "mystery")}
    [info] = [d for d in r.diagnostics if d.code == "GP944"]
    assert info.severity.value == "info" and info.line is not None
    assert [p["name"] for p in spec["pools"]] == ["gpu"]
    assert not [d for d in r.diagnostics if d.code in ("GP959", "GP966") and "general" in d.message]


def test_nodes_whose_gfd_labels_disagree_on_mig_are_not_one_pool():
    """Without a pool label, a `mixed` node beside `single` ones of the same model and GPU count runs
    another device-plugin config: its own pool, not a member drafted with the others' layout. With
    a pool label that joins them, the disagreement is a GP957."""
    single = [_gfd(f"a100-{i}", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "16", "single") for i in range(2)]
    mixed = _gfd("a100-m", "NVIDIA-A100-SXM4-80GB", "8", "mixed",
                 **{"nvidia.com/mig-3g.40gb.count": "8", "nvidia.com/mig-1g.10gb.count": "8"})
    r, spec = _run([*single, mixed])
    by_nodes = {tuple(p["nodes"]): p["sharing"] for p in spec["pools"]}
    assert by_nodes == {("a100-0", "a100-1"): {"mode": "mig", "strategy": "single", "layout": {"3g.40gb": 2}},
                        ("a100-m",): {"mode": "mig", "strategy": "mixed", "layout": {"1g.10gb": 1, "3g.40gb": 1}}}
    for n in (*single, mixed):
        n["metadata"]["labels"]["gpuplan.dev/pool"] = "a100"
    r, spec = _run([*single, mixed])
    [odd] = [d for d in r.diagnostics if d.code == "GP957"]
    assert "a100-m" in odd.message and odd.line
