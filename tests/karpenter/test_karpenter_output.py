"""Karpenter output: NodePool, EC2NodeClass, NodeOverlay and the MIG startup-taint
remover, validated against the strict upstream schemas pinned in
gpuplan/upstream (Karpenter v1.14.1) and every CEL rule those schemas carry,
evaluated by gpuplan.verify with a real CEL engine; userData parsed as the
node would parse it."""

from __future__ import annotations

import copy
import email
import json
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuplan.compiler import compile_fleet
from gpuplan.upstream import crd_schema
from gpuplan.verify import Verifier

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = {
    "NodePool": ("karpenter.sh", "v1"),
    "EC2NodeClass": ("karpenter.k8s.aws", "v1"),
    "NodeOverlay": ("karpenter.sh", "v1alpha1"),
}
EXAMPLES = [REPO / "examples" / "fleet.yaml", REPO / "examples" / "aws-burst.yaml"]


def _schema(kind: str) -> dict:
    group, version = SCHEMAS[kind]
    schema = crd_schema(group, kind, version)
    assert schema is not None, f"{kind}: not pinned in gpuplan/upstream"
    return schema


def build(path: Path) -> dict[str, list[dict]]:
    r = compile_fleet(path)
    assert r.files, [str(d) for d in r.diagnostics if d.is_error]
    out: dict[str, list[dict]] = {}
    for name, data in r.files.items():
        if name.endswith((".yaml", ".conf")):
            out[name] = [d for d in yaml.safe_load_all(data) if isinstance(d, dict)]
    return out


def objects(path: Path, kind: str) -> list[dict]:
    return [d for docs in build(path).values() for d in docs if d.get("kind") == kind]


def spec_file(tmp_path: Path, pools: str, tiers: str = "", cluster_extra: str = "") -> Path:
    text = (
        "apiVersion: gpuplan.dev/v1alpha1\nkind: Fleet\nmetadata: {name: t}\nspec:\n  cluster:\n"
        '    kubernetesVersion: "1.33"\n    gitops: {repoURL: "https://git.example.com/t.git"}\n'
        "    aws: {clusterName: t, nodeRole: KarpenterNodeRole-t}\n" + cluster_extra +
        "  pools:\n" + pools + (("  tiers:\n" + tiers) if tiers else "")
    )
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    return p


def problems(obj: dict) -> list[str]:
    """What the API server would say: strict schema, then every CEL rule."""
    found, _, _ = Verifier().check(obj)
    return [f"{p.code.code} {'.'.join(map(str, p.path))}: {p.message}" for p in found]


# --- schemas and CEL rules ------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_objects_validate_against_strict_schemas(example: Path) -> None:
    counts = {k: 0 for k in SCHEMAS}
    for name, docs in build(example).items():
        for doc in docs:
            kind = doc.get("kind")
            if kind not in SCHEMAS:
                continue
            assert not problems(doc), f"{name} {kind}: {problems(doc)}"
            counts[kind] += 1
    karpenter_pools = 1 if example.name == "fleet.yaml" else 3
    assert counts["NodePool"] == counts["EC2NodeClass"] == karpenter_pools
    if example.name == "aws-burst.yaml":
        assert counts["NodeOverlay"] == 1


def test_cel_rules_catch_violations() -> None:
    """The CEL rules run: objects gpuplan must never emit are rejected with the
    CRD's own messages."""
    nc = objects(EXAMPLES[1], "EC2NodeClass")[0]
    bad = copy.deepcopy(nc)
    bad["spec"]["amiSelectorTerms"].append({"id": "ami-0123456789abcdef0"})
    bad["spec"]["instanceProfile"] = "x"
    bad["spec"]["amiFamily"] = "Bottlerocket" if "al2023" in nc["spec"]["amiSelectorTerms"][0]["alias"] else "AL2023"
    probs = "\n".join(problems(bad))
    assert "must specify exactly one of ['role', 'instanceProfile']" in probs
    assert "'alias' is mutually exclusive" in probs
    assert "amiFamily" in probs and "GP840" in probs
    np_ = objects(EXAMPLES[1], "NodePool")[0]
    bad = copy.deepcopy(np_)
    bad["spec"]["template"]["spec"]["requirements"].append({"key": "karpenter.k8s.aws/instance-gpu-count",
                                                             "operator": "In", "values": []})
    bad["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/nodeclass-hash"] = "x"
    probs = "\n".join(problems(bad))
    assert "requirements with operator 'In' must have a value defined" in probs
    assert 'label domain \"karpenter.k8s.aws\" is restricted' in probs or \
        'label domain "karpenter.k8s.aws" is restricted' in probs
    ov = objects(EXAMPLES[1], "NodeOverlay")[0]
    bad = copy.deepcopy(ov)
    bad["spec"]["capacity"] = {"cpu": "1"}
    assert any("restricted" in p for p in problems(bad)), problems(bad)


