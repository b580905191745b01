"""Device-plugin config names across two builds (#27): a pool's name depends on that
pool alone, and the ConfigMap keeps every name a node of the old tree may still carry.

Each test builds a tree, changes the spec, builds again over that tree (as
`gpuplan build` does) and asserts, per pool, which name its nodes carry after the
change and whether the new ConfigMap still has it: static nodes are relabelled by
nfd-master (they carry the new name), Karpenter nodes keep the label they were
launched with until replaced (they carry old and new names alike)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tests.outputkit import compile_ok, docs, one

from gpuplan.compiler import Options, compile_fleet
from gpuplan.identity import DEVICE_PLUGIN_CONFIG_LABEL, KEPT_CONFIGS_ANNOTATION, POOL_LABEL, content_name
from gpuplan.output.tree import write_tree

REPO = Path(__file__).resolve().parents[2]
AWS = (REPO / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
CM = "gpu-operator/device-plugin-config.yaml"

def _l4_pool(name: str, sharing: str) -> str:
    """A Karpenter pool of L4 nodes (with a NodeOverlay: GP615), as spec text under `pools:`."""
    return f"""
    - name: {name}
      gpu: L4
      karpenter:
        instanceTypes: [g6.12xlarge]
        capacityTypes: [on-demand]
        maxGPUs: 8
        amiFamily: AL2023
        amiVersion: v20260714
        nodeOverlay: true
      sharing: {sharing}
"""


MPS_POOL = _l4_pool("notebooks-l4", "{mode: mps, replicas: 4}") + "\n  tiers:"


def _build(tmp_path: Path, text: str, *, retire: frozenset[str] = frozenset()):
    """Build ``text`` over the tree in tmp_path/generated, write it, return the result."""
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


def _nodepool_names(c) -> dict[str, str]:
    """Karpenter pool -> the config name its NodePool gives new nodes (pools whose nodes
    run the operator's device plugin: a Bottlerocket NodePool carries no name)."""
    out = {}
    for path in c.files:
        if path.endswith("/nodepool.yaml"):
            labels = one(c, path)["spec"]["template"]["metadata"]["labels"]
            if DEVICE_PLUGIN_CONFIG_LABEL in labels:
                out[labels[POOL_LABEL]] = labels[DEVICE_PLUGIN_CONFIG_LABEL]
    return out


def _static_names(c) -> dict[str, str]:
    """Static pool -> the config name its NodeFeatureRule puts on its nodes."""
    out = {}
    for path in c.files:
        if path.endswith("/node-labels.yaml"):
            for d in docs(c.files[path]):
                if d["kind"] == "NodeFeatureRule":
                    for rule in d["spec"]["rules"]:
                        labels = rule.get("labels", {})
                        if DEVICE_PLUGIN_CONFIG_LABEL in labels:
                            out[labels[POOL_LABEL]] = labels[DEVICE_PLUGIN_CONFIG_LABEL]
                        break  # the pool's own rule (the others hold nodes of a rollout)
    return out


def _keys(c) -> set[str]:
    return set(one(c, CM)["data"])


def _carried(before, after) -> dict[str, set[str]]:
    """Pool -> the config names its nodes may carry once `after` is applied over `before`."""
    out: dict[str, set[str]] = {}
    old_k, new_k = _nodepool_names(before), _nodepool_names(after)
    for pool, name in new_k.items():
        out[pool] = {name} | ({old_k[pool]} if pool in old_k else set())
    for pool, name in _static_names(after).items():
        out[pool] = {name}
    return out


def test_adding_an_mps_pool_renames_no_other_pool(tmp_path):
    before = _build(tmp_path, AWS)
    after = _build(tmp_path, AWS.replace("\n  tiers:", MPS_POOL, 1))
    # the change does flip the cluster-wide strategy (mixed + MPS: each node decides)...
    assert one(before, "gpu-operator/values.yaml")["mig"]["strategy"] == "mixed"
    assert one(after, "gpu-operator/values.yaml")["mig"]["strategy"] == ""
    # ...yet no existing pool's nodes are relabelled or drift, and nothing is kept
    old, new = _nodepool_names(before), _nodepool_names(after)
    assert {p: new[p] for p in old} == old
    for pool in old:  # the template is what Karpenter hashes for drift
        nodepool = f"pools/{pool}/nodepool.yaml"
        assert one(before, nodepool)["spec"]["template"] == one(after, nodepool)["spec"]["template"]
    assert KEPT_CONFIGS_ANNOTATION not in one(after, CM)["metadata"].get("annotations", {})
    for pool, names in _carried(before, after).items():
        assert names <= _keys(after), pool


# aws-burst plus a time-sliced Karpenter pool for batch jobs: its budgets block drift
SLICED = AWS.replace("\n  tiers:", _l4_pool("batch-l4", "{mode: time-slicing, replicas: 2}") + """
  tiers:
    - name: batch
      pool: batch-l4
      workload: batch
      priority: 1000""", 1)


def test_a_changed_karpenter_config_keeps_the_old_name_until_retired(tmp_path):
    before = _build(tmp_path, SLICED)
    after = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    old, new = _nodepool_names(before)["batch-l4"], _nodepool_names(after)["batch-l4"]
    assert old != new
    assert one(after, "pools/batch-l4/nodepool.yaml")["spec"]["disruption"]["budgets"][0] == {
        "nodes": "0", "reasons": ["Drifted"]}
    # batch-l4 blocks drift: its nodes keep `old` until they expire, so the ConfigMap keeps it, verbatim
    assert {old, new} <= _keys(after)
    assert one(after, CM)["data"][old] == one(before, CM)["data"][old]
    assert json.loads(one(after, CM)["metadata"]["annotations"][KEPT_CONFIGS_ANNOTATION]) == {old: "batch-l4"}
    for pool, names in _carried(before, after).items():
        assert names <= _keys(after), pool
    # a build over that tree keeps it again: `gpuplan check` stays clean
    again = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    assert again.files[CM] == after.files[CM]
    # a third layout keeps both older names
    third = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 8}", 1))
    assert {old, new, _nodepool_names(third)["batch-l4"]} <= _keys(third)
    # retired by hand: gone, and not read back
    retired = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 8}", 1), retire=frozenset({old}))
    assert old not in _keys(retired) and new in _keys(retired)
    assert old not in _keys(_build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 8}", 1)))


