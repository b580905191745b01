"""Karpenter output: NodePool, EC2NodeClass, NodeOverlay and the MIG startup-taint
remover, validated against the strict upstream schemas (Karpenter v1.14.1) and
the CEL rules those schemas carry but JSON Schema cannot evaluate (checked here
by hand); userData parsed as the node would parse it."""

from __future__ import annotations

import email
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from gpuplan.compiler import compile_fleet

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO.parent / "shared" / "reference" / "k8s" / "schemas" / "catalog-strict"
SCHEMAS = {
    "NodePool": STRICT / "karpenter.sh" / "nodepool_v1.json",
    "EC2NodeClass": STRICT / "karpenter.k8s.aws" / "ec2nodeclass_v1.json",
    "NodeOverlay": STRICT / "karpenter.sh" / "nodeoverlay_v1alpha1.json",
}
EXAMPLES = [REPO / "examples" / "fleet.yaml", REPO / "examples" / "aws-burst.yaml"]


def _schema(kind: str) -> dict:
    path = SCHEMAS[kind]
    if not path.is_file():
        pytest.fail(f"upstream schema missing: {path}")
    return json.loads(path.read_text())


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


# --- CEL rules of the CRDs, by hand --------------------------------------------


def _cel_allowed_aws_labels(schema: dict) -> set[str]:
    """The karpenter.k8s.aws/* label keys the NodePool CRD's CEL rule allows (read
    from the rule text in the strict schema, not copied here)."""
    rules = []

    def walk(node):
        if isinstance(node, dict):
            for v in node.get("x-kubernetes-validations", []):
                rules.append(v["rule"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    allowed: set[str] = set()
    for r in rules:
        if "karpenter.k8s.aws" in r and " in [" in r:
            allowed |= set(re.findall(r'"(karpenter\.k8s\.aws/[^"]+)"', r))
    assert allowed, "could not read the karpenter.k8s.aws label rule from the schema"
    return allowed


def label_key_problems(key: str, aws_allowed: set[str]) -> list[str]:
    domain = key.split("/")[0] if "/" in key else ""
    out = []
    if domain.endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
        out.append(f'label domain "karpenter.sh" is restricted: {key}')
    if key == "kubernetes.io/hostname":
        out.append("kubernetes.io/hostname is restricted")
    if domain.endswith("karpenter.k8s.aws") and key not in aws_allowed:
        out.append(f'label domain "karpenter.k8s.aws" is restricted: {key}')
    return out


def requirement_problems(reqs: list[dict]) -> list[str]:
    out = []
    for r in reqs:
        vals = r.get("values", [])
        if r["operator"] in ("In", "NotIn") and not vals:
            out.append(f"{r['key']}: operator {r['operator']} needs a value")
        if r["operator"] in ("Gt", "Lt", "Gte", "Lte") and (len(vals) != 1 or int(vals[0]) < 0):
            out.append(f"{r['key']}: {r['operator']} needs one non-negative integer")
        if r["operator"] == "In" and "minValues" in r and len(vals) < r["minValues"]:
            out.append(f"{r['key']}: fewer values than minValues")
    return out


def nodepool_cel_problems(np_: dict, aws_allowed: set[str]) -> list[str]:
    out = []
    t = np_["spec"]["template"]
    for k in t.get("metadata", {}).get("labels", {}):
        out += label_key_problems(k, aws_allowed)
        if k == "karpenter.sh/nodepool":
            out.append("karpenter.sh/nodepool label is restricted")
    reqs = t["spec"]["requirements"]
    out += requirement_problems(reqs)
    for r in reqs:
        out += label_key_problems(r["key"], aws_allowed)
    ref = t["spec"]["nodeClassRef"]
    if not all(ref.get(k) for k in ("group", "kind", "name")):
        out.append("nodeClassRef group/kind/name may not be empty")
    for b in np_["spec"].get("disruption", {}).get("budgets", []):
        if ("schedule" in b) != ("duration" in b):
            out.append("budget: schedule must be set with duration")
    if "replicas" in np_["spec"]:
        out.append("static NodePool (alpha) not expected")
    return out


ALIAS_FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")
FORBIDDEN_TAGS = re.compile(r"^(kubernetes\.io/cluster/.*|eks:eks-cluster-name|karpenter\.sh/nodepool|"
                            r"karpenter\.sh/nodeclaim|karpenter\.k8s\.aws/ec2nodeclass)$")


def nodeclass_cel_problems(nc: dict) -> list[str]:
    s = nc["spec"]
    out = []
    if ("role" in s) == ("instanceProfile" in s):
        out.append("must specify exactly one of ['role', 'instanceProfile']")
    terms = s["amiSelectorTerms"]
    aliases = [t["alias"] for t in terms if "alias" in t]
    if aliases and len(terms) != 1:
        out.append("'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms")
    for t in terms:
        if "alias" in t and set(t) - {"alias"}:
            out.append("'alias' is mutually exclusive with other fields of its term")
        if "id" in t and set(t) - {"id"}:
            out.append("'id' is mutually exclusive")
    for a in aliases:
        if not re.match(r"^[a-zA-Z0-9]+@.+$", a) or len(a) > 30:
            out.append(f"alias {a!r} improperly formatted")
        fam, _, ver = a.partition("@")
        if fam not in ALIAS_FAMILIES:
            out.append(f"alias family {fam!r} not supported")
        if fam.startswith("windows") and ver != "latest":
            out.append("windows only @latest")
        if "amiFamily" in s and s["amiFamily"] not in ("Custom", {"al2023": "AL2023", "bottlerocket": "Bottlerocket",
                                                                 "al2": "AL2"}.get(fam)):
            out.append("amiFamily does not match the alias")
    if not aliases and "amiFamily" not in s:
        out.append("must specify amiFamily if amiSelectorTerms does not contain an alias")
    bdm = s.get("blockDeviceMappings", [])
    if sum(1 for b in bdm if b.get("rootVolume")) > 1:
        out.append("must have only one blockDeviceMappings with rootVolume")
    for b in bdm:
        ebs = b.get("ebs", {})
        if "snapshotID" not in ebs and "volumeSize" not in ebs:
            out.append("snapshotID or volumeSize must be defined")
    for k in s.get("tags", {}):
        if FORBIDDEN_TAGS.match(k):
            out.append(f"tag {k} is restricted")
    for term in s["subnetSelectorTerms"] + s["securityGroupSelectorTerms"]:
        if not term:
            out.append("empty selector term")
        for k, v in term.get("tags", {}).items():
            if not k or not v:
                out.append("empty tag keys or values aren't supported")
    return out


def nodeoverlay_cel_problems(ov: dict) -> list[str]:
    s = ov["spec"]
    out = requirement_problems(s["requirements"])
    if "price" in s and "priceAdjustment" in s:
        out.append("cannot set both 'price' and 'priceAdjustment'")
    for k in s.get("capacity", {}):
        if k in ("cpu", "memory", "ephemeral-storage", "pods"):
            out.append(f"invalid resource restricted: {k}")
    for r in s["requirements"]:
        d = r["key"].split("/")[0]
        if d.endswith("karpenter.sh") and r["key"] not in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool"):
            out.append(f"restricted key {r['key']}")
    return out


# --- schemas ----------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_objects_validate_against_strict_schemas(example: Path) -> None:
    counts = {k: 0 for k in SCHEMAS}
    aws_allowed = _cel_allowed_aws_labels(_schema("NodePool"))
    for name, docs in build(example).items():
        for doc in docs:
            kind = doc.get("kind")
            if kind not in SCHEMAS:
                continue
            errors = sorted(e.message for e in Draft202012Validator(_schema(kind)).iter_errors(doc))
            assert not errors, f"{name} {kind}: {errors[:5]}"
            problems = {"NodePool": lambda d: nodepool_cel_problems(d, aws_allowed),
                        "EC2NodeClass": nodeclass_cel_problems,
                        "NodeOverlay": nodeoverlay_cel_problems}[kind](doc)
            assert not problems, f"{name} {kind}: {problems}"
            counts[kind] += 1
    karpenter_pools = 1 if example.name == "fleet.yaml" else 3
    assert counts["NodePool"] == counts["EC2NodeClass"] == karpenter_pools
    if example.name == "aws-burst.yaml":
        assert counts["NodeOverlay"] == 1


def test_cel_checkers_catch_violations() -> None:
    """The hand-written CEL checks are able to fail."""
    nc = objects(EXAMPLES[1], "EC2NodeClass")[0]
    bad = json.loads(json.dumps(nc))
    bad["spec"]["amiSelectorTerms"].append({"id": "ami-0123456789abcdef0"})
    bad["spec"]["instanceProfile"] = "x"
    bad["spec"]["amiFamily"] = "Bottlerocket" if "al2023" in nc["spec"]["amiSelectorTerms"][0]["alias"] else "AL2023"
    probs = nodeclass_cel_problems(bad)
    assert any("exactly one of" in p for p in probs)
    assert any("alias' is mutually exclusive" in p for p in probs)
    assert any("amiFamily does not match" in p for p in probs)
    np_ = objects(EXAMPLES[1], "NodePool")[0]
    bad = json.loads(json.dumps(np_))
    bad["spec"]["template"]["spec"]["requirements"].append({"key": "karpenter.k8s.aws/instance-gpu-count",
                                                             "operator": "In", "values": []})
    bad["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/nodeclass-hash"] = "x"
    probs = nodepool_cel_problems(bad, _cel_allowed_aws_labels(_schema("NodePool")))
    assert any("needs a value" in p for p in probs)
    assert any("karpenter.k8s.aws" in p for p in probs)


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