# --- NodePool ------------------------------------------------------------------------


def pool_objects(path: Path, pool: str) -> dict[str, dict]:
    files = build(path)
    out = {}
    for name in ("nodepool", "ec2nodeclass", "nodeoverlay"):
        docs = files.get(f"pools/{pool}/{name}.yaml")
        if docs:
            out[name] = docs[0]
    return out


def test_nodepool_shape_for_a_training_pool() -> None:
    np_ = pool_objects(EXAMPLES[1], "train-h100")["nodepool"]
    spec = np_["spec"]
    t = spec["template"]["spec"]
    reqs = {r["key"]: r for r in t["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == {"key": "node.kubernetes.io/instance-type",
                                                        "operator": "In", "values": ["p5.48xlarge"]}
    assert reqs["karpenter.sh/capacity-type"]["values"] == ["on-demand"]
    assert reqs["karpenter.k8s.aws/instance-gpu-name"]["values"] == ["h100"]
    assert reqs["karpenter.k8s.aws/instance-gpu-count"]["values"] == ["8"]
    assert reqs["karpenter.k8s.aws/instance-gpu-memory"]["values"] == ["81920"]
    assert all(r["operator"] == "In" and r["values"] for r in t["requirements"])
    assert t["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert t["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "train-h100"}
    assert t["expireAfter"] == "336h"
    assert "expireAfter" not in spec["disruption"]
    assert "startupTaints" not in t
    assert spec["limits"] == {"nvidia.com/gpu": "64"}
    # a training pool is never consolidated under running jobs, and never drifted
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert {"nodes": "0", "reasons": ["Drifted"]} in spec["disruption"]["budgets"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["gpuplan.dev/pool"] == "train-h100"
    assert labels["nvidia.com/device-plugin.config"] == "train-h100"
    # aws-burst: driver and toolkit preinstalled cluster-wide -> no per-node operand switches
    assert "nvidia.com/gpu.deploy.driver" not in labels


def test_node_labels_come_from_node_labels_module() -> None:
    from gpuplan.lower.node_labels import pool_node_labels

    r = compile_fleet(EXAMPLES[0])
    rf = r.resolved
    pv = rf.pool_by_name["burst-h100"]
    labels = yaml.safe_load(r.files["pools/burst-h100/nodepool.yaml"])["spec"]["template"]["metadata"]["labels"]
    for k, v in pool_node_labels(rf, pv).items():
        assert labels[k] == v
    # fleet.yaml: the operator manages driver and toolkit, the EKS AMI ships both
    assert labels["nvidia.com/gpu.deploy.driver"] == "false"
    assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "false"


def test_inference_pool_disruption_and_zones() -> None:
    spec = pool_objects(EXAMPLES[1], "infer-l40s")["nodepool"]["spec"]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "2m",
                                  "budgets": [{"nodes": "1"}]}
    reqs = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a", "us-east-1b"]
    assert reqs["karpenter.sh/capacity-type"] == ["spot", "on-demand"]
    assert reqs["node.kubernetes.io/instance-type"] == ["g6e.12xlarge", "g6e.24xlarge"]
    assert reqs["karpenter.k8s.aws/instance-gpu-count"] == ["4"]


def test_limit_is_whole_nodes_and_custom_taints(tmp_path: Path) -> None:
    p = spec_file(tmp_path,
                  "    - name: train\n      gpu: H100-SXM5-80GB\n"
                  "      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 20, amiVersion: v20260801, weight: 50}\n"
                  "      taints: [{key: example.com/team, value: ml, effect: NoSchedule}]\n")
    r = compile_fleet(p)
    assert any(d.code == "GP617" for d in r.diagnostics)
    np_ = yaml.safe_load(r.files["pools/train/nodepool.yaml"])
    assert np_["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    assert np_["spec"]["weight"] == 50
    assert np_["spec"]["template"]["spec"]["taints"] == [{"key": "example.com/team", "value": "ml",
                                                          "effect": "NoSchedule"}]
    errors = list(Draft202012Validator(_schema("NodePool")).iter_errors(np_))
    assert not errors


# --- EC2NodeClass ---------------------------------------------------------------------


def test_ec2nodeclass_shape() -> None:
    nc = pool_objects(EXAMPLES[1], "train-h100")["ec2nodeclass"]["spec"]
    assert nc["amiSelectorTerms"] == [{"alias": "al2023@v20260801"}]
    assert nc["role"] == "KarpenterNodeRole-aws-burst" and "instanceProfile" not in nc
    assert nc["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "aws-burst"}}]
    assert nc["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "aws-burst"}}]
    root = [b for b in nc["blockDeviceMappings"] if b.get("rootVolume")]
    assert len(root) == 1 and root[0]["ebs"]["volumeSize"] == "200Gi" and root[0]["ebs"]["volumeType"] == "gp3"
    assert nc["metadataOptions"]["httpTokens"] == "required"
    # the Topology Manager never goes into spec.kubelet (the field does not exist there)
    assert "topologyManagerPolicy" not in json.dumps(nc.get("kubelet", {}))


def test_al2023_userdata_is_mime_with_nodeconfig() -> None:
    nc = pool_objects(EXAMPLES[1], "train-h100")["ec2nodeclass"]["spec"]
    msg = email.message_from_string(nc["userData"])
    assert msg.is_multipart()
    parts = [p for p in msg.walk() if p.get_content_type() == "application/node.eks.aws"]
    assert len(parts) == 1
    cfg = yaml.safe_load(parts[0].get_payload())
    assert cfg["apiVersion"] == "node.eks.aws/v1alpha1" and cfg["kind"] == "NodeConfig"
    kubelet = cfg["spec"]["kubelet"]["config"]
    assert kubelet["topologyManagerPolicy"] == "restricted"
    assert kubelet["topologyManagerScope"] == "pod"
    assert kubelet["cpuManagerPolicy"] == "static"
    assert kubelet["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "true"}


def test_al2023_userdata_is_yaml_safe(tmp_path: Path) -> None:
    """A hostile spec string ends up as the same string in the NodeConfig, not as YAML structure."""
    evil = '0,1\\n    evictionHard: {memory.available: \\"0%\\"} # {{ x }}'
    p = spec_file(tmp_path,
                  "    - name: train\n      gpu: H100-SXM5-80GB\n"
                  "      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260801}\n"
                  f'      topology: {{policy: restricted, reservedSystemCPUs: "{evil}"}}\n')
    from gpuplan.compiler import check_fleet
    from gpuplan.lower.karpenter import al2023_userdata

    checked = check_fleet(p)
    assert any(d.code == "GP609" for d in checked.diagnostics)  # and the rule rejects it
    pv = checked.resolved.pool_by_name["train"]
    msg = email.message_from_string(al2023_userdata(pv))
    part = [x for x in msg.walk() if x.get_content_type() == "application/node.eks.aws"][0]
    cfg = yaml.safe_load(part.get_payload())["spec"]["kubelet"]["config"]
    assert cfg["reservedSystemCPUs"] == pv.pool.topology.reserved_system_cpus
    assert "evictionHard" not in cfg


def test_bottlerocket_userdata_is_toml() -> None:
    nc = pool_objects(EXAMPLES[1], "infer-l40s")["ec2nodeclass"]["spec"]
    assert nc["amiSelectorTerms"] == [{"alias": "bottlerocket@v1.40.0"}]
    devices = {b["deviceName"]: b for b in nc["blockDeviceMappings"]}
    assert devices["/dev/xvdb"]["rootVolume"] is True and devices["/dev/xvdb"]["ebs"]["volumeSize"] == "200Gi"
    settings = tomllib.loads(nc["userData"])["settings"]
    k = settings["kubernetes"]
    assert k["topology-manager-policy"] == "single-numa-node"
    assert k["topology-manager-scope"] == "pod"
    assert k["cpu-manager-policy"] == "static"
    assert settings["kubelet-device-plugins"]["nvidia"]["enabled"] is False


def test_no_userdata_without_topology(tmp_path: Path) -> None:
    p = spec_file(tmp_path,
                  "    - name: infer\n      gpu: L40S\n"
                  "      karpenter: {instanceTypes: [g6e.xlarge], maxGPUs: 4, amiVersion: v20260801}\n")
    nc = yaml.safe_load(compile_fleet(p).files["pools/infer/ec2nodeclass.yaml"])
    assert "userData" not in nc["spec"]


# --- MIG: NodeOverlay and the startup taint -------------------------------------------------


def test_nodeoverlay_advertises_mig_capacity() -> None:
    ov = pool_objects(EXAMPLES[1], "mig-a100")["nodeoverlay"]
    assert ov["apiVersion"] == "karpenter.sh/v1alpha1"
    # p4de.24xlarge: 8 GPUs x {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}
    assert ov["spec"]["capacity"] == {"nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8",
                                      "nvidia.com/mig-3g.40gb": "8"}
    reqs = {r["key"]: r["values"] for r in ov["spec"]["requirements"]}
    assert reqs["karpenter.sh/nodepool"] == ["mig-a100"]


def test_mig_startup_taint_has_a_remover() -> None:
    files = build(EXAMPLES[1])
    np_ = files["pools/mig-a100/nodepool.yaml"][0]
    t = np_["spec"]["template"]
    assert t["spec"]["startupTaints"] == [{"key": "gpuplan.dev/mig-pending", "value": "true",
                                           "effect": "NoSchedule"}]
    labels = t["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "gpuplan-mig-a100"
    docs = {d["kind"]: d for d in files["karpenter/mig-ready.yaml"]}
    assert set(docs) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    sel = pod["nodeSelector"]
    assert sel["nvidia.com/mig.config.state"] == "success"
    for k, v in sel.items():  # the remover runs only on the MIG nodes, after mig-manager succeeded
        if k != "nvidia.com/mig.config.state":
            assert labels[k] == v
    assert {"operator": "Exists"} in pod["tolerations"]
    script = pod["containers"][0]["command"][-1]
    assert "gpuplan.dev/mig-pending" in script and 'kubectl taint node "$NODE_NAME" "$taint:NoSchedule-"' in script
    assert docs["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    # non-MIG pools get no startup taint
    assert "startupTaints" not in files["pools/train-h100/nodepool.yaml"][0]["spec"]["template"]["spec"]


def test_mig_ready_objects_validate_as_core_kinds() -> None:
    import kubernetes_validate as kv

    docs = build(EXAMPLES[1])["karpenter/mig-ready.yaml"]
    for d in docs:
        kv.validate(d, "1.33.0", strict=True)


def test_operator_tolerates_the_startup_taint() -> None:
    from gpuplan.compiler import check_fleet
    from gpuplan.lower.karpenter import operator_tolerations

    rf = check_fleet(EXAMPLES[1]).resolved
    assert operator_tolerations(rf) == [{"key": "gpuplan.dev/mig-pending", "operator": "Exists",
                                         "effect": "NoSchedule"}]
    rf0 = check_fleet(EXAMPLES[0]).resolved
    assert operator_tolerations(rf0) == []


def test_output_is_deterministic() -> None:
    a = compile_fleet(EXAMPLES[1]).files
    b = compile_fleet(EXAMPLES[1]).files
    assert a == b


def test_operator_values_tolerate_the_startup_taint() -> None:
    """Without this toleration mig-manager never runs on a new MIG node and the
    startup taint is never removed."""
    values = yaml.safe_load(compile_fleet(EXAMPLES[1]).files["gpu-operator/values.yaml"])
    want = {"key": "gpuplan.dev/mig-pending", "operator": "Exists", "effect": "NoSchedule"}
    assert want in values["daemonsets"]["tolerations"]
    assert want in values["node-feature-discovery"]["worker"]["tolerations"]
