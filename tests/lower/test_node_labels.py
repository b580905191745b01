"""Node labels: NodeFeatureRules for static pools, one label set shared with Karpenter."""

from __future__ import annotations

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.lower.node_labels import pool_node_labels


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
        assert "taints" not in rule, "taints through NFD need nfd-master --enable-taints"


def test_mig_config_label_choice(examples):
    a = examples["argocd"]
    assert _rule(a, "infer-a100")["labels"]["nvidia.com/mig.config"] == "gpuplan-infer-a100"
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
        "nvidia.com/device-plugin.config": "p",
        "example.com/rack": "r1",
    }
