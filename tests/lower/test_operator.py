"""GPU Operator Helm values and namespace."""

from __future__ import annotations

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.lower.device_plugin import CONFIGMAP_NAME as PLUGIN_CM
from gpuplan.lower.mig_parted import CONFIGMAP_NAME as MIG_CM

VALUES = "gpu-operator/values.yaml"


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_values_point_at_the_generated_configmaps(examples, example):
    c = examples[example]
    v = one(c, VALUES)
    plugin = one(c, "gpu-operator/device-plugin-config.yaml")
    assert v["devicePlugin"]["config"] == {"create": False, "name": PLUGIN_CM, "default": "gpuplan.default"}
    assert v["devicePlugin"]["config"]["default"] in plugin["data"]
    assert v["migManager"]["config"] == {"create": False, "name": MIG_CM, "default": "all-disabled"}
    mig = yaml.safe_load(one(c, "gpu-operator/mig-parted-config.yaml")["data"]["config.yaml"])
    assert v["migManager"]["config"]["default"] in mig["mig-configs"]
    assert v["nfd"] == {"enabled": True}
    assert v["gfd"] == {"enabled": True}
    assert v["dcgmExporter"]["enabled"] is True and v["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    # spec.monitoring (argocd example) adds the stack's release label; without it nothing is added
    extra = set(v["dcgmExporter"]["serviceMonitor"]) - {"enabled"}
    assert extra == ({"additionalLabels", "interval", "relabelings"} if example == "argocd" else set())


def test_driver_and_toolkit_follow_the_spec(examples):
    a = one(examples["argocd"], VALUES)
    assert a["driver"] == {"enabled": True} and a["toolkit"] == {"enabled": True}
    f = one(examples["flux"], VALUES)  # driver: preinstalled, toolkit: managed
    assert f["driver"] == {"enabled": False} and f["toolkit"] == {"enabled": True}


def test_tolerations_cover_every_pool_taint_once_in_order(build):
    c = build(fleet("""\
  pools:
    - name: a
      gpu: L40S
      gpusPerNode: 4
      nodes: [a1]
      taints:
        - {key: z.example.com/gpu, value: "yes", effect: NoExecute}
        - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
    - name: b
      gpu: L40S
      gpusPerNode: 4
      nodes: [b1]
      taints:
        - {key: z.example.com/gpu, value: other, effect: NoExecute}
        - {key: a.example.com/team, effect: PreferNoSchedule}
"""))
    v = one(c, VALUES)
    tol = v["daemonsets"]["tolerations"]
    assert tol == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "a.example.com/team", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "z.example.com/gpu", "operator": "Exists", "effect": "NoExecute"},
    ]
    worker = v["node-feature-discovery"]["worker"]["tolerations"]
    assert worker[-3:] == tol, "nfd-worker must run on every GPU node for the NodeFeatureRules to match"
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"} in worker


def test_karpenter_pool_default_taint_is_tolerated(examples):
    tol = one(examples["argocd"], VALUES)["daemonsets"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tol


@pytest.mark.parametrize(("example", "path", "listed"), [
    ("argocd", "gpu-operator/namespace.yaml", True),
    ("flux", "delivery/gpu-operator/namespace.yaml", False),
])
def test_operator_namespace(examples, example, path, listed):
    c = examples[example]
    ns = one(c, path)
    assert ns["kind"] == "Namespace" and ns["metadata"]["name"] == "gpu-operator"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    root = one(c, "kustomization.yaml")["resources"]
    assert (path in root) is listed
