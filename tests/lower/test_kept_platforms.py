"""Config names old nodes still carry, on every platform whose nodes get their labels when they
are made (gpuplan.provisioning.pools.NODE_LABELS): a Cluster API MachineDeployment's nodes keep
the kubelet's --node-labels they registered with, a GKE node pool's the nodeConfig.labels it was
created with, until they are replaced; so a pool-local sharing or layout change keeps the old
device-plugin and mig-parted config names in the ConfigMaps. AKS agent pools are relabelled in
place and keep only the name of their last change, as static pools do.

Each test builds an example, changes one pool, builds again over that tree (as `gpuplan build`
does) and reads the new ConfigMaps."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.outputkit import compile_ok, docs, one

from gpuplan.compiler import Options, compile_fleet
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL, KEPT_CONFIGS_ANNOTATION, MIG_CONFIG_LABEL
from gpuplan.output.tree import write_tree
from gpuplan.provisioning.pools import read_template

REPO = Path(__file__).resolve().parents[2]
CAPI = (REPO / "examples" / "onprem-capi.yaml").read_text(encoding="utf-8")
GKE = (REPO / "examples" / "gke.yaml").read_text(encoding="utf-8")
AKS = (REPO / "examples" / "aks.yaml").read_text(encoding="utf-8")
CM = "gpu-operator/device-plugin-config.yaml"
MIG_CM = "gpu-operator/mig-parted-config.yaml"

# examples/gke.yaml with its L4 notebooks on the GPU Operator path (GKE installs no driver, the
# operator's device plugin reads the node's nvidia.com/device-plugin.config; the shares keep the name
# nvidia.com/gpu, so the autoscaler sees the nodes ready: GP675)
GKE_OPERATOR = GKE.replace("        maxGPUs: 8\n        spot: true\n",
                           "        maxGPUs: 8\n        spot: true\n        driver: gpu-operator\n"
                           "        imageType: UBUNTU_CONTAINERD\n", 1).replace(
    "sharing: {mode: time-slicing, replicas: 4}", "sharing: {mode: time-slicing, replicas: 4, renameByDefault: false}", 1)


def _build(tmp_path: Path, text: str, *, retire: frozenset[str] = frozenset()):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    tree = tmp_path / "generated"
    if retire:
        c = compile_fleet(spec, out_dir=tree, options=Options(retire_configs=retire))
        assert c.files
    else:
        c = compile_ok(spec)
    write_tree(tree, c.files, force=True)
    return c


def _template_label(c, path: str, pool: str, label: str) -> str:
    """The value of ``label`` the pool's node template (as its back-end reads it) gives new nodes."""
    for d in docs(c.files[path]):
        read = read_template(d)
        if read is not None and read[0] == pool and label in read[1]:
            return read[1][label]
    raise AssertionError(f"{path} gives no {label}")


def _kept(c, path: str = CM) -> dict:
    ann = one(c, path)["metadata"].get("annotations", {}).get(KEPT_CONFIGS_ANNOTATION)
    return json.loads(ann) if ann else {}


def test_a_capi_sharing_change_keeps_the_old_device_plugin_config(tmp_path):
    """notebooks-l40s goes from 4 to 2 replicas: its new KubeadmConfigTemplate rolls the machines,
    but until each is replaced its node carries the old name, which the ConfigMap keeps verbatim."""
    path = "provisioning/capi/notebooks-l40s.yaml"
    change = CAPI.replace("sharing: {mode: time-slicing, replicas: 4,", "sharing: {mode: time-slicing, replicas: 2,", 1)
    assert change != CAPI
    before = _build(tmp_path, CAPI)
    after = _build(tmp_path, change)
    old = _template_label(before, path, "notebooks-l40s", DEVICE_PLUGIN_CONFIG_LABEL)
    new = _template_label(after, path, "notebooks-l40s", DEVICE_PLUGIN_CONFIG_LABEL)
    assert old != new
    data = one(after, CM)["data"]
    assert {old, new} <= set(data)
    assert data[old] == one(before, CM)["data"][old]
    assert _kept(after) == {old: "notebooks-l40s"}
    # building the same spec again keeps it (a fixed point: `gpuplan check` stays clean) ...
    assert _build(tmp_path, change).files[CM] == after.files[CM]
    # ... until it is retired by hand
    retired = _build(tmp_path, change, retire=frozenset({old}))
    assert old not in one(retired, CM)["data"] and new in one(retired, CM)["data"]


