"""provisioning/aks/: the Azure Service Operator ManagedClustersAgentPool of each AKS pool, checked
against the pinned v1api20250801 schema.

Sources: Azure/azure-service-operator v1api20250801 managed_clusters_agent_pool_types_gen.go
@70edf9f0 (the fields); MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/nvidia-gpu-operator.md:50
(`gpuProfile.driver: None` is `--gpu-driver none`), spot-node-pool.md:40-41 (spot priority, max
price -1, AKS's own spot label and taint), gpu-multi-instance.md:43 (MIG1g ... MIG7g),
custom-node-configuration-reference.md:27,32 (kubeletConfig); Azure/azure-service-operator#3220
(AKS requires `count` at creation)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import Options, compile_fleet

REPO = Path(__file__).parents[2]
AKS = (REPO / "examples" / "aks.yaml").read_text()


def _build(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = compile_fleet(p, out_dir=tmp_path / "out", options=Options(keep_previous=False))
    assert not [d for d in c.diagnostics if d.is_error], [str(d) for d in c.diagnostics if d.is_error]
    return c


def _doc(c, path):
    [doc] = [d for d in yaml.safe_load_all(c.files[path]) if d]
    return doc


def test_agent_pools_of_the_example(tmp_path):
    from gpuplan.identity import template_node_labels

    c = _build(tmp_path, AKS)
    rf = c.resolved
    infer = _doc(c, "provisioning/aks/infer-a100/agentpool.yaml")
    assert infer["apiVersion"] == "containerservice.azure.com/v1api20250801"
    assert infer["metadata"]["namespace"] == "aks-ml"
    s = infer["spec"]
    assert s["owner"] == {"name": "aks-ml"} and s["azureName"] == "infera100" and s["mode"] == "User"
    # 16 GPUs on a 4-GPU VM size: at most 4 VMs, at least 1, AKS needs a count to create the pool
    assert (s["enableAutoScaling"], s["minCount"], s["maxCount"], s["count"]) == (True, 1, 4, 1)
    # two 3g.40gb per A100 80GB is MIG3g (profile id 9 twice, AgentBaker mig-partition.sh)
    assert s["gpuInstanceProfile"] == "MIG3g" and s["gpuProfile"] == {"driver": "Install"}
    assert s["nodeLabels"] == template_node_labels(rf, rf.pool_by_name["infer-a100"])
    assert "gpuplan.dev/pool=infer-a100:NoSchedule" in s["nodeTaints"]
    assert "gpuplan.dev/mig-pool=infer-a100:NoSchedule" in s["nodeTaints"]
    spot = _doc(c, "provisioning/aks/nb-t4/agentpool.yaml")["spec"]
    assert (spot["scaleSetPriority"], spot["scaleSetEvictionPolicy"], spot["spotMaxPrice"]) == ("Spot", "Delete", -1)
    assert "gpuInstanceProfile" not in spot
    # AKS adds its spot taint itself; the template holds gpuplan's taints only
    assert not any(t.startswith("kubernetes.azure.com/") for t in spot["nodeTaints"])
    train = _doc(c, "provisioning/aks/train-h100/agentpool.yaml")["spec"]
    assert train["kubeletConfig"] == {"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted"}
    assert train["availabilityZones"] == ["1", "2"]


def test_agent_pools_stay_out_of_the_cluster_sync(tmp_path):
    c = _build(tmp_path, AKS)
    root = _doc(c, "kustomization.yaml")
    assert not any(r.startswith("provisioning") for r in root["resources"])
    own = _doc(c, "provisioning/aks/kustomization.yaml")
    assert own["resources"] == ["train-h100/agentpool.yaml", "infer-a100/agentpool.yaml", "nb-t4/agentpool.yaml"]


def test_gpu_operator_path_skips_aks_driver_and_mig(tmp_path):
    """`aks.driver: gpu-operator` is `gpuProfile.driver: None`; the operator installs the driver (no
    driver-off label) and its mig-manager partitions: no gpuInstanceProfile."""
    from gpuplan.identity import DRIVER_DEPLOY_LABEL

    text = AKS.replace("        vmSize: Standard_NC96ads_A100_v4\n",
                       "        vmSize: Standard_NC96ads_A100_v4\n        driver: gpu-operator\n")
    text = text.replace("      driver: preinstalled\n      toolkit: preinstalled\n", "      driver: managed\n      toolkit: managed\n")
    c = _build(tmp_path, text)
    s = _doc(c, "provisioning/aks/infer-a100/agentpool.yaml")["spec"]
    assert s["gpuProfile"] == {"driver": "None"} and "gpuInstanceProfile" not in s
    assert DRIVER_DEPLOY_LABEL not in s["nodeLabels"]
    # the pools AKS drives keep the operator's driver off their nodes
    t = _doc(c, "provisioning/aks/train-h100/agentpool.yaml")["spec"]
    assert t["gpuProfile"] == {"driver": "Install"} and t["nodeLabels"][DRIVER_DEPLOY_LABEL] == "false"


def test_fixed_size_pool_is_not_autoscaled(tmp_path):
    c = _build(tmp_path, AKS.replace("        minNodes: 1\n", "        minNodes: 4\n"))
    s = _doc(c, "provisioning/aks/infer-a100/agentpool.yaml")["spec"]
    assert (s["enableAutoScaling"], s["count"]) == (False, 4) and "minCount" not in s and "maxCount" not in s


def test_schema_refuses_what_aso_refuses(tmp_path):
    """The pinned schema closes spec and checks the enums gpuplan writes: an unknown field, a
    gpuInstanceProfile AKS does not have, the lower-case driver value, a bad azureName are refused."""
    from gpuplan.verify.verifier import Options as VOptions
    from gpuplan.verify.verifier import verify_paths

    c = _build(tmp_path, AKS)
    path = "provisioning/aks/infer-a100/agentpool.yaml"
    good = _doc(c, path)
    out = tmp_path / "tree"
    (out / "provisioning/aks/infer-a100").mkdir(parents=True)

    def verify(doc):
        (out / path).write_text(yaml.safe_dump(doc), encoding="utf-8")
        return verify_paths([str(out)], VOptions())

    assert verify(good).ok
    for field, value in (("gpuInstanceProfile", "MIG5g"), ("gpuProfile", {"driver": "none"}),
                         ("azureName", "infer-a100"), ("nodeTaint", ["a=b:NoSchedule"])):
        bad = {**good, "spec": {**good["spec"], field: value}}
        r = verify(bad)
        assert not r.ok, field


def test_read_template_gives_the_proof_the_nodes_labels_and_taints(tmp_path):
    from gpuplan.provisioning.pools import read_template

    c = _build(tmp_path, AKS)
    pool, labels, taints = read_template(_doc(c, "provisioning/aks/infer-a100/agentpool.yaml"))
    assert pool == "infer-a100" and labels["gpuplan.dev/pool"] == "infer-a100"
    assert {"key": "gpuplan.dev/pool", "value": "infer-a100", "effect": "NoSchedule"} in taints


def test_platform_labels_and_taints_of_a_spot_pool(tmp_path):
    """What AKS itself puts on a spot pool's nodes (use-labels.md:181,191,201; spot-node-pool.md:41),
    which the tiers' pods must tolerate: the notebooks contract pod does."""
    from gpuplan.identity import contract_pod
    from gpuplan.provisioning.pools import platform_labels, platform_taints

    c = _build(tmp_path, AKS)
    rf = c.resolved
    pv = rf.pool_by_name["nb-t4"]
    assert platform_labels(pv) == {"kubernetes.azure.com/agentpool": "nbt4", "kubernetes.azure.com/accelerator": "nvidia",
                                   "kubernetes.azure.com/scalesetpriority": "spot"}
    assert platform_taints(pv) == [{"key": "kubernetes.azure.com/scalesetpriority", "value": "spot",
                                    "effect": "NoSchedule"}]
    pod = contract_pod(rf, rf.tier_by_name["notebooks"], "research")
    assert any(t.get("key") == "kubernetes.azure.com/scalesetpriority" for t in pod["spec"]["tolerations"])


