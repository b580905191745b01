"""Node labels: NodeFeatureRules for static pools, one label set shared with Karpenter."""

from __future__ import annotations

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.identity import pool_node_labels


def _rule(c, pool):
    nfr = one(c, f"pools/{pool}/node-labels.yaml")
    assert nfr["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1" and nfr["kind"] == "NodeFeatureRule"
    assert "namespace" not in nfr["metadata"], "NodeFeatureRule is cluster-scoped"
    [rule] = nfr["spec"]["rules"]
    return rule


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_every_static_pool_has_a_rule_matching_its_nodes(examples, example):
    c = examples[example]
    plugin = one(c, "gpu-operator/device-plugin-config.yaml")["data"]
    mig = yaml.safe_load(one(c, "gpu-operator/mig-parted-config.yaml")["data"]["config.yaml"])["mig-configs"]
    for pv in c.resolved.pools:
        path = f"pools/{pv.name}/node-labels.yaml"
        if not pv.pool.is_static:
            assert path not in c.files
            continue
        rule = _rule(c, pv.name)
        assert rule["matchFeatures"] == [{
            "feature": "system.name",
            "matchExpressions": {"nodename": {"op": "In", "value": list(pv.pool.nodes)}},
        }]
        labels = rule["labels"]
        assert labels == pool_node_labels(c.resolved, pv)
        assert labels["gpuplan.dev/pool"] == pv.name
        assert labels["nvidia.com/device-plugin.config"] in plugin
        if "nvidia.com/mig.config" in labels:
            assert labels["nvidia.com/mig.config"] in mig
        want = [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v is not None}
                for t in pv.pool.taints or ()]
        want.append({"key": "gpuplan.dev/pool", "value": pv.name, "effect": "NoSchedule"})  # the binding taint
        assert rule.get("taints", []) == want
    values = yaml.safe_load(c.files["gpu-operator/values.yaml"])
    # nfd-master ignores NodeFeatureRule taints unless started with -enable-taints
    # (node-feature-discovery@v0.19.0 pkg/nfd-master/nfd-master.go:965)
    assert values["node-feature-discovery"]["master"]["enableTaints"] is True


def test_mig_config_label_choice(examples):
    a = examples["argocd"]
    assert _rule(a, "infer-a100")["labels"]["nvidia.com/mig.config"].startswith("gpuplan-infer-a100-")
    # non-MIG pools of MIG-capable GPUs are held at all-disabled
    assert _rule(a, "train-a100")["labels"]["nvidia.com/mig.config"] == "all-disabled"
    assert _rule(a, "dev-a100")["labels"]["nvidia.com/mig.config"] == "all-disabled"
    # GPUs without MIG get no label: mig-manager does not run there
    assert "nvidia.com/mig.config" not in _rule(examples["flux"], "interactive-l40s")["labels"]


def test_pool_labels_join_but_never_override(build):
    c = build(fleet("""\
  pools:
    - name: p
      gpu: L40S
      gpusPerNode: 2
      nodes: [n1, n2]
      labels:
        gpuplan.dev/pool: hijack
        example.com/rack: r1
        nvidia.com/device-plugin.config: other
"""))
    labels = _rule(c, "p")["labels"]
    assert labels == {
        "gpuplan.dev/pool": "p",
        "nvidia.com/device-plugin.config": labels["nvidia.com/device-plugin.config"],
        "example.com/rack": "r1",
    }
    assert labels["nvidia.com/device-plugin.config"].startswith("p-")


def _nfd_master(node: dict, rules: list[dict], enable_taints: bool) -> dict:
    """nfd-master's taint handling for one node (node-feature-discovery@v0.19.0
    pkg/nfd-master/nfd-master.go:963-968, 986-1056): with -enable-taints, the
    taints of matching rules are added, and taints it added before (recorded in
    the nfd.node.kubernetes.io/taints annotation) that no rule gives any more
    are removed; other taints are left alone."""
    ann = "nfd.node.kubernetes.io/taints"
    want = []
    for r in rules:
        match = r["matchFeatures"][0]["matchExpressions"]["nodename"]["value"]
        if node["name"] in match and enable_taints:
            want += [(t["key"], t.get("value", ""), t["effect"]) for t in r.get("taints", [])]
    owned = set(node.get(ann, []))
    taints = [t for t in node["taints"] if t not in owned or t in want]
    taints += [t for t in want if t not in taints]
    return {"name": node["name"], "taints": taints, ann: sorted(set(want) | (owned & set(want)))}


def test_static_pool_taints_follow_the_spec_on_existing_nodes(build):
    """A taint added to a static pool in fleet.yaml reaches nodes that are
    already registered, and a removed one goes away again; kubelet's
    registerWithTaints (what the README said before) only acts at first
    registration, so neither happened."""
    spec = """\
  pools:
    - name: p
      gpu: L40S
      gpusPerNode: 2
      nodes: [n1]
      taints: [{taints}]
"""
    one_taint = build(fleet(spec.replace("{taints}", "{key: nvidia.com/gpu, value: present, effect: NoSchedule}")),
                      "a.yaml")
    two = build(fleet(spec.replace("{taints}", "{key: nvidia.com/gpu, value: present, effect: NoSchedule}, "
                                               "{key: example.com/team, value: ml, effect: PreferNoSchedule}")), "b.yaml")
    node = {"name": "n1", "taints": [("nvidia.com/gpu", "present", "NoSchedule")]}  # registered with it

    def enabled(c):
        return yaml.safe_load(c.files["gpu-operator/values.yaml"])["node-feature-discovery"]["master"]["enableTaints"]

    node = _nfd_master(node, [_rule(one_taint, "p")], enabled(one_taint))
    node = _nfd_master(node, [_rule(two, "p")], enabled(two))
    assert ("example.com/team", "ml", "PreferNoSchedule") in node["taints"]
    node = _nfd_master(node, [_rule(one_taint, "p")], enabled(one_taint))
    assert node["taints"] == [("nvidia.com/gpu", "present", "NoSchedule"), ("gpuplan.dev/pool", "p", "NoSchedule")]
