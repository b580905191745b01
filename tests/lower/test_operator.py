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
    # static pools beside a Karpenter pool: the driver comes from one NVIDIADriver per static pool
    assert a["driver"] == {"enabled": True, "nvidiaDriverCRD": {"enabled": True, "deployDefaultCR": False}}
    for d in _drivers(examples["argocd"]):
        assert d["spec"]["upgradePolicy"] == {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}
    assert a["toolkit"] == {"enabled": False} and a["cdi"] == {"enabled": False}
    f = one(examples["flux"], VALUES)  # driver: preinstalled, toolkit: managed
    assert f["driver"] == {"enabled": False} and f["toolkit"]["enabled"] is True and f["cdi"] == {"enabled": True}


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
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 8, amiVersion: v20260714}
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
    c = build(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1], os: ubuntu22.04}\n")
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
        - {key: z.example.com/gpu, value: "yes", effect: PreferNoSchedule}
        - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
    - name: b
      gpu: L40S
      gpusPerNode: 4
      nodes: [b1]
      taints:
        - {key: z.example.com/gpu, value: other, effect: NoSchedule}
        - {key: a.example.com/team, effect: PreferNoSchedule}
"""))
    v = one(c, VALUES)
    tol = v["daemonsets"]["tolerations"]
    assert tol == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "a.example.com/team", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "gpuplan.dev/pool", "operator": "Exists", "effect": "NoSchedule"},  # every pool's binding taint
        # one key, two effects: by key, then NoSchedule before PreferNoSchedule (static pools
        # take no NoExecute, GP986)
        {"key": "z.example.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "z.example.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"},
    ]
    worker = v["node-feature-discovery"]["worker"]["tolerations"]
    assert worker[-5:] == tol, "nfd-worker must run on every GPU node for the NodeFeatureRules to match"
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


# --- NVIDIA_VISIBLE_DEVICES is inert for unprivileged pods (issue #26) -----------------


def _plugin_strategy(values: dict) -> str:
    """The device plugin's DEVICE_LIST_STRATEGY as the GPU Operator v26.7.0 sets it: the
    asset's `envvar` (assets/state-device-plugin/0500_daemonset.yaml:77-78), replaced by
    `cdi-annotations,cdi-cri` with CDI on (controllers/object_controls.go:1527-1530), then
    `devicePlugin.env` last (object_controls.go:1620-1624)."""
    strategy = "envvar"
    if values.get("cdi", {}).get("enabled", True):
        strategy = "cdi-annotations,cdi-cri"
    for e in values["devicePlugin"].get("env", []):
        if e["name"] == "DEVICE_LIST_STRATEGY":
            strategy = e["value"]
    return strategy


def _toolkit_env(values: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in values["toolkit"].get("env", [])}


@pytest.mark.parametrize("example", ["argocd", "flux", "aws", "kueue"])
def test_nvidia_visible_devices_is_inert(examples, example):
    """With the plugin's `envvar` strategy and the toolkit's default
    accept-nvidia-visible-devices-envvar-when-unprivileged=true
    (NVIDIA/nvidia-container-toolkit@v1.20.0 api/config/v1/config.go:106,
    internal/config/image/cuda_image.go:279-290) any CUDA image sees every GPU of its node.
    The plugin hands devices over by CDI or volume mounts, and every node's toolkit refuses
    the variable from unprivileged containers: the operator's through toolkit.env, a
    preinstalled one by the README's prerequisite (static nodes) or the pool's userData (AL2023)."""
    from tests.outputkit import REPO, compile_ok

    c = examples.get(example) or compile_ok(REPO / "examples" / f"{'aws-burst' if example == 'aws' else example}.yaml")
    v = one(c, VALUES)
    strategy = _plugin_strategy(v)
    assert strategy in ("volume-mounts", "cdi-annotations,cdi-cri")
    readme = c.files["README.md"].decode()
    if v["toolkit"]["enabled"]:
        assert _toolkit_env(v) == {"ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false",
                                   "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS": "true"}
    else:
        assert strategy == "volume-mounts"
        assert "`accept-nvidia-visible-devices-envvar-when-unprivileged = false`" in readme
        assert "`accept-nvidia-visible-devices-as-volume-mounts = true`" in readme
        assert "default runtime" in readme
    for path, data in c.files.items():
        if not path.endswith("/ec2nodeclass.yaml"):
            continue
        nc = yaml.safe_load(data)
        if nc["spec"]["amiSelectorTerms"][0]["alias"].startswith("al2023@"):
            ud = nc["spec"]["userData"]
            assert ("nvidia-ctk config --in-place --set accept-nvidia-visible-devices-envvar-when-unprivileged=false"
                    " --set accept-nvidia-visible-devices-as-volume-mounts=true") in ud, path



# --- driver upgrades never delete the pods of training/batch pools (issue #28 item 4) ----


def _static_node_labels(c) -> dict[str, dict[str, str]]:
    out = {}
    for path, data in c.files.items():
        if path.endswith("/node-labels.yaml"):
            rule = next(yaml.safe_load_all(data))["spec"]["rules"][0]
            out[rule["labels"]["gpuplan.dev/pool"]] = rule["labels"]
    return out


def _upgrade_deletes_pods(values: dict, node_labels: dict[str, str], drivers: list[dict] = ()) -> bool:
    """Whether the GPU Operator v26.7.0 upgrade controller would delete the GPU pods of a
    node whose driver changes: autoUpgrade on (values.yaml:170), the driver DaemonSet on
    the node, the node not labelled nvidia.com/gpu-driver-upgrade.skip=true
    (k8s-operator-libs pkg/upgrade/common_manager.go:679-681, upgrade_inplace.go:85-88),
    and no waitForCompletion.podSelector (an empty one skips the wait,
    common_manager.go:405-419)."""
    d = values["driver"]
    if d.get("nvidiaDriverCRD", {}).get("enabled"):
        # each NVIDIADriver's own policy (controllers/upgrade_controller.go:199-262)
        [d] = [x["spec"] for x in drivers if _selects(x["spec"]["nodeSelector"], node_labels)]
        d = {"enabled": True, **d}
    if not d["enabled"] or not d.get("upgradePolicy", {}).get("autoUpgrade", True):
        return False
    if node_labels.get("nvidia.com/gpu.deploy.driver") == "false":
        return False
    if node_labels.get("nvidia.com/gpu-driver-upgrade.skip") == "true":
        return False
    return not d.get("upgradePolicy", {}).get("waitForCompletion", {}).get("podSelector")


def test_training_pool_pods_are_never_deleted_by_a_driver_upgrade(examples):
    c = examples["argocd"]  # train-a100 (training tier), infer-a100 (inference), dev-a100 (notebooks)
    v = one(c, VALUES)
    labels = _static_node_labels(c)
    drivers = _drivers(c)
    assert not _upgrade_deletes_pods(v, labels["train-a100"], drivers)
    assert _upgrade_deletes_pods(v, labels["infer-a100"], drivers)
    assert _upgrade_deletes_pods(v, labels["dev-a100"], drivers)
    readme = c.files["README.md"].decode()
    section = readme.split("### Driver upgrades", 1)[1].split("\n## ", 1)[0]
    assert "Upgraded automatically (their GPU pods are deleted): `infer-a100`, `dev-a100`." in section
    assert "`train-a100`" in section.split("Held", 1)[1]
    assert "--field-selector spec.nodeName=<node>" in section


@pytest.mark.parametrize(("upgrade", "held"), [
    ("{}", True),
    ("{holdJobPools: false}", False),
    ("{autoUpgrade: false}", False),
])
def test_hold_follows_the_upgrade_policy(build, upgrade, held):
    c = build(fleet("""\
  pools:
    - {name: train, gpu: L40S, gpusPerNode: 4, nodes: [n1]}
    - {name: serve, gpu: L40S, gpusPerNode: 4, nodes: [n2]}
  tiers:
    - {name: jobs, pool: train, workload: batch, priority: 100}
    - {name: web, pool: serve, workload: inference, priority: 200}