def test_a_capi_mig_layout_change_keeps_the_old_mig_config(tmp_path):
    """infer-a100 moves GPU 5 from 1g.10gb to 3g.40gb slices: old machines keep their
    nvidia.com/mig.config, and mig-manager restarted there must still find its layout."""
    path = "provisioning/capi/infer-a100.yaml"
    change = CAPI.replace("          - devices: [0, 1, 2, 3, 4, 5]\n", "          - devices: [0, 1, 2, 3, 4]\n", 1) \
        .replace("          - devices: [6, 7]\n", "          - devices: [5, 6, 7]\n", 1)
    assert change.count("devices: [5, 6, 7]") == 1
    before = _build(tmp_path, CAPI)
    after = _build(tmp_path, change)
    old = _template_label(before, path, "infer-a100", MIG_CONFIG_LABEL)
    new = _template_label(after, path, "infer-a100", MIG_CONFIG_LABEL)
    assert old != new

    def configs(c):
        return yaml.safe_load(one(c, MIG_CM)["data"]["config.yaml"])["mig-configs"]

    assert configs(after)[old] == configs(before)[old]
    assert new in configs(after)
    assert _kept(after, MIG_CM) == {old: "infer-a100"}


def test_a_gke_operator_path_sharing_change_keeps_the_old_device_plugin_config(tmp_path):
    """notebooks-l4 on the GPU Operator path: its labels are nodeConfig.labels, set when GKE
    creates a node; a replica change is a new node pool, and until then the old nodes carry the
    old name."""
    path = "provisioning/gke/notebooks-l4.yaml"
    change = GKE_OPERATOR.replace("replicas: 4, renameByDefault: false}", "replicas: 2, renameByDefault: false}", 1)
    assert change != GKE_OPERATOR
    before = _build(tmp_path, GKE_OPERATOR)
    after = _build(tmp_path, change)
    old = _template_label(before, path, "notebooks-l4", DEVICE_PLUGIN_CONFIG_LABEL)
    new = _template_label(after, path, "notebooks-l4", DEVICE_PLUGIN_CONFIG_LABEL)
    assert old != new
    assert {old, new} <= set(one(after, CM)["data"])
    assert _kept(after) == {old: "notebooks-l4"}


def test_gke_own_stack_pools_carry_no_config_name_to_keep(tmp_path):
    """On GKE's own GPU stack the node pools carry no device-plugin config label (GKE's plugin
    reads gpuSharingConfig), so a replica change keeps nothing."""
    before = _build(tmp_path, GKE)
    after = _build(tmp_path, GKE.replace("sharing: {mode: time-slicing, replicas: 4}",
                                         "sharing: {mode: time-slicing, replicas: 2}", 1))
    for d in docs(before.files["provisioning/gke/notebooks-l4.yaml"]):
        assert DEVICE_PLUGIN_CONFIG_LABEL not in d["spec"]["nodeConfig"]["labels"]
    assert _kept(after) == {}


def test_an_aks_agent_pool_keeps_the_name_of_its_last_change(tmp_path):
    """AKS applies a changed nodeLabels to the agent pool's nodes where they stand, once Azure
    Service Operator has applied the agent pool; until then they carry the old name. As for a
    static pool, the ConfigMap keeps the name of the pool's last change, and the next change
    replaces it."""
    path = "provisioning/aks/nb-t4/agentpool.yaml"

    def replicas(n: int) -> str:
        return AKS.replace("sharing: {mode: time-slicing, replicas: 4,", f"sharing: {{mode: time-slicing, replicas: {n},", 1)

    assert replicas(2) != AKS
    before = _build(tmp_path, AKS)
    after = _build(tmp_path, replicas(2))
    old = _template_label(before, path, "nb-t4", DEVICE_PLUGIN_CONFIG_LABEL)
    new = _template_label(after, path, "nb-t4", DEVICE_PLUGIN_CONFIG_LABEL)
    assert old != new
    assert {old, new} <= set(one(after, CM)["data"])
    assert _kept(after) == {old: "nb-t4"}
    assert _build(tmp_path, replicas(2)).files[CM] == after.files[CM]  # a fixed point
    third = _build(tmp_path, replicas(3))
    assert old not in one(third, CM)["data"]  # relabelled in place since: only the last change's name
    assert _kept(third) == {new: "nb-t4"}


