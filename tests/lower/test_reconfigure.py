"""A changed pool config reaches the pool's existing nodes.

The device plugin's config-manager and mig-manager act only when a node's label
*value* changes; a ConfigMap whose content changes under the same name reaches
no node. These tests read only the generated files — the NodeFeatureRule that
labels the nodes and the ConfigMaps the operands read — and model what the two
controllers do with them."""

from __future__ import annotations

import yaml
from tests.outputkit import fleet, one

PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MIG_LABEL = "nvidia.com/mig.config"


def _node_labels(c, pool: str) -> dict[str, str]:
    return one(c, f"pools/{pool}/node-labels.yaml")["spec"]["rules"][0]["labels"]


def _config_manager(old_label: str | None, new_label: str | None, files: dict[str, str]) -> str | None:
    """config-manager on a node update (NVIDIA/k8s-device-plugin@v0.20.0
    cmd/config-manager/main.go:272-278, 335-358): it switches only when the
    label value changed, to the file of that name, and fails on a name the
    ConfigMap does not have. Returns the config it now runs (None: it kept the
    one it had)."""
    if new_label == old_label:
        return None
    assert new_label in files, f"specified config {new_label} does not exist"
    return files[new_label]


def _mig_manager(old_label: str | None, new_label: str | None, configs: dict) -> list | None:
    """mig-manager on a node update (NVIDIA/mig-parted@v0.15.0
    cmd/nvidia-mig-manager/main.go:572-577): it applies the config named by
    the label only when the value changed. Returns the entries it applies."""
    if new_label == old_label:
        return None
    assert new_label in configs, f"mig-parted config {new_label} does not exist"
    return configs[new_label]


def _pool(sharing: str, gpu: str = "L40S") -> str:
    return fleet(f"""\
  pools:
    - name: p
      gpu: {gpu}
      gpusPerNode: 2
      nodes: [n1]
      sharing: {sharing}
""")


def test_changed_sharing_reaches_existing_nodes(build):
    old = build(_pool("{mode: time-slicing, replicas: 2}"), "old.yaml")
    new = build(_pool("{mode: time-slicing, replicas: 4}"), "new.yaml")
    data = one(new, "gpu-operator/device-plugin-config.yaml")["data"]
    running = _config_manager(_node_labels(old, "p")[PLUGIN_LABEL], _node_labels(new, "p")[PLUGIN_LABEL], data)
    assert running is not None, "the node keeps its old sharing config"
    assert yaml.safe_load(running)["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    # an unchanged config keeps its name: nodes are not reconfigured for nothing
    again = build(_pool("{mode: time-slicing, replicas: 2}"), "again.yaml")
    assert _node_labels(again, "p") == _node_labels(old, "p")


def test_changed_layout_reaches_existing_nodes(build):
    def tree(layout: str, name: str):
        return build(_pool(f"{{mode: mig, layout: {layout}}}", "A100-SXM4-80GB"), name)

    def configs(c) -> dict:
        return yaml.safe_load(one(c, "gpu-operator/mig-parted-config.yaml")["data"]["config.yaml"])["mig-configs"]

    old, new = tree("{3g.40gb: 2}", "a.yaml"), tree("{1g.10gb: 7}", "b.yaml")
    applied = _mig_manager(_node_labels(old, "p")[MIG_LABEL], _node_labels(new, "p")[MIG_LABEL], configs(new))
    assert applied is not None, "the nodes keep their old MIG layout"
    assert applied[0]["mig-devices"] == {"1g.10gb": 7}
    same = tree("{3g.40gb: 2}", "c.yaml")
    assert _mig_manager(_node_labels(old, "p")[MIG_LABEL], _node_labels(same, "p")[MIG_LABEL], configs(same)) is None