def test_a_removed_pool_takes_its_kept_names_along(tmp_path):
    _build(tmp_path, SLICED)
    after = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    assert one(after, CM)["metadata"]["annotations"].get(KEPT_CONFIGS_ANNOTATION)
    spec = yaml.safe_load(SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    spec["spec"]["pools"] = [p for p in spec["spec"]["pools"] if p["name"] != "batch-l4"]
    spec["spec"]["tiers"] = [t for t in spec["spec"]["tiers"] if t["pool"] != "batch-l4"]
    gone = _build(tmp_path, yaml.safe_dump(spec, sort_keys=False))
    assert not any(k.startswith("batch-l4") for k in _keys(gone))
    assert KEPT_CONFIGS_ANNOTATION not in one(gone, CM)["metadata"].get("annotations", {})


def test_a_bottlerocket_pool_carries_no_config_name(tmp_path):
    """Bottlerocket runs its own device plugin, configured by the userData
    (settings.kubelet-device-plugins.nvidia), and no operand of the GPU Operator
    (``nvidia.com/gpu.deploy.operands: "false"``, NVIDIA/gpu-operator@v26.7.0
    controllers/state_manager.go:457-463): nothing there reads
    ``nvidia.com/device-plugin.config``. A change to the pool's sharing reaches its nodes
    through the userData alone; the NodePool's template, which Karpenter hashes for drift
    (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/nodeclaim/disruption/drift.go:154-167),
    stays as it was, and the ConfigMap holds no config for the pool, before or after."""
    sliced = AWS.replace("      sharing: {mode: exclusive}\n      topology: {policy: single-numa-node",
                         "      sharing: {mode: time-slicing, replicas: 2, renameByDefault: false}\n"
                         "      topology: {policy: single-numa-node", 1)
    assert sliced != AWS
    before = _build(tmp_path, sliced)
    after = _build(tmp_path, sliced.replace("replicas: 2, renameByDefault", "replicas: 4, renameByDefault", 1))
    nodepool, nodeclass = "pools/infer-l40s/nodepool.yaml", "pools/infer-l40s/ec2nodeclass.yaml"
    assert DEVICE_PLUGIN_CONFIG_LABEL not in one(after, nodepool)["spec"]["template"]["metadata"]["labels"]
    assert one(before, nodepool)["spec"]["template"] == one(after, nodepool)["spec"]["template"]
    assert one(before, nodeclass)["spec"]["userData"] != one(after, nodeclass)["spec"]["userData"]
    for c in (before, after):
        assert not any(k.startswith("infer-l40s") for k in _keys(c))
        assert KEPT_CONFIGS_ANNOTATION not in one(c, CM)["metadata"].get("annotations", {})


def test_static_pools_keep_the_name_of_their_last_change(tmp_path):
    """nfd-master relabels a static pool's nodes when the new NodeFeatureRule is applied (Argo CD
    wave 1, after the ConfigMap's -1): the build keeps the name the old rule put on them, building
    the same spec again keeps it (a fixed point), and the pool's next change replaces it.
    flux-onprem is a Flux tree, where the two apply together: keeping is harmless there. The pool
    takes each change on all its nodes at once (`rollout.maxUnavailable: 100%`; a rollout a step at a
    time keeps the names its held nodes carry: tests/lower/test_static_rollout.py)."""
    text = (REPO / "examples" / "flux-onprem.yaml").read_text(encoding="utf-8")
    line = "      sharing: {mode: mps, replicas: 8, renameByDefault: true}\n"
    assert line in text
    text = text.replace(line, line + "      rollout: {maxUnavailable: 100%}\n", 1)
    before = _build(tmp_path, text)
    after = _build(tmp_path, text.replace("replicas: 8", "replicas: 6", 1))
    changed = {p for p, n in _static_names(after).items() if _static_names(before)[p] != n}
    assert changed
    fresh = {"gpuplan.default", *_static_names(after).values(), *_nodepool_names(after).values()}
    kept = {_static_names(before)[p] for p in changed}
    assert _keys(after) == fresh | kept
    for name in kept:
        assert one(after, CM)["data"][name] == one(before, CM)["data"][name]
    # the same spec built over that tree: the same tree, so `gpuplan check` agrees with the build
    again = _build(tmp_path, text.replace("replicas: 8", "replicas: 6", 1))
    assert _keys(again) == fresh | kept and one(again, CM) == one(after, CM)
    # the next change replaces it: at most one old name per static pool
    nxt = _build(tmp_path, text.replace("replicas: 8", "replicas: 4", 1))
    assert not kept & _keys(nxt)
    # retired by hand, it goes at once
    _build(tmp_path, text)
    retired = _build(tmp_path, text.replace("replicas: 8", "replicas: 6", 1), retire=frozenset(kept))
    assert _keys(retired) == fresh


def test_a_hand_written_kept_name_is_not_carried(tmp_path):
    """The annotation is read back from a committed tree: only `<pool>-<8 hex>`
    names of a Karpenter pool that the old ConfigMap holds are kept, and only with
    the body whose content hash they are (a name another body was made from, or any
    body under a well-shaped name, is a hand edit)."""
    before = _build(tmp_path, SLICED)
    cm_path = tmp_path / "generated" / CM
    cm = yaml.safe_load(cm_path.read_text(encoding="utf-8"))
    cm["data"]["evil"] = "version: v1\n"
    cm["data"]["batch-l4-zzzzzzzz"] = "version: v1\n"
    cm["data"]["infer-l40s-00000000"] = "version: v1\n"
    # a real name (the hash of a sharing config) over another body: all GPUs shared 64 ways
    real = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    forged = content_name("batch-l4", real)
    cm["data"][forged] = yaml.safe_dump({**real, "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 64}]}}})
    cm["metadata"].setdefault("annotations", {})[KEPT_CONFIGS_ANNOTATION] = json.dumps(
        {"evil": "batch-l4", "batch-l4-zzzzzzzz": "batch-l4", "mig-a100-00000000": "mig-a100",
         "infer-l40s-00000000": "infer-l40s", forged: "batch-l4"})
    cm_path.write_text(yaml.safe_dump(cm), encoding="utf-8")
    after = _build(tmp_path, SLICED)
    assert _keys(after) == _keys(before)


def test_the_report_says_the_old_name_is_kept(tmp_path):
    from gpuplan.report.disruption import disruptions

    before = _build(tmp_path, SLICED)
    after = _build(tmp_path, SLICED.replace("replicas: 2}", "replicas: 4}", 1))
    [d] = [d for d in disruptions(before.files, after.files) if d.subject == "NodePool batch-l4"]
    old = _nodepool_names(before)["batch-l4"]
    assert f"old nodes keep nvidia.com/device-plugin.config={old}," in d.message
    assert "finds no config of its old name" not in d.message


def test_plan_base_builds_the_new_tree_over_the_base(tmp_path):
    """`gpuplan plan --base` renders both specs in memory: the new one keeps the
    base's names as a build over the base's tree would."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli

    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(SLICED, encoding="utf-8")
    new.write_text(SLICED.replace("replicas: 2}", "replicas: 4}", 1), encoding="utf-8")
    r = CliRunner().invoke(cli, ["plan", str(new), "--base", str(old), "--format", "json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    [d] = [d for d in json.loads(r.stdout)["disruptive"] if d["subject"] == "NodePool batch-l4"]
    assert "which the device-plugin and mig-parted ConfigMaps keep for them" in d["message"]


MIG_CM = "gpu-operator/mig-parted-config.yaml"


def _mig_configs(c) -> dict:
    return yaml.safe_load(one(c, MIG_CM)["data"]["config.yaml"])["mig-configs"]


def _mig_label(c, path: str) -> str:
    return one(c, path)["spec"]["template"]["metadata"]["labels"]["nvidia.com/mig.config"]


def test_a_changed_karpenter_mig_layout_keeps_the_old_mig_config(tmp_path):
    layout = "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}"
    assert AWS.count(layout) == 1
    before = _build(tmp_path, AWS)
    after = _build(tmp_path, AWS.replace(layout, "layout: {3g.40gb: 2}", 1).replace(
        "    - name: serving-medium\n      pool: mig-a100\n      profile: 2g.20gb\n", "    - name: serving-medium\n"
        "      pool: mig-a100\n      profile: 3g.40gb\n", 1).replace(
        "    - name: serving-small\n      pool: mig-a100\n      profile: 1g.10gb\n", "    - name: serving-small\n"
        "      pool: mig-a100\n      profile: 3g.40gb\n", 1))
    old, new = _mig_label(before, "pools/mig-a100/nodepool.yaml"), _mig_label(after, "pools/mig-a100/nodepool.yaml")
    assert old != new
    # old nodes keep `old` until replaced: mig-manager, restarted there, finds its layout and leaves the GPUs
    assert _mig_configs(after)[old] == _mig_configs(before)[old]
    assert new in _mig_configs(after)
    ann = one(after, MIG_CM)["metadata"]["annotations"][KEPT_CONFIGS_ANNOTATION]
    assert json.loads(ann) == {old: "mig-a100"}
    retired = compile_fleet(tmp_path / "fleet.yaml", out_dir=tmp_path / "generated",
                            options=Options(retire_configs=frozenset({old})))
    assert old not in _mig_configs(retired)


def test_a_static_pool_carries_at_most_one_old_name(tmp_path):
    """The annotation carries a static pool's last replaced name from build to build (one per pool
    and label, as gpuplan writes it); a tree whose annotation lists several for one static pool was
    edited by hand, and none of them is kept."""
    text = (REPO / "examples" / "flux-onprem.yaml").read_text(encoding="utf-8")
    before = _build(tmp_path, text)
    names = set(_mig_configs(before))
    assert len(names) > 1
    cm = yaml.safe_load((tmp_path / "generated" / MIG_CM).read_text(encoding="utf-8"))
    cfgs = yaml.safe_load(cm["data"]["config.yaml"])
    stale = next(n for n in cfgs["mig-configs"] if n != "all-disabled")
    pool = stale[len("gpuplan-"):-9]
    # two old layouts, named as a build names them (the hash of their entries)
    bodies = [[{**e, "devices": [i]} for e in cfgs["mig-configs"][stale]] for i in (0, 1)]
    extra = [content_name(stale[:-9], b) for b in bodies]
    for n, b in zip(extra, bodies):
        cfgs["mig-configs"][n] = b
    cm["data"]["config.yaml"] = yaml.safe_dump(cfgs)
    cm["metadata"].setdefault("annotations", {})[KEPT_CONFIGS_ANNOTATION] = json.dumps({n: pool for n in extra})
    (tmp_path / "generated" / MIG_CM).write_text(yaml.safe_dump(cm), encoding="utf-8")
    assert set(_mig_configs(_build(tmp_path, text))) == names
    # one, as a build writes it, is carried
    cm["metadata"]["annotations"][KEPT_CONFIGS_ANNOTATION] = json.dumps({extra[0]: pool})
    (tmp_path / "generated" / MIG_CM).write_text(yaml.safe_dump(cm), encoding="utf-8")
    assert set(_mig_configs(_build(tmp_path, text))) == names | {extra[0]}


def test_a_name_kept_for_static_nodes_is_not_read_back_for_karpenter(tmp_path):
    """A pool that was static in the old tree (its NodeFeatureRule) and is a Karpenter pool now:
    the annotation's entry for it was kept for its static nodes, and no node
    Karpenter launches carries it. Without the old rule the same entry is a Karpenter name."""
    from gpuplan.kept import previous_configs
    from gpuplan.identity import MIG_CONFIG_LABEL, kept_mig_configs

    (tmp_path / "fleet.yaml").write_text(AWS, encoding="utf-8")
    c = compile_ok(tmp_path / "fleet.yaml")
    current = _mig_label(c, "pools/mig-a100/nodepool.yaml")
    cm = one(c, MIG_CM)
    cfgs = yaml.safe_load(cm["data"]["config.yaml"])
    old_layout = [{**e, "devices": [0]} for e in cfgs["mig-configs"][current]]
    stale = content_name(current[:-9], old_layout)
    cfgs["mig-configs"][stale] = old_layout
    cm["data"]["config.yaml"] = yaml.safe_dump(cfgs)
    cm["metadata"].setdefault("annotations", {})[KEPT_CONFIGS_ANNOTATION] = json.dumps({stale: "mig-a100"})
    tree = {**c.files, MIG_CM: yaml.safe_dump(cm).encode()}
    rf = c.resolved
    rf.previous = previous_configs(rf, files=tree)
    assert stale in kept_mig_configs(rf)  # a Karpenter pool's kept name, as the annotation says
    rule = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule",
            "metadata": {"name": "gpuplan-pool-mig-a100"},
            "spec": {"rules": [{"name": "gpuplan pool mig-a100",
                                "labels": {POOL_LABEL: "mig-a100", MIG_CONFIG_LABEL: stale}}]}}
    rf.previous = previous_configs(rf, files={**tree, "pools/mig-a100/node-labels.yaml": yaml.safe_dump(rule).encode()})
    assert stale not in kept_mig_configs(rf) and rf.previous.static_mig_owners == {}


def test_verify_cluster_accepts_a_node_under_a_kept_name(tmp_path):
    """A Karpenter node launched before the change still carries the old config name, which the
    generated tree keeps: `verify-cluster` reads that tree (--tree) and does not call the node
    drifted (GP872); without the tree it would."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli

    before = _build(tmp_path, SLICED)
    changed = SLICED.replace("replicas: 2}", "replicas: 4}", 1)
    _build(tmp_path, changed)
    old = _nodepool_names(before)["batch-l4"]
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "ip-10-0-0-1", "labels": {POOL_LABEL: "batch-l4", DEVICE_PLUGIN_CONFIG_LABEL: old,
                                                           "karpenter.sh/nodepool": "batch-l4"}},
            "spec": {}, "status": {}}
    live = tmp_path / "live.json"
    live.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}), encoding="utf-8")

    def gp872(tree: str) -> list[str]:
        r = CliRunner().invoke(cli, ["verify-cluster", str(tmp_path / "fleet.yaml"), "--live", str(live),
                                     "--tree", tree, "--format", "json"], catch_exceptions=False)
        return [d for d in json.loads(r.stdout)["diagnostics"]
                if d["code"] == "GP872" and DEVICE_PLUGIN_CONFIG_LABEL in d["message"]]

    assert gp872(str(tmp_path / "generated")) == []
    assert gp872(str(tmp_path / "no-such-tree"))  # the old name is drift when nothing keeps it
