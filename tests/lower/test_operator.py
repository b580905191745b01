"""GPU Operator Helm values and namespace."""

from __future__ import annotations

import pytest
import yaml
from tests.outputkit import fleet, one

from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP as PLUGIN_CM
from gpuplan.identity import MIG_PARTED_CONFIGMAP as MIG_CM

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
    a = one(examples["argocd"], VALUES)  # driver managed 595.91.07, toolkit preinstalled (Karpenter AMIs)
    assert a["driver"] == {"enabled": True, "version": "595.91.07",
                           "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}}
    assert a["toolkit"] == {"enabled": False} and a["cdi"] == {"enabled": False}
    f = one(examples["flux"], VALUES)  # driver: preinstalled, toolkit: managed
    assert f["driver"] == {"enabled": False} and f["toolkit"] == {"enabled": True} and f["cdi"] == {"enabled": True}


def _device_plugin_env(values: dict) -> dict[str, str]:
    """The env the GPU Operator gives the device plugin container
    (NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:2106-2110 and
    1527-1535): with CDI on, NVIDIA_CDI_HOOK_PATH under the toolkit's install
    dir when the operator's toolkit is enabled. Chart defaults: cdi.enabled and
    toolkit.enabled true, installDir /usr/local/nvidia."""
    env = {}
    if values.get("cdi", {}).get("enabled", True):
        env["CDI_ENABLED"] = "true"
        if values.get("toolkit", {}).get("enabled", True):
            env["NVIDIA_CDI_HOOK_PATH"] = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    return env


def _node_has_operator_toolkit(values: dict, node_labels: dict[str, str]) -> bool:
    """The toolkit DaemonSet runs where toolkit.enabled and the node's
    nvidia.com/gpu.deploy.container-toolkit / operands labels are not "false"."""
    return (values.get("toolkit", {}).get("enabled", True)
            and node_labels.get("nvidia.com/gpu.deploy.container-toolkit") != "false"
            and node_labels.get("nvidia.com/gpu.deploy.operands") != "false")


@pytest.mark.parametrize("example", ["argocd", "flux", "aws"])
def test_cdi_hook_exists_on_every_node(examples, example):
    """Every node whose device plugin is told an operator CDI hook path has the
    operator's toolkit (8bd6184: AL2023 Karpenter nodes opted out of the toolkit
    while CDI pointed the plugin at it, so GPU pods could not start)."""
    import yaml as _yaml

    from tests.outputkit import REPO, compile_ok

    c = examples[example] if example in examples else compile_ok(REPO / "examples" / "aws-burst.yaml")
    values = one(c, VALUES)
    env = _device_plugin_env(values)
    nodes = []
    for path, data in c.files.items():
        if path.endswith("/nodepool.yaml"):
            nodes.append(_yaml.safe_load_all(data).__next__()["spec"]["template"]["metadata"]["labels"])
        elif path.endswith("/node-labels.yaml"):
            nodes.append(next(_yaml.safe_load_all(data))["spec"]["rules"][0]["labels"])
    assert nodes
    for labels in nodes:
        if labels.get("nvidia.com/gpu.deploy.operands") == "false":
            continue  # no operator device plugin there (Bottlerocket)
        if "NVIDIA_CDI_HOOK_PATH" in env:
            assert _node_has_operator_toolkit(values, labels), labels


def test_mixed_toolkit_is_refused(tmp_path):
    from gpuplan.compiler import check_fleet

    spec = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: t}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {repoURL: "https://git.example.com/t.git"}
    aws: {clusterName: t, nodeRole: r}
    gpuOperator: {toolkit: TOOLKIT}
  pools:
    - {name: s, gpu: L40S, gpusPerNode: 4, nodes: [n1]}
    - name: k
      gpu: H100-SXM5-80GB
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 8, amiVersion: v20260801}
"""
    for toolkit, want in (("managed", ["GP640"]), ("preinstalled", [])):
        p = tmp_path / f"{toolkit}.yaml"
        p.write_text(spec.replace("TOOLKIT", toolkit))
        got = [d for d in check_fleet(p).diagnostics if d.code.startswith("GP64")]
        assert [d.code for d in got] == want
        if want:
            assert (got[0].line, got[0].col) == (9, 28)  # the toolkit value
    p = tmp_path / "unset.yaml"
    p.write_text(spec.replace("    gpuOperator: {toolkit: TOOLKIT}\n", ""))
    assert [d.code for d in check_fleet(p).diagnostics if d.code.startswith("GP64")] == ["GP640"]
    p.write_text(spec.replace("    gpuOperator: {toolkit: TOOLKIT}\n", "").split("    - {name: s")[0]
                 + spec.split("nodes: [n1]}\n")[1])
    assert [d.code for d in check_fleet(p).diagnostics if d.code.startswith("GP64")] == []  # Karpenter only


@pytest.mark.parametrize(("version", "want"), [
    ("535.104.05", {"version": "535.104.05"}),
    ("550.54", {"version": "550.54"}),
    ("R535", {"version": "535", "usePrecompiled": True}),
])
def test_driver_version_forms(build, version, want):
    c = build(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}\n")
              .replace("    gitops:", f"    gpuOperator: {{driverVersion: \"{version}\"}}\n    gitops:"))
    d = one(c, VALUES)["driver"]
    assert {k: d[k] for k in want} == want and d["enabled"] is True
    assert "upgradePolicy" in d


@pytest.mark.parametrize("version", ["latest", "535", "R53", "535.104.05.1", "v535.104.05", ""])
def test_bad_driver_version_is_a_diagnostic_at_its_line(tmp_path, version):
    from gpuplan.compiler import compile_fleet

    p = tmp_path / "f.yaml"
    p.write_text(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}\n")
                 .replace("    gitops:", f"    gpuOperator:\n      driverVersion: \"{version}\"\n    gitops:"))
    c = compile_fleet(p)
    [d] = [d for d in c.diagnostics if d.is_error]
    assert d.code == "GP641" and d.path == "spec.cluster.gpuOperator.driverVersion"
    line = p.read_text().splitlines().index(f'      driverVersion: "{version}"') + 1
    assert (d.line, d.col) == (line, 22) and d.hint
    assert not c.files


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
        {"key": "gpuplan.dev/pool", "operator": "Exists", "effect": "NoSchedule"},  # every pool's binding taint
        {"key": "z.example.com/gpu", "operator": "Exists", "effect": "NoExecute"},
    ]
    worker = v["node-feature-discovery"]["worker"]["tolerations"]
    assert worker[-4:] == tol, "nfd-worker must run on every GPU node for the NodeFeatureRules to match"
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


def _codes(tmp_path, gpu_operator: str) -> list[str]:
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}\n")
                 .replace("    gitops:", f"    gpuOperator: {gpu_operator}\n    gitops:"))
    return sorted(d.code for d in check_fleet(p).diagnostics if d.code.startswith("GP64"))


def test_driver_pin_warnings(tmp_path):
    # a chart whose default driver gpuplan does not know: nothing pinned, say so
    assert _codes(tmp_path, "{chartVersion: v26.9.0}") == ["GP642"]
    assert _codes(tmp_path, "{chartVersion: v26.9.0, driverVersion: 595.91.07}") == []
    # the known chart: its default is written out, nothing to say
    assert _codes(tmp_path, "{chartVersion: v26.7.0}") == []
    # with a preinstalled driver the version only informs the MIG checks, and is still validated
    assert _codes(tmp_path, "{driver: preinstalled, driverVersion: 595.91.07}") == []
    assert _codes(tmp_path, "{driver: preinstalled, driverVersion: latest}") == ["GP641"]


def test_unknown_chart_leaves_the_driver_to_the_chart(build):
    c = build(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}\n")
              .replace("    gitops:", "    gpuOperator: {chartVersion: v26.9.0}\n    gitops:"))
    assert "version" not in one(c, VALUES)["driver"]


def test_latest_driver_with_a_mig_pool_is_a_diagnostic_not_a_crash(tmp_path):
    """The MIG checks read driverVersion too (profiles per driver branch); an
    unreadable one is reported once, at its line, and never reaches them."""
    from gpuplan.compiler import compile_fleet
    from tests.outputkit import REPO

    text = (REPO / "examples" / "fleet.yaml").read_text()
    assert 'driverVersion: "595.91.07"' in text
    p = tmp_path / "fleet.yaml"
    p.write_text(text.replace('driverVersion: "595.91.07"', "driverVersion: latest"))
    c = compile_fleet(p)
    assert [d.code for d in c.diagnostics if d.is_error] == ["GP641"] and not c.files