def test_plan_base_says_old_nodes_keep_their_config_name(tmp_path):
    """`gpuplan plan --base`: the MachineDeployment's rollout names the old device-plugin config
    name its old machines carry and that the ConfigMaps keep for them."""
    from gpuplan.output.objdiff import tree_objects
    from gpuplan.report.disruption import disruptions_of

    change = CAPI.replace("sharing: {mode: time-slicing, replicas: 4,", "sharing: {mode: time-slicing, replicas: 2,", 1)
    before = _build(tmp_path, CAPI)
    after = _build(tmp_path, change)
    old = _template_label(before, "provisioning/capi/notebooks-l40s.yaml", "notebooks-l40s", DEVICE_PLUGIN_CONFIG_LABEL)
    ds = disruptions_of(tree_objects(before.files), tree_objects(after.files))
    [d] = [d for d in ds if d.subject.startswith("MachineDeployment gpuplan-notebooks-l40s")]
    assert d.severity == "replace" and f"{DEVICE_PLUGIN_CONFIG_LABEL}={old}" in d.message


def test_verify_cluster_accepts_an_old_capi_node_under_a_kept_name(tmp_path):
    """A machine that joined before the change still carries the old name, which the tree keeps:
    `verify-cluster --tree` does not call it drifted (GP872); without the tree it would."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli

    before = _build(tmp_path, CAPI)
    _build(tmp_path, CAPI.replace("sharing: {mode: time-slicing, replicas: 4,", "sharing: {mode: time-slicing, "
                                  "replicas: 2,", 1))
    old = _template_label(before, "provisioning/capi/notebooks-l40s.yaml", "notebooks-l40s", DEVICE_PLUGIN_CONFIG_LABEL)
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "l40s-0", "labels": {"gpuplan.dev/pool": "notebooks-l40s",
                                                      DEVICE_PLUGIN_CONFIG_LABEL: old}},
            "spec": {}, "status": {}}
    live = tmp_path / "live.json"
    live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}), encoding="utf-8")

    def gp872(tree: str) -> list[dict]:
        r = CliRunner().invoke(cli, ["verify-cluster", str(tmp_path / "fleet.yaml"), "--live", str(live),
                                     "--tree", tree, "--format", "json"], catch_exceptions=False)
        return [d for d in json.loads(r.stdout)["diagnostics"]
                if d["code"] == "GP872" and DEVICE_PLUGIN_CONFIG_LABEL in d["message"]]

    assert gp872(str(tmp_path / "generated")) == []
    assert gp872(str(tmp_path / "no-such-tree"))


def test_a_hand_edited_old_node_group_template_keeps_nothing(tmp_path):
    """The old tree is as hostile as any pull request: a KubeadmConfigTemplate edited into nonsense
    and one that names a config gpuplan never wrote make the build keep nothing, and fail nowhere."""
    change = CAPI.replace("sharing: {mode: time-slicing, replicas: 4,", "sharing: {mode: time-slicing, replicas: 2,", 1)
    _build(tmp_path, CAPI)
    path = tmp_path / "generated" / "provisioning" / "capi" / "notebooks-l40s.yaml"
    path.write_text("kind: KubeadmConfigTemplate\nmetadata: 7\nspec: {template: {spec: {joinConfiguration: "
                    "{nodeRegistration: {kubeletExtraArgs: [{name: node-labels, value: 5}], taints: [1]}}}}}\n"
                    "---\nkind: KubeadmConfigTemplate\nspec: {template: {spec: {joinConfiguration: {nodeRegistration: "
                    "{kubeletExtraArgs: [{name: node-labels, value: 'gpuplan.dev/pool=notebooks-l40s,"
                    "nvidia.com/device-plugin.config=notebooks-l40s-00000000'}]}}}}}\n", encoding="utf-8")
    after = _build(tmp_path, change)
    assert _kept(after) == {}
    assert "notebooks-l40s-00000000" not in one(after, CM)["data"]
