"""`gpuplan import` of AKS Node Auto Provisioning (Karpenter on Azure): NodePools whose
`nodeClassRef` is a `karpenter.azure.com` AKSNodeClass, their requirements evaluated over
gpuplan's AKS VM-size table with the labels Azure/karpenter-provider-azure@v1.14.2 sets
(pkg/providers/instancetype/instancetype.go:205-262: sku-name, sku-family, sku-series,
sku-version, sku-gpu-name/-manufacturer/-count; VM sizes parsed as github.com/Azure/skewer@v0.0.24
vmsize.go does), and the AKSNodeClass's imageFamily and GPU mode."""

from __future__ import annotations

import yaml

from gpuplan.cloud.aks import vm_labels
from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import REPO, dump, generated_objects, snapshot
from tests.importer.test_platform_import import _node

NAP = "karpenter.azure.com/"


def _with_node(items, nodepool, size):
    n = _node(f"aks-{nodepool}-x1", {"karpenter.sh/nodepool": nodepool, "node.kubernetes.io/instance-type": size,
                                     "kubernetes.azure.com/accelerator": "nvidia"})
    n["status"]["nodeInfo"]["kubeletVersion"] = "v1.36.1"
    return [*items, n]


def _import(items):
    r = import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert r.text is not None, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def test_vm_size_labels_as_the_provider_sets_them():
    lb = vm_labels("Standard_NC24ads_A100_v4")
    assert (lb[NAP + "sku-family"], lb[NAP + "sku-series"], lb[NAP + "sku-version"]) == ("N", "NCads_v4", "4")
    assert (lb[NAP + "sku-gpu-name"], lb[NAP + "sku-gpu-count"], lb[NAP + "sku-cpu"]) == ("A100", "1", "24")
    assert vm_labels("Standard_ND96asr_v4")[NAP + "sku-gpu-name"] is None  # no accelerator in the name


def test_gpuplans_own_nap_tree_imports_to_its_pools_and_round_trips_clean():
    tree = REPO / "tests" / "golden" / "aks-nap"
    snap = snapshot("aks-nap.yaml", tree)
    snap["items"] += [o for o in generated_objects(tree) if o["kind"] == "AKSNodeClass"]
    r, spec = _import(_with_node(snap["items"], "batch-a100", "Standard_NC24ads_A100_v4"))
    want = {p["name"]: p for p in yaml.safe_load((REPO / "examples/aks-nap.yaml").read_text())["spec"]["pools"]}
    got = {p["name"]: p for p in spec["pools"]}
    assert set(got) == set(want)
    for name, p in got.items():
        assert p["gpu"] == want[name]["gpu"]
        for key in ("instanceTypes", "maxGPUs", "imageFamily"):
            assert p["karpenter"][key] == want[name]["karpenter"][key], (name, key)
    assert "aws" not in spec["cluster"] and "azure" in spec["cluster"]
    rt = r.round_trip
    assert rt.built and rt.unexplained == []


def _nap_nodepool(name, requirements):
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "gpu"},
                "requirements": requirements,
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
                "limits": {"nodes": "2"}}}


NODECLASS = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "gpu"},
             "spec": {"imageFamily": "Ubuntu2204", "gpu": {"mode": "None"}}}


def test_nap_nodepool_by_sku_family_and_gpu_name():
    by_sku = _nap_nodepool("a100", [
        {"key": NAP + "sku-family", "operator": "In", "values": ["N"]},
        {"key": NAP + "sku-gpu-name", "operator": "In", "values": ["A100"]},
        {"key": NAP + "sku-gpu-count", "operator": "Gt", "values": ["1"]},
        {"key": NAP + "sku-series", "operator": "In", "values": ["NCads_v4"]}])
    cpu = _nap_nodepool("general", [{"key": NAP + "sku-family", "operator": "In", "values": ["D"]}])
    del cpu["spec"]["template"]["spec"]["taints"]
    r, spec = _import(_with_node([by_sku, cpu, NODECLASS], "a100", "Standard_NC48ads_A100_v4"))
    [pool] = spec["pools"]
    assert pool["gpu"] == "A100-PCIE-80GB"
    # NC48ads (2 GPUs) and NC96ads (4) both match: one GPU count per pool, said so
    assert pool["karpenter"]["instanceTypes"] in (["Standard_NC48ads_A100_v4"], ["Standard_NC96ads_A100_v4"])
    assert any(d.code == "GP958" and "count per node" in d.message for d in r.diagnostics)
    assert pool["karpenter"]["imageFamily"] == "Ubuntu2204" and pool["karpenter"]["driver"] == "gpu-operator"
    assert {(d.code, "general" in d.message) for d in r.diagnostics if d.code in ("GP944", "GP952")} == \
        {("GP944", True)}