""").replace("    gitops:", f"    gpuOperator: {{driverUpgrade: {upgrade}}}\n    gitops:"))
    labels = _static_node_labels(c)
    assert ("nvidia.com/gpu-driver-upgrade.skip" in labels["train"]) is held
    assert "nvidia.com/gpu-driver-upgrade.skip" not in labels["serve"]
    v = one(c, VALUES)
    assert _upgrade_deletes_pods(v, labels["train"]) is (upgrade == "{holdJobPools: false}")


# --- per-pool drivers: NVIDIADriver objects (issue #28 item 1) ------------------------


def _drivers(c) -> list[dict]:
    data = c.files.get("gpu-operator/nvidiadrivers.yaml")
    return [d for d in yaml.safe_load_all(data) if d] if data else []


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_example_fleet_gets_one_nvidiadriver_per_static_pool(examples):
    """examples/fleet.yaml mixes static Ubuntu pools with a Karpenter AL2023 pool. In
    ClusterPolicy mode the driver image's OS tag comes from one arbitrary GPU node
    (NVIDIA/gpu-operator@v26.7.0 controllers/state_manager.go:579-611), so it can be the
    AL2023 node's; an NVIDIADriver groups its nodes by their own OS
    (internal/state/nodepool.go:60-119). The chart's default NVIDIADriver would select every
    GPU node (templates/nvidiadriver.yaml): it is off."""
    c = examples["argocd"]
    v = one(c, VALUES)
    assert v["driver"]["nvidiaDriverCRD"] == {"enabled": True, "deployDefaultCR": False}
    drivers = _drivers(c)
    static = _static_node_labels(c)
    assert [d["metadata"]["name"] for d in drivers] == ["train-a100", "infer-a100", "dev-a100"]
    karpenter = [next(yaml.safe_load_all(data))["spec"]["template"]["metadata"]["labels"]
                 for path, data in c.files.items() if path.endswith("/nodepool.yaml")]
    assert karpenter
    for d in drivers:
        spec = d["spec"]
        assert spec["default"] is False and spec["version"] == "595.91.07" and spec["usePrecompiled"] is False
        chosen = [pool for pool, labels in static.items() if _selects(spec["nodeSelector"], labels)]
        assert chosen == [d["metadata"]["name"]]  # its own pool's nodes, and no other's: no overlap
        assert not any(_selects(spec["nodeSelector"], labels) for labels in karpenter)
        assert spec["tolerations"] == v["daemonsets"]["tolerations"]
    assert "gpu-operator/nvidiadrivers.yaml" in one(c, "kustomization.yaml")["resources"]


def test_uniform_static_fleet_keeps_the_clusterpolicy_driver(build):
    body = """\
  pools:
    - {name: a, gpu: L40S, gpusPerNode: 4, nodes: [n1], os: ubuntu22.04}
    - {name: b, gpu: L40S, gpusPerNode: 4, nodes: [n2], os: ubuntu22.04}