def test_changes_aks_keeps_are_hand_steps(tmp_path):
    """resize-node-pool.md:19, spot-node-pool.md:39, gpu-multi-instance.md:46: a new VM size or GPU
    instance profile needs a new agent pool; nvidia-gpu-operator.md:50: the driver setting reaches
    new nodes only; use-labels.md:155: labels change in place."""
    from gpuplan.provisioning.aks import template_changes

    base = _doc(_build(tmp_path, AKS), "provisioning/aks/infer-a100/agentpool.yaml")
    assert template_changes(base, base) == []
    moved = AKS.replace("layout: {3g.40gb: 2}", "layout: {1g.10gb: 7}")
    new = _doc(_build(tmp_path, moved), "provisioning/aks/infer-a100/agentpool.yaml")
    [(sev, msg), (sev2, _)] = template_changes(base, new)
    assert sev == "hand-step" and "gpuInstanceProfile" in msg and "vmSize" not in msg
    assert sev2 == "reconfigure"  # the MIG config label names the new layout
    relabelled = {**base, "spec": {**base["spec"], "nodeLabels": {**base["spec"]["nodeLabels"], "x.example/y": "z"}}}
    assert template_changes(base, relabelled) == [("reconfigure", "AKS updates the nodes' labels and taints in place")]


