"""Karpenter output: NodePool, EC2NodeClass, NodeOverlay and the MIG gate,
validated against the strict upstream schemas pinned in gpuplan/upstream
(Karpenter v1.14.1) and every CEL rule those schemas carry, evaluated by
gpuplan.verify with a real CEL engine; userData parsed as the node would
parse it."""

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
from gpuplan.upstream.pins import crd_schema
from gpuplan.verify.verifier import Verifier
from tests.outputkit import fleet

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
    assert t["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                           {"key": "gpuplan.dev/pool", "value": "train-h100", "effect": "NoSchedule"}]
    assert t["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "train-h100"}
    assert t["expireAfter"] == "336h"
    assert "expireAfter" not in spec["disruption"]
    assert "startupTaints" not in t
    # nodes, and the same nodes' GPUs: Karpenter counts the GPUs within one scheduling pass (nodepool_limits)
    assert spec["limits"] == {"nodes": "8", "nvidia.com/gpu": "64"}
    # a training pool is never consolidated under running jobs, and never drifted
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert {"nodes": "0", "reasons": ["Drifted"]} in spec["disruption"]["budgets"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["gpuplan.dev/pool"] == "train-h100"
    assert labels["nvidia.com/device-plugin.config"].startswith("train-h100-")
    # aws-burst: driver and toolkit preinstalled cluster-wide -> no per-node operand switches
    assert "nvidia.com/gpu.deploy.driver" not in labels


def test_node_labels_come_from_node_labels_module() -> None:
    from gpuplan.identity import pool_node_labels

    r = compile_fleet(EXAMPLES[0])
    rf = r.resolved
    pv = rf.pool_by_name["burst-h100"]
    labels = yaml.safe_load(r.files["pools/burst-h100/nodepool.yaml"])["spec"]["template"]["metadata"]["labels"]
    for k, v in pool_node_labels(rf, pv).items():
        assert labels[k] == v
    # fleet.yaml: the operator manages the driver (the EKS AMI ships its own); the
    # toolkit is one fleet-wide choice, never switched off per node
    assert labels["nvidia.com/gpu.deploy.driver"] == "false"
    assert "nvidia.com/gpu.deploy.container-toolkit" not in labels


def test_inference_pool_disruption_and_zones() -> None:
    spec = pool_objects(EXAMPLES[1], "infer-l40s")["nodepool"]["spec"]
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "2m",
                                  "budgets": [{"nodes": "1"}]}
    reqs = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a", "us-east-1b"]
    assert reqs["karpenter.sh/capacity-type"] == ["on-demand"]  # serving: spot guarantees none of its quota (GP413)
    assert reqs["node.kubernetes.io/instance-type"] == ["g6e.12xlarge", "g6e.24xlarge"]
    assert reqs["karpenter.k8s.aws/instance-gpu-count"] == ["4"]


def test_limit_is_whole_nodes_and_custom_taints(tmp_path: Path) -> None:
    p = spec_file(tmp_path,
                  "    - name: train\n      gpu: H100-SXM5-80GB\n"
                  "      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 20, amiVersion: v20260714, weight: 50}\n"
                  "      taints: [{key: example.com/team, value: ml, effect: NoSchedule}]\n")
    r = compile_fleet(p)
    assert any(d.code == "GP617" for d in r.diagnostics)
    np_ = yaml.safe_load(r.files["pools/train/nodepool.yaml"])
    assert np_["spec"]["limits"] == {"nodes": "2", "nvidia.com/gpu": "16"}  # whole nodes: 2 x 8, not 20
    assert np_["spec"]["weight"] == 50
    assert np_["spec"]["template"]["spec"]["taints"] == [{"key": "example.com/team", "value": "ml",
                                                          "effect": "NoSchedule"},
                                                         {"key": "gpuplan.dev/pool", "value": "train",
                                                          "effect": "NoSchedule"}]
    errors = list(Draft202012Validator(_schema("NodePool")).iter_errors(np_))
    assert not errors


# --- EC2NodeClass ---------------------------------------------------------------------


def test_ec2nodeclass_shape() -> None:
    nc = pool_objects(EXAMPLES[1], "train-h100")["ec2nodeclass"]["spec"]
    assert nc["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
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
                  "      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 16, amiVersion: v20260714}\n"
                  f'      topology: {{policy: restricted, reservedSystemCPUs: "{evil}"}}\n')
    from gpuplan.compiler import check_fleet
    from gpuplan.lower.karpenter_aws import al2023_userdata

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
    # Bottlerocket's own device plugin serves the pool: never `enabled = false`
    # (that key exists only from Bottlerocket 1.63; this pool pins v1.40.0), and an
    # exclusive pool needs none of its settings
    assert "kubelet-device-plugins" not in settings
    labels = pool_objects(EXAMPLES[1], "infer-l40s")["nodepool"]["spec"]["template"]["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.operands"] == "false"  # no GPU Operator operand on Bottlerocket


# Settings keys of Bottlerocket's NVIDIA device plugin, with the release that added them
# (bottlerocket-os/bottlerocket CHANGELOG.md v1.23.0 #4182, v1.25.0 #4230,
# sources/settings-migrations/v1.25.0/kubelet-device-plugins-time-slicing-settings;
# `enabled`: AWS EKS user guide, device-management-nvidia-time-slicing, Bottlerocket 1.63.0).
BOTTLEROCKET_KEYS = {
    "pass-device-specs": (1, 23, 0), "device-id-strategy": (1, 23, 0), "device-list-strategy": (1, 23, 0),
    "device-sharing-strategy": (1, 25, 0), "time-slicing": (1, 25, 0), "enabled": (1, 63, 0),
}


def _bottlerocket_accepts(userdata: str, version: tuple[int, int, int]) -> bool:
    """Bottlerocket's settings API rejects keys its release does not know."""
    plugin = tomllib.loads(userdata).get("settings", {}).get("kubelet-device-plugins", {}).get("nvidia", {})
    return all(version >= BOTTLEROCKET_KEYS.get(k, (999, 0, 0)) for k in plugin)


def test_bottlerocket_time_slicing_through_its_own_plugin(tmp_path: Path) -> None:
    def pool(ami: str) -> str:
        return ("    - name: ts\n      gpu: L40S\n"
                # renamed units (nvidia.com/gpu.shared): without a NodeOverlay Karpenter never launches (GP615)
                f"      karpenter: {{instanceTypes: [g6e.xlarge], maxGPUs: 4, amiFamily: Bottlerocket, amiVersion: {ami}, "
                "nodeOverlay: true}\n"
                "      sharing: {mode: time-slicing, replicas: 4}\n")

    r = compile_fleet(spec_file(tmp_path, pool("v1.40.0")))
    ud = yaml.safe_load(r.files["pools/ts/ec2nodeclass.yaml"])["spec"]["userData"]
    nvidia = tomllib.loads(ud)["settings"]["kubelet-device-plugins"]["nvidia"]
    assert nvidia["device-sharing-strategy"] == "time-slicing"
    assert nvidia["time-slicing"] == {"replicas": 4, "rename-by-default": True, "fail-requests-greater-than-one": True}
    assert _bottlerocket_accepts(ud, (1, 40, 0))
    old = compile_fleet(spec_file(tmp_path, pool("v1.20.0")))
    [d] = [d for d in old.diagnostics if d.is_error]
    assert d.code == "GP644" and d.path == "spec.pools[0].karpenter.amiVersion" and not old.files


def test_bottlerocket_userdata_runs_on_the_pinned_release() -> None:
    """8bd6184 wrote `enabled = false`, which Bottlerocket v1.40.0 does not know."""
    nc = pool_objects(EXAMPLES[1], "infer-l40s")["ec2nodeclass"]["spec"]
    assert _bottlerocket_accepts(nc["userData"], (1, 40, 0))


def test_bottlerocket_refuses_mig_and_mps(tmp_path: Path) -> None:
    for sharing in ("{mode: mps, replicas: 4}", "{mode: mig, layout: {1g.10gb: 7}}"):
        p = spec_file(tmp_path,
                      "    - name: b\n      gpu: H100-SXM5-80GB\n"
                      "      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 8, amiFamily: Bottlerocket, "
                      "amiVersion: v1.40.0}\n"
                      f"      sharing: {sharing}\n")
        r = compile_fleet(p)
        assert "GP643" in {d.code for d in r.diagnostics if d.is_error}


def test_al2023_userdata_without_topology_has_only_the_toolkit_script(tmp_path: Path) -> None:
    """No kubelet settings: no NodeConfig part, but the AMI's toolkit is still told to
    refuse NVIDIA_VISIBLE_DEVICES from unprivileged pods and to accept the device
    plugin's volume mounts (the AMI makes nvidia the default runtime,
    awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/containerd/runtime_config_nvidia.go:25-35)."""
    p = spec_file(tmp_path,
                  "    - name: infer\n      gpu: L40S\n"
                  "      karpenter: {instanceTypes: [g6e.xlarge], maxGPUs: 4, amiVersion: v20260714}\n")
    nc = yaml.safe_load(compile_fleet(p).files["pools/infer/ec2nodeclass.yaml"])
    msg = email.message_from_string(nc["spec"]["userData"])
    assert msg.is_multipart()
    types = [x.get_content_type() for x in msg.get_payload()]
    assert types == ["text/x-shellscript"]
    script = msg.get_payload()[0].get_payload()
    assert script.startswith("#!/bin/bash\n")
    cmd = [ln for ln in script.splitlines() if ln.startswith("nvidia-ctk")]
    assert cmd == ["nvidia-ctk config --in-place --set accept-nvidia-visible-devices-envvar-when-unprivileged=false "
                   "--set accept-nvidia-visible-devices-as-volume-mounts=true"]


# --- MIG: NodeOverlay and the startup taint -------------------------------------------------


def test_nodeoverlay_advertises_mig_capacity() -> None:
    ov = pool_objects(EXAMPLES[1], "mig-a100")["nodeoverlay"]
    assert ov["apiVersion"] == "karpenter.sh/v1alpha1"
    # p4de.24xlarge: 8 GPUs x {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}
    assert ov["spec"]["capacity"] == {"nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8",
                                      "nvidia.com/mig-3g.40gb": "8"}
    reqs = {r["key"]: r["values"] for r in ov["spec"]["requirements"]}
    assert reqs["karpenter.sh/nodepool"] == ["mig-a100"]


def _karpenter_limit_allows(nodepool: dict, node_capacity: dict[str, int], launched: int) -> bool:
    """Whether Karpenter launches one more node: it subtracts each initialized
    node's advertised capacity plus `nodes: 1` from the NodePool limits
    (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/state/statenode.go:359-375)
    and refuses a launch once `nodes` is exhausted or an instance type would
    exceed a limit (pkg/controllers/provisioning/scheduling/scheduler.go:709-717)."""
    used = {k: v * launched for k, v in {**node_capacity, "nodes": 1}.items()}
    for key, limit in nodepool["spec"].get("limits", {}).items():
        if used.get(key, 0) + {**node_capacity, "nodes": 1}.get(key, 0) > int(limit):
            return False
    return True


@pytest.mark.parametrize("pool", ["mig-a100", "train-h100", "infer-l40s"])
def test_limit_caps_the_pool_at_its_nodes(pool: str) -> None:
    """The pool never grows past the ceiling the README states (maxGPUs in whole
    nodes), even when its nodes advertise no nvidia.com/gpu (MIG mixed: 8bd6184's
    `limits: {nvidia.com/gpu: 16}` never filled and the MIG pool was unbounded)."""
    from gpuplan.compiler import check_fleet

    rf = check_fleet(EXAMPLES[1]).resolved
    pv = rf.pool_by_name[pool]
    np_ = pool_objects(EXAMPLES[1], pool)["nodepool"]
    n = 0
    while n < 1000 and _karpenter_limit_allows(np_, pv.node_resources(), n):
        n += 1
    assert n == pv.node_count
    files = compile_fleet(EXAMPLES[1]).files
    readme = files["README.md"].decode()
    assert f"| {pool} |" in readme and f"Karpenter, ≤ {n} (limits.nodes)" in readme
    assert f"{pool} ≤ {n} nodes = {n * pv.gpus_per_node} GPUs" in files["CAPACITY.md"].decode()


def _schedulable(pod_tolerations: list[dict], pod_resources: dict[str, int], node_taints: list[dict],
                 node_allocatable: dict[str, int]) -> bool:
    """kube-scheduler: TaintToleration (NoSchedule) and NodeResourcesFit; the
    pod's tolerations are after ExtendedResourceToleration, which adds
    `{key: <resource>, operator: Exists}` for each extended resource requested."""
    tols = list(pod_tolerations) + [{"key": r, "operator": "Exists"} for r in pod_resources if "/" in r]

    def tolerated(t: dict) -> bool:
        return any(x.get("key") in (None, t["key"]) and (x.get("operator") == "Exists" or x.get("value") == t.get("value"))
                   and x.get("effect") in (None, t["effect"]) for x in tols)

    return (all(tolerated(t) for t in node_taints if t["effect"] == "NoSchedule")
            and all(node_allocatable.get(r, 0) >= n for r, n in pod_resources.items()))


def test_mig_pool_takes_no_gpu_work_before_its_layout() -> None:
    """A new MIG node first advertises whole GPUs. Before the layout is applied
    no pod may take one (mig-manager could not repartition it); after, the
    pool's tier pods run. No container, no RBAC: 8bd6184 relied on a DaemonSet
    running /bin/bash in the distroless kubectl image, which cannot start."""
    from gpuplan.compiler import check_fleet

    files = build(EXAMPLES[1])
    rf = check_fleet(EXAMPLES[1]).resolved
    pv = rf.pool_by_name["mig-a100"]
    t = files["pools/mig-a100/nodepool.yaml"][0]["spec"]["template"]
    taints = t["spec"]["taints"]
    before = {"nvidia.com/gpu": pv.gpus_per_node}  # MIG not applied yet
    after = pv.node_resources()
    # what a tier of the pool runs: its MIG resource, tolerating the pool's taints (README)
    tier_tols = [{"key": x["key"], "operator": "Exists", "effect": x["effect"]} for x in taints]
    tier_pod = {"nvidia.com/mig-1g.10gb": 1}
    whole_gpu_pod = {"nvidia.com/gpu": 1}
    gpu_taint_tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert not _schedulable(tier_tols, tier_pod, taints, before)
    assert not _schedulable(gpu_taint_tol, whole_gpu_pod, taints, before)
    assert not _schedulable([], whole_gpu_pod, taints, before)
    assert _schedulable(tier_tols, tier_pod, taints, after)
    assert not _schedulable([], whole_gpu_pod, taints, after)
    # Karpenter initializes the node only once the requested MIG resource is
    # registered (initialization.go:82-85): no startup taint to remove
    assert "startupTaints" not in t["spec"]
    # nothing gpuplan emits runs a container or grants node-wide RBAC
    for path, docs in files.items():
        for d in docs:
            assert d.get("kind") not in {"DaemonSet", "Deployment", "ClusterRole", "ClusterRoleBinding"}, path
    # the operator's operands and the NFD worker tolerate the gate, or mig-manager never runs there
    values = files["gpu-operator/values.yaml"][0]
    want = {"key": "gpuplan.dev/mig-pool", "operator": "Exists", "effect": "NoSchedule"}
    assert want in values["daemonsets"]["tolerations"]
    assert want in values["node-feature-discovery"]["worker"]["tolerations"]


def test_mig_gate_only_on_karpenter_mig_pools() -> None:
    files = build(EXAMPLES[1])
    for pool in ("train-h100", "infer-l40s"):
        keys = [x["key"] for x in files[f"pools/{pool}/nodepool.yaml"][0]["spec"]["template"]["spec"]["taints"]]
        assert "gpuplan.dev/mig-pool" not in keys
    readme = compile_fleet(EXAMPLES[1]).files["README.md"].decode()
    row = next(line for line in readme.splitlines() if line.startswith("| mig-a100 |"))
    assert "gpuplan.dev/mig-pool=mig-a100:NoSchedule" in row


def test_output_is_deterministic() -> None:
    a = compile_fleet(EXAMPLES[1]).files
    b = compile_fleet(EXAMPLES[1]).files
    assert a == b


def test_bottlerocket_topology_settings_are_gated_too(tmp_path: Path) -> None:
    def codes(ami: str) -> list[str]:
        p = spec_file(tmp_path,
                      "    - name: b\n      gpu: L40S\n"
                      f"      karpenter: {{instanceTypes: [g6e.xlarge], maxGPUs: 4, amiFamily: Bottlerocket, "
                      f"amiVersion: {ami}}}\n"
                      "      topology: {policy: single-numa-node, scope: pod}\n")
        return [d.code for d in compile_fleet(p).diagnostics if d.is_error]

    assert codes("v1.1.0") == ["GP644"]  # topology-manager-* from v1.2.0
    assert codes("v1.2.0") == []


# --- instance store: RAID0 where every instance type has local NVMe (issue #28 item 5) ----


def test_p5_pool_stripes_its_local_nvme() -> None:
    """p5.48xlarge has 8 local NVMe drives (30,400 GiB, the instance table); Karpenter's
    instanceStorePolicy RAID0 makes nodeadm stripe them for kubelet and containerd
    (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go:87-88)."""
    spec = pool_objects(EXAMPLES[0], "burst-h100")["ec2nodeclass"]["spec"]
    assert spec["instanceStorePolicy"] == "RAID0"
    assert "RAID0" in _schema("EC2NodeClass")["properties"]["spec"]["properties"]["instanceStorePolicy"]["enum"]


def test_raid0_only_when_every_instance_type_has_nvme() -> None:
    from types import SimpleNamespace

    from gpuplan.lower.karpenter_aws import instance_store_raid0

    def pv(*types: str, family: str = "AL2023"):
        return SimpleNamespace(pool=SimpleNamespace(karpenter=SimpleNamespace(instance_types=list(types),
                                                                              ami_family=family)))

    assert instance_store_raid0(pv("p4d.24xlarge", "p5.48xlarge"))
    assert not instance_store_raid0(pv("g5g.xlarge"))  # no instance store
    assert not instance_store_raid0(pv("g5.xlarge", "g5g.xlarge"))  # one type without: not striped
    assert not instance_store_raid0(pv("g6e.xlarge", family="Bottlerocket"))  # AL2023 only


def test_nodepool_limits_count_what_karpenter_counts_within_and_across_passes() -> None:
    """Every name the NodeOverlay adds and the physical nvidia.com/gpu, each the limits.nodes' worth;
    no nvidia.com/gpu limit where a node advertises more than its GPUs (time-slicing, no rename)."""
    from gpuplan.compiler import check_fleet
    from gpuplan.lower.karpenter import nodepool_limits, overlay_capacity

    rf = check_fleet(REPO / "examples" / "aws-burst.yaml").resolved
    mig = rf.pool_by_name["mig-a100"]
    lim = nodepool_limits(mig, 2)
    assert lim["nodes"] == "2" and lim["nvidia.com/gpu"] == str(2 * mig.gpus_per_node)
    assert {k: int(v) for k, v in lim.items() if k.startswith("nvidia.com/mig-")} == {
        k: 2 * int(v) for k, v in overlay_capacity(mig).items()} != {}
    assert "nvidia.com/gpu" not in mig.node_resources()  # mixed: a partitioned node advertises none

    for pv in rf.pools:
        if pv.pool.karpenter is None:
            continue
        adv = pv.node_resources().get("nvidia.com/gpu")
        lim = nodepool_limits(pv, 3)
        assert ("nvidia.com/gpu" in lim) == (adv in (None, pv.gpus_per_node)), pv.name


_UNITS_AS_GPU = fleet("""\
    aws: {clusterName: t, nodeRole: KarpenterNodeRole-t}
  pools:
    - name: mig
      gpu: A100-SXM4-80GB
      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714, nodeOverlay: true}
      sharing: {mode: mig, strategy: single, layout: {1g.10gb: 7}}
    - name: ts
      gpu: L40S
      karpenter: {instanceTypes: [g6e.12xlarge], maxGPUs: 8, amiVersion: v20260714, nodeOverlay: true}
      sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}
""")


def test_nodeoverlay_states_nvidia_gpu_where_the_units_keep_its_name(tmp_path) -> None:
    """MIG `single` and time-slicing without renameByDefault advertise their units as nvidia.com/gpu:
    the NodeOverlay states that count, which replaces the instance type's (Karpenter v1.14.1
    pkg/cloudprovider/types.go:313-316, lo.Assign), and the NodePool limits it to the same nodes'
    worth, so Karpenter fits 7 x 8 MIG devices on a p4de and 4 x 4 replicas on a g6e.12xlarge."""
    spec = tmp_path / "fleet.yaml"
    spec.write_text(_UNITS_AS_GPU, encoding="utf-8")
    from gpuplan.compiler import check_fleet

    checked = check_fleet(spec)
    assert not [d for d in checked.diagnostics if d.code.startswith("GP6") and d.severity.value != "info"], \
        checked.diagnostics
    mig, ts = pool_objects(spec, "mig"), pool_objects(spec, "ts")
    assert mig["nodeoverlay"]["spec"]["capacity"] == {"nvidia.com/gpu": str(7 * 8)}
    assert ts["nodeoverlay"]["spec"]["capacity"] == {"nvidia.com/gpu": str(4 * 4)}
    assert mig["nodepool"]["spec"]["limits"] == {"nodes": "2", "nvidia.com/gpu": str(2 * 56)}
    assert ts["nodepool"]["spec"]["limits"] == {"nodes": "2", "nvidia.com/gpu": str(2 * 16)}
    # without the overlay, no nvidia.com/gpu limit: the node would count more than the type said
    spec.write_text(_UNITS_AS_GPU.replace("nodeOverlay: true", "nodeOverlay: false"), encoding="utf-8")
    assert "nodeoverlay" not in pool_objects(spec, "mig")
    assert pool_objects(spec, "mig")["nodepool"]["spec"]["limits"] == {"nodes": "2"}