"""
    c = build(fleet(body))
    assert not _drivers(c)
    d = one(c, VALUES)["driver"]
    assert "nvidiaDriverCRD" not in d and d["version"] == "595.91.07"
    # another OS on one pool, or another driver: one NVIDIADriver per pool
    for changed in (body.replace("nodes: [n2], os: ubuntu22.04", "nodes: [n2], os: rhel9.4"),
                    body.replace("nodes: [n2], os: ubuntu22.04", "nodes: [n2], os: ubuntu22.04, driverVersion: R580")):
        c = build(fleet(changed))
        drivers = {x["metadata"]["name"]: x["spec"] for x in _drivers(c)}
        assert set(drivers) == {"a", "b"} or set(drivers) == {"a", "b-precompiled"}
    assert drivers["b-precompiled"]["version"] == "580" and drivers["b-precompiled"]["usePrecompiled"] is True
    assert drivers["a"]["version"] == "595.91.07" and drivers["a"]["usePrecompiled"] is False


def test_pool_driver_on_a_karpenter_pool_is_refused(tmp_path):
    from gpuplan.compiler import check_fleet

    p = tmp_path / "f.yaml"
    p.write_text(fleet("""\
  pools:
    - {name: s, gpu: L40S, gpusPerNode: 4, nodes: [n1]}
    - name: k
      gpu: H100-SXM5-80GB
      driverVersion: 570.133.20
      karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 8, amiVersion: v20260714}