def test_aksnodeclass_is_verified_with_its_cel_rules(tmp_path):
    """The pinned AKSNodeClass v1beta1 (Azure/karpenter-provider-azure v1.14.2
    pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml): `gpu.mode` is `Driver` or `None` (lines
    996-997; the lower-case `none` of node-auto-provisioning-aksnodeclass.md:385 is refused), and its CEL
    rule refuses FIPS on Ubuntu2204."""
    from gpuplan.verify.verifier import Options as VOptions
    from gpuplan.verify.verifier import verify_paths

    def verify(spec):
        doc = {"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "infer"},
               "spec": spec}
        (tmp_path / "nc.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        return verify_paths([str(tmp_path)], VOptions())

    ok = verify({"imageFamily": "Ubuntu2204", "gpu": {"mode": "None"}})
    assert ok.ok and ok.stats.cel_evaluations > 0
    assert not verify({"imageFamily": "Ubuntu2204", "gpu": {"mode": "none"}}).ok
    fips = verify({"imageFamily": "Ubuntu2204", "fipsMode": "FIPS"})
    assert not fips.ok and any("FIPS" in str(d) for d in fips.diagnostics)


def test_verify_cluster_expects_the_labels_aks_sets(tmp_path):
    """A live spot node of nb-t4 as AKS makes it (use-labels.md:181,191,201; spot-node-pool.md:41)
    is as planned; without AKS's agent-pool label it is drift (GP872 names the label)."""
    import json

    from gpuplan.compiler import planned_quotas
    from gpuplan.drift import parse_live, verify
    from gpuplan.identity import template_node_labels

    c = _build(tmp_path, AKS)
    rf = c.resolved
    pv = rf.pool_by_name["nb-t4"]
    labels = {**template_node_labels(rf, pv), "kubernetes.azure.com/agentpool": "nbt4",
              "kubernetes.azure.com/accelerator": "nvidia", "kubernetes.azure.com/scalesetpriority": "spot"}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "aks-nbt4-12345678-vmss000000", "labels": labels},
            "spec": {"taints": [{"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"},
                                {"key": "gpuplan.dev/pool", "value": "nb-t4", "effect": "NoSchedule"}]},
            "status": {"capacity": {"nvidia.com/gpu": "16"}, "allocatable": {"nvidia.com/gpu": "16"}}}

    def codes(n):
        live = parse_live([("live.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [n]}))])
        return [(d.code, d.message) for d in verify(rf, live, planned_quotas(rf)).diagnostics if d.is_error]

    assert codes(node) == []
    del node["metadata"]["labels"]["kubernetes.azure.com/agentpool"]
    [(code, msg)] = codes(node)
    assert code == "GP872" and "kubernetes.azure.com/agentpool=nbt4" in msg


def test_plan_base_lists_what_aks_does_with_a_changed_agent_pool(tmp_path):
    """`gpuplan plan --base`'s disruption list reads the back-end's template_changes: a new VM size
    is a hand step (AKS resizes by a new pool, resize-node-pool.md:19), not a Karpenter drift."""
    from gpuplan.report.disruption import disruptions

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = _build(tmp_path / "a", AKS).files
    new = _build(tmp_path / "b", AKS.replace("vmSize: Standard_ND96isr_H100_v5", "vmSize: Standard_ND96isr_H200_v5")
                 .replace("gpu: H100-SXM5-80GB", "gpu: H200-SXM-141GB")).files
    found = [(d.severity, d.subject) for d in disruptions(old, new)]
    assert ("hand-step", "ManagedClustersAgentPool train-h100 (pool train-h100)") in found
    assert not [s for s in found if s[1].startswith(("ManagedClustersAgentPool infer", "ManagedClustersAgentPool nb"))]


def test_training_pools_keep_a_node_a_budget_protects_through_upgrades(tmp_path):
    """AKS deletes a node it cannot drain by default; a training or batch pool says `Cordon`, so a
    node whose job a PodDisruptionBudget protects is quarantined and the job runs on. Pools without
    jobs keep AKS's default, and the schema accepts the setting."""
    from gpuplan.verify.verifier import Options as VerifyOptions, Verifier

    c = _build(tmp_path, AKS)
    train = _doc(c, "provisioning/aks/train-h100/agentpool.yaml")
    assert train["spec"]["upgradeSettings"] == {"undrainableNodeBehavior": "Cordon"}
    for other in ("infer-a100", "nb-t4"):
        assert "upgradeSettings" not in _doc(c, f"provisioning/aks/{other}/agentpool.yaml")["spec"]
    readme = c.files["provisioning/aks/README.md"].decode()
    assert "train-h100" in readme.split("## Upgrades under training jobs")[1]
    v = Verifier(VerifyOptions(kubernetes_version="1.33"))
    v.add(train, "agentpool.yaml", lambda p, k: (None, None), None)
    assert not [d for d in v.result().diagnostics if d.is_error]


def test_tenant_pages_tell_training_tenants_what_keeps_their_node(tmp_path):
    """The tenant page of a training tier on an AKS pool says that only a PodDisruptionBudget keeps
    the node through an upgrade; an inference tier's page says nothing of it."""
    c = _build(tmp_path, AKS)
    page = c.files["tenants/vision/README.md"].decode()
    train = page.split("## Tier training")[1].split("\n## ")[0]
    assert "PodDisruptionBudget with `maxUnavailable: 0`" in train
    assert page.count("PodDisruptionBudget with") == 1
