"""Karpenter pools on AKS Node Auto Provisioning: a NodePool whose nodeClassRef is an AKSNodeClass,
both verified against the pinned CRDs (AKSNodeClass v1beta1 with its CEL rules).

Sources: Azure/karpenter-provider-azure@v1.14.2 pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml
(imageFamily enum, osDiskSizeGB 30-2048, kubelet cpuManagerPolicy/topologyManagerPolicy, gpu.mode
Driver|None), pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322 (gpu.mode None: no driver);
MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/node-auto-provisioning-aksnodeclass.md:25
(no imageFamily: AKS's default for the Kubernetes version)."""

from __future__ import annotations

from pathlib import Path

from tests.lower.test_provision_aks import _build, _doc

REPO = Path(__file__).parents[2]
NAP = (REPO / "examples" / "aks-nap.yaml").read_text()


def _verify(tmp_path, c):
    """The tree's objects as written, checked by `gpuplan verify` (pinned schemas + CEL)."""
    from gpuplan.verify.verifier import Options as VOptions
    from gpuplan.verify.verifier import verify_paths

    out = tmp_path / "tree"
    for path, text in c.files.items():
        if path.endswith(".yaml"):
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_bytes(text)
    return verify_paths([str(out)], VOptions())


def test_nap_pool_lowers_to_nodepool_and_aksnodeclass(tmp_path):
    c = _build(tmp_path, NAP)
    assert not [p for p in c.files if p.endswith("ec2nodeclass.yaml")]
    np = _doc(c, "pools/batch-a100/nodepool.yaml")
    tmpl = np["spec"]["template"]["spec"]
    assert tmpl["nodeClassRef"] == {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "batch-a100"}
    reqs = {r["key"]: r["values"] for r in tmpl["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ["Standard_NC24ads_A100_v4"]
    assert reqs["karpenter.sh/capacity-type"] == ["spot"]
    assert not [k for k in reqs if k.startswith("karpenter.k8s.aws/")]
    assert np["spec"]["limits"] == {"nodes": "16", "nvidia.com/gpu": "16"}  # 16 GPUs / 1 A100 per Standard_NC24ads_A100_v4
    nc = _doc(c, "pools/batch-a100/aksnodeclass.yaml")
    assert nc["apiVersion"] == "karpenter.azure.com/v1beta1"
    assert nc["spec"] == {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 200}  # AKS's driver: no gpu field
    assert _doc(c, "pools/serve-h100/aksnodeclass.yaml")["spec"]["imageFamily"] == "AzureLinux"
    r = _verify(tmp_path, c)
    assert r.ok, [str(d) for d in r.diagnostics]
    assert r.stats.cel_evaluations > 0


def test_gpu_operator_path_and_kubelet_topology(tmp_path):
    text = NAP.replace("      driver: preinstalled\n      toolkit: preinstalled\n",
                       "      driver: managed\n      toolkit: managed\n")
    text = text.replace("        imageFamily: Ubuntu2204\n", "        driver: gpu-operator\n")
    text = text.replace("        imageFamily: AzureLinux\n", "        imageFamily: AzureLinux\n        driver: gpu-operator\n")
    text = text.replace("      pricePerGPUHour: 6.98\n", "      topology: {policy: single-numa-node}\n      pricePerGPUHour: 6.98\n")
    c = _build(tmp_path, text)
    batch = _doc(c, "pools/batch-a100/aksnodeclass.yaml")["spec"]
    assert batch == {"osDiskSizeGB": 200, "gpu": {"mode": "None"}}  # no imageFamily: AKS's default
    serve = _doc(c, "pools/serve-h100/aksnodeclass.yaml")["spec"]
    assert serve["kubelet"] == {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}
    assert c.resolved.toolkit == "managed"
    assert _verify(tmp_path, c).ok


def test_aws_output_is_unchanged_by_the_cloud_switch(tmp_path):
    """A cluster with cluster.aws keeps its EC2NodeClass and AWS requirements (and no AKSNodeClass)."""
    c = _build(tmp_path, (REPO / "examples" / "fleet.yaml").read_text())
    assert not [p for p in c.files if p.endswith("aksnodeclass.yaml")]
    [path] = [p for p in c.files if p.endswith("nodepool.yaml")][:1]
    ref = _doc(c, path)["spec"]["template"]["spec"]["nodeClassRef"]
    assert ref["group"] == "karpenter.k8s.aws" and ref["kind"] == "EC2NodeClass"


def test_plan_base_says_an_aksnodeclass_change_drifts_its_pool(tmp_path):
    """Karpenter on Azure hashes the whole AKSNodeClass spec but its tags and drifts every NodeClaim
    whose hash differs (karpenter-provider-azure v1.14.2 pkg/apis/v1beta1/aksnodeclass.go:95,697-698;
    pkg/cloudprovider/drift.go:90-111): `plan --base` names the NodePool's nodes as replaced."""
    from gpuplan.report.disruption import by_pool, disruptions

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = _build(tmp_path / "a", NAP).files
    new = _build(tmp_path / "b", NAP.replace("imageFamily: Ubuntu2204", "imageFamily: AzureLinux", 1)).files
    ds = disruptions(old, new)
    [d] = [d for d in ds if d.subject.startswith("AKSNodeClass ")]
    assert (d.severity, d.subject) == ("replace", "AKSNodeClass batch-a100") and "imageFamily" in d.message
    assert any(row.startswith("pool batch-a100: every node replaced") for row in by_pool(ds))
    assert not [d for d in disruptions(old, old) if d.subject.startswith("AKSNodeClass ")]