""").replace("    gitops:", "    aws: {clusterName: t, nodeRole: r}\n    gpuOperator: {toolkit: preinstalled}\n"
             "    gitops:"))
    [d] = [d for d in check_fleet(p).diagnostics if d.code == "GP652"]
    assert d.is_error and d.path == "spec.pools[1].driverVersion" and d.hint


def test_nvidiadrivers_pass_the_pinned_crd_and_its_cel_rules(examples, tmp_path):
    """The NVIDIADriver schema and CEL rules of gpu-operator v26.7.0
    (deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml) are pinned: the emitted
    objects pass, and the CEL rule that forbids a default NVIDIADriver with a nodeSelector
    is evaluated (not skipped)."""
    from gpuplan.verify.verifier import verify_paths

    text = examples["argocd"].files["gpu-operator/nvidiadrivers.yaml"].decode()
    (tmp_path / "ok.yaml").write_text(text)
    r = verify_paths([str(tmp_path)])
    assert r.ok, r.diagnostics
    assert r.stats.cel_evaluations >= 3
    (tmp_path / "ok.yaml").write_text(text.replace("default: false", "default: true", 1))
    r = verify_paths([str(tmp_path)])
    assert [d.code for d in r.diagnostics if d.is_error] == ["GP840"]


def test_no_fleet_gets_with_reboot(examples):
    """aws-burst has a Karpenter MIG pool (mig-a100 on p4de): its userData partitions the
    GPUs at boot and reboots once itself when EC2 refuses the GPU reset
    (tests/karpenter/test_mig_boot.py), and mig-manager is off on its nodes, so mig-manager
    needs no WITH_REBOOT for it (without the option a refused reset marks a node failed,
    NVIDIA/mig-parted@v0.15.0 pkg/mig/reconfigure/reconfigure.go:184-208). Static MIG pools
    keep the default: gpuplan cannot tell an EC2 node from another."""
    from tests.outputkit import REPO, compile_ok

    aws = one(compile_ok(REPO / "examples" / "aws-burst.yaml"), VALUES)["migManager"]
    assert aws["enabled"] is True and "env" not in aws
    static = one(examples["argocd"], VALUES)["migManager"]  # MIG on static infer-a100
    assert static["enabled"] is True and "env" not in static


# --- NVIDIADrivers are updated in place, never replaced -----------------------------------


def _two_drivers(engine: str) -> str:
    return fleet("""\
  pools:
    - {name: a, gpu: L40S, gpusPerNode: 4, nodes: [n1], os: ubuntu22.04}
    - {name: b, gpu: L40S, gpusPerNode: 4, nodes: [n2], os: ubuntu22.04, driverVersion: R580}
""", engine=engine)


@pytest.mark.parametrize("engine", ["argocd", "flux"])
def test_nvidiadrivers_carry_no_replace_and_no_force(build, engine):
    """Argo CD's Replace=true deletes and creates the object on every change
    (gitops-engine/pkg/sync/sync_context.go:1400-1434): a driver bump would give the pool a new
    driver DaemonSet (its name hashes the NVIDIADriver's UID, NVIDIA/gpu-operator@v26.7.0
    internal/state/driver.go:500-533) on every node at once. Flux's force deletes on any invalid
    apply (fluxcd/pkg/ssa@v0.76.1 errors/immutable.go:32-48). Neither is written."""
    drivers = _drivers(build(_two_drivers(engine)))
    assert len(drivers) == 2
    for d in drivers:
        ann = d["metadata"].get("annotations", {})
        assert "kustomize.toolkit.fluxcd.io/force" not in ann
        opts = ann.get("argocd.argoproj.io/sync-options", "")
        assert "Replace=true" not in opts.split(",") and "Force=true" not in opts.split(",")
        if engine == "argocd":
            assert opts == "SkipDryRunOnMissingResource=true"


def test_the_nvidiadriver_name_carries_the_immutable_precompiled_choice(build):
    """usePrecompiled is immutable (CEL self == oldSelf): a compiled and a precompiled driver of
    the same pool are two objects of two names, so a switch is a create and a prune, never a
    refused update."""
    from gpuplan.identity import nvidia_driver_name

    drivers = {d["metadata"]["name"]: d["spec"] for d in _drivers(build(_two_drivers("argocd")))}
    assert set(drivers) == {"a", "b-precompiled"}
    assert drivers["b-precompiled"]["usePrecompiled"] is True and drivers["a"]["usePrecompiled"] is False
    # the name is also a node label value (nvidia.com/gpu-operator.driver.owner): 63 at most
    long = "p" * 63
    name = nvidia_driver_name(long, True)
    assert len(name) <= 63 and name != nvidia_driver_name(long, False) == long
    assert name != nvidia_driver_name("p" * 62, True)
