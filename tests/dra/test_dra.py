"""The DRA back-end: spec gating, rules, objects, the driver's installation, the CEL proof."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gpuplan.compiler import check_fleet, compile_fleet
from gpuplan.dra.claims import PARENT_UUID, tier_claims
from gpuplan.dra.proof import CHART_SELECTORS, SelectorError, allocatable, evaluate_class, matches, prove
from gpuplan.dra.slices import pool_devices, resource_slice
from gpuplan.k8s_features_dra import DRA_EXTENDED_RESOURCE, DYNAMIC_RESOURCE_ALLOCATION
from gpuplan.lower.dra import claim_template
from gpuplan.objchecks.dra import check_templates
from tests.outputkit import REPO, all_objects, docs, one

EXAMPLE = REPO / "examples" / "dra.yaml"
BEFORE = REPO / "examples" / "migration" / "before-dra.yaml"


def spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def example_text() -> str:
    return EXAMPLE.read_text(encoding="utf-8")


def codes(tmp_path: Path, text: str) -> list[str]:
    return [d.code for d in check_fleet(spec(tmp_path, text)).diagnostics]


@pytest.fixture(scope="module")
def compiled():
    c = compile_fleet(EXAMPLE, out_dir=REPO / "tests" / "golden" / "dra")
    assert not [d for d in c.diagnostics if d.is_error], c.diagnostics
    return c


# --- the example and what it emits ---------------------------------------------------------


@pytest.mark.slow
def test_every_object_passes_kubernetes_validate_strict_for_the_example_version(compiled):
    version = re.search(r'kubernetesVersion: "(1\.\d+)"', example_text()).group(1) + ".0"
    kinds = set()
    for path, obj in all_objects(compiled):
        if obj["apiVersion"].startswith(("argoproj.io/", "nfd.k8s-sigs.io/")):
            continue  # CRDs: tests/conformance validates them against the upstream CRD schemas
        kubernetes_validate.validate(obj, version, strict=True)
        kinds.add(obj["kind"])
    assert {"DeviceClass", "ResourceClaimTemplate", "ResourceQuota"} <= kinds


def test_modelled_resource_slices_are_valid_objects(compiled):
    for pv in compiled.resolved.pools:
        devs = pool_devices(pv)
        kubernetes_validate.validate(resource_slice(pv, devs), "1.36.0", strict=True)


def test_a_device_class_per_dra_tier_with_extended_resource_names(compiled):
    classes = {d["metadata"]["name"]: d for d in docs(compiled.files["cluster/deviceclasses.yaml"])}
    assert set(classes) == {"gpuplan-inference-large", "gpuplan-inference-small"}
    assert classes["gpuplan-inference-small"]["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb"
    # the device-plugin tier gets no class
    assert not any("training" in n for n in classes)


def test_claim_templates_in_granted_namespaces_only_with_parent_constraint(compiled):
    vision = docs(compiled.files["tenants/vision/resourceclaimtemplates.yaml"])
    assert {d["metadata"]["namespace"] for d in vision} == {"vision-serve"}  # not vision-train
    x2 = [d for d in vision if d["metadata"]["name"] == "gpuplan-inference-small-x2"][0]
    devices = x2["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 2
    assert devices["constraints"] == [{"requests": ["gpus"], "matchAttribute": PARENT_UUID}]
    single = [d for d in vision if d["metadata"]["name"] == "gpuplan-inference-small"][0]
    assert "constraints" not in single["spec"]["spec"]["devices"]


def test_quota_device_class_keys_match_grants_and_close_the_chart_classes(compiled):
    quotas = {d["metadata"]["namespace"]: d["spec"]["hard"] for d in docs(compiled.files["tenants/nlp/resourcequotas.yaml"])}
    hard = quotas["nlp-serve"]
    assert hard["gpuplan-inference-small.deviceclass.resource.k8s.io/devices"] == "10"
    assert hard["gpuplan-inference-large.deviceclass.resource.k8s.io/devices"] == "4"
    assert hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    assert hard["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    assert hard["vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "10"  # unchanged pods still count here


def test_every_gpu_device_class_of_the_pinned_chart_is_closed():
    """The chart's DeviceClass templates (as the pinned chart snapshot lists them) are each either a
    GPU class gpuplan closes (quota 0, claims policy) or one of the IMEX channel classes."""
    import json

    from gpuplan.dra.claims import CHART_CLASS_TEMPLATES, CHART_CLASSES, NOT_GPU_CLASS_TEMPLATES

    chart = json.loads((REPO / "gpuplan/upstream/charts/dra-driver-nvidia-gpu-0.5.0.json").read_text(encoding="utf-8"))
    templates = {o["template"] for o in chart["objects"] if o["kind"] == "DeviceClass"}
    assert templates == set(CHART_CLASS_TEMPLATES) | set(NOT_GPU_CLASS_TEMPLATES)
    assert set(CHART_CLASS_TEMPLATES.values()) == set(CHART_CLASSES) == set(CHART_SELECTORS)


def test_one_label_decides_the_back_end_of_each_pool(compiled):
    dra_rule = one(compiled, "pools/infer-a100/node-labels.yaml")["spec"]["rules"][0]["labels"]
    dp_rule = one(compiled, "pools/train-h100/node-labels.yaml")["spec"]["rules"][0]["labels"]
    assert dra_rule["nvidia.com/gpu.deploy.device-plugin"] == "false"
    assert "nvidia.com/gpu.deploy.device-plugin" not in dp_rule
    values = one(compiled, "dra-driver/values.yaml")
    assert values["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "false"}
    assert values["gpuResourcesEnabledOverride"] is True
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"  # the operator installs the driver
    # mixed fleet: the operator's device plugin stays on for the device-plugin pool
    assert one(compiled, "gpu-operator/values.yaml")["devicePlugin"]["enabled"] is True


def test_argo_application_installs_the_pinned_chart_from_oci(compiled):
    app = one(compiled, "delivery/dra-driver.yaml")
    src = app["spec"]["sources"][0]
    assert (src["repoURL"], src["chart"], src["targetRevision"]) == (
        "registry.k8s.io/dra-driver-nvidia/charts", "dra-driver-nvidia-gpu", "0.5.0")
    assert "delivery/dra-driver.yaml" in one(compiled, "kustomization.yaml")["resources"]


def test_flux_delivery_puts_the_release_beside_the_operator(tmp_path):
    text = example_text().replace("engine: argocd", "engine: flux")
    c = compile_fleet(spec(tmp_path, text), out_dir=tmp_path / "generated")
    assert not [d for d in c.diagnostics if d.is_error]
    objs = docs(c.files["delivery/gpu-operator/dra-driver.yaml"])
    repo = [o for o in objs if o["kind"] == "HelmRepository"][0]
    assert repo["spec"] == {"type": "oci", "interval": "1h", "url": "oci://registry.k8s.io/dra-driver-nvidia/charts"}
    assert "dra-driver.yaml" in one(c, "delivery/gpu-operator/kustomization.yaml")["resources"]


# --- existing specs: byte-identical ---------------------------------------------------------


@pytest.mark.parametrize("name", ["fleet", "aws-burst", "flux-onprem"])
def test_existing_specs_compile_byte_identically_with_the_default_back_end(tmp_path, name):
    src = (REPO / "examples" / f"{name}.yaml").read_text(encoding="utf-8")
    explicit = re.sub(r"(\n  cluster:\n)", r"\1    allocation: {backend: device-plugin}\n", src, count=1)
    assert explicit != src
    a = compile_fleet(REPO / "examples" / f"{name}.yaml", out_dir=tmp_path / "generated")
    p = tmp_path / f"{name}.yaml"
    p.write_text(explicit, encoding="utf-8")
    b = compile_fleet(p, out_dir=tmp_path / "generated")
    assert not [d for d in b.diagnostics if d.is_error]
    strip = lambda files: {k: re.sub(rb"generated by gpuplan from [^;]*;", b"", v) for k, v in files.items()}
    assert strip(a.files) == strip(b.files)
    assert not any(k.startswith("dra-driver/") or "resourceclaimtemplates" in k for k in b.files)


# --- feature gates ---------------------------------------------------------------------------


def test_feature_table_follows_the_upstream_gates():
    assert DYNAMIC_RESOURCE_ALLOCATION.enabled(33, {}) is False
    assert DYNAMIC_RESOURCE_ALLOCATION.enabled(34, {}) is True
    assert DYNAMIC_RESOURCE_ALLOCATION.enabled(34, {"DynamicResourceAllocation": False}) is False
    assert DYNAMIC_RESOURCE_ALLOCATION.enabled(35, {"DynamicResourceAllocation": False}) is True  # locked
    assert DRA_EXTENDED_RESOURCE.enabled(35, {}) is False
    assert DRA_EXTENDED_RESOURCE.enabled(35, {"DRAExtendedResource": True}) is True
    assert DRA_EXTENDED_RESOURCE.enabled(36, {}) is True
    assert DRA_EXTENDED_RESOURCE.enabled(33, {"DRAExtendedResource": True}) is False


def test_dra_below_1_34_is_gp680(tmp_path):
    assert "GP680" in codes(tmp_path, example_text().replace('"1.36"', '"1.33"'))


def test_extended_resource_without_its_gate_is_gp681_and_the_gate_or_opt_out_fixes_it(tmp_path):
    text = example_text().replace('"1.36"', '"1.35"')
    assert "GP681" in codes(tmp_path, text)
    gated = text.replace("draDriverVersion: v0.5.0", "draDriverVersion: v0.5.0\n      featureGates: {DRAExtendedResource: true}")
    assert "GP681" not in codes(tmp_path, gated)
    opted = text.replace("allocation: {backend: dra}", "allocation: {backend: dra, extendedResources: false}")
    assert "GP681" not in codes(tmp_path, opted)


def test_extended_resources_off_leaves_pods_to_the_claim_templates(tmp_path):
    text = example_text().replace("allocation: {backend: dra}", "allocation: {backend: dra, extendedResources: false}")
    c = compile_fleet(spec(tmp_path, text), out_dir=tmp_path / "generated")
    assert all("extendedResourceName" not in d["spec"] for d in docs(c.files["cluster/deviceclasses.yaml"]))


# --- duplicate extendedResourceName, both back-ends, sharing -----------------------------------


def two_dra_pools(profile_b: str = "1g.10gb", gpu_b: str = "A100-SXM4-80GB") -> str:
    text = example_text().replace("""    - name: train-h100
      gpu: H100-SXM5-80GB""", f"""    - name: infer-b
      gpu: {gpu_b}
      gpusPerNode: 4
      nodes: [gpu-b-01]
      sharing: {{mode: mig, layout: {{{profile_b}: 7}}}}
      allocation: {{backend: dra}}
    - name: train-h100
      gpu: H100-SXM5-80GB""")
    return text.replace("  tenants:", f"""    - {{name: inference-b, pool: infer-b, profile: {profile_b}}}
  tenants:""")


def test_duplicate_extended_resource_name_is_gp682(tmp_path):
    # two DRA pools handing out nvidia.com/mig-1g.10gb: two classes would claim it
    diags = check_fleet(spec(tmp_path, two_dra_pools())).diagnostics
    dup = [d for d in diags if d.code == "GP682"]
    assert len(dup) == 1 and "nvidia.com/mig-1g.10gb" in dup[0].message


def test_whole_gpus_on_dra_collide_with_the_chart_class(tmp_path):
    text = example_text().replace("""      topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}
      taints:""", """      topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}
      allocation: {backend: dra}
      taints:""")
    diags = check_fleet(spec(tmp_path, text)).diagnostics
    assert any(d.code == "GP682" and "gpu.nvidia.com" in d.message for d in diags)


def test_look_alike_dra_pools_are_gp686_from_the_cel_proof(tmp_path):
    diags = check_fleet(spec(tmp_path, two_dra_pools())).diagnostics
    assert any(d.code == "GP686" and "pool infer-b" in d.message for d in diags)
    # another GPU model tells them apart
    assert "GP686" not in [d.code for d in check_fleet(spec(tmp_path, two_dra_pools(gpu_b="H100-SXM5-80GB"))).diagnostics]


def test_pool_label_on_the_back_end_switch_is_gp684(tmp_path):
    text = example_text().replace("""      nodes: [gpu-h100-01, gpu-h100-02]""", """      nodes: [gpu-h100-01, gpu-h100-02]
      labels: {nvidia.com/gpu.deploy.device-plugin: "false"}""")
    assert "GP684" in codes(tmp_path, text)


def test_dra_on_bottlerocket_is_gp684(tmp_path):
    text = example_text().replace("""      gpusPerNode: 4
      nodes: [gpu-a100-01, gpu-a100-02]""", """      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiFamily: Bottlerocket}""")
    text = text.replace("    allocation:\n", "    aws: {clusterName: c, nodeRole: r}\n    allocation:\n")
    assert "GP684" in codes(tmp_path, text)
    al2023 = codes(tmp_path, text.replace("amiFamily: Bottlerocket", "amiFamily: AL2023"))
    assert "GP684" not in al2023
    assert "GP690" in al2023  # Karpenter does not schedule for DRA


def test_time_slicing_on_dra_is_gp685(tmp_path):
    text = example_text().replace("""      sharing:
        mode: mig
        strategy: mixed
        layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}""", "      sharing: {mode: time-slicing, replicas: 4}")
    assert "GP685" in codes(tmp_path, text)


def test_claim_for_more_slices_than_one_gpu_holds_is_gp687(tmp_path):
    # 1g.10gb: two per GPU in this layout; three on one GPU cannot be allocated
    text = example_text().replace("""      priority: 200000
      maxGPUsPerPod: 2""", """      priority: 200000
      maxGPUsPerPod: 3""")
    diags = [d for d in check_fleet(spec(tmp_path, text)).diagnostics if d.code == "GP687"]
    assert diags and "on one GPU" in diags[0].message


def test_other_driver_version_warns_gp689(tmp_path):
    assert "GP689" in codes(tmp_path, example_text().replace("draDriverVersion: v0.5.0", "draDriverVersion: v0.6.0"))


def test_example_is_clean_of_dra_diagnostics(compiled):
    assert not [d for d in compiled.diagnostics if d.code.startswith(("GP68", "GP69"))]


# --- GP683: the parent-GPU constraint on multi-slice claims ---------------------------------------


def test_check_templates_flags_a_multi_slice_claim_without_the_constraint(compiled):
    claim = [c for c in tier_claims(compiled.resolved) if c.tier == "inference-small"][0]
    mig = frozenset({claim.class_name})
    good = claim_template(compiled.resolved, claim, "ns", 2)
    bad = claim_template(compiled.resolved, claim, "ns", 2, parent_constraint=False)
    assert check_templates([good], mig) == []
    assert check_templates([bad], mig) == ["ns/gpuplan-inference-small-x2"]
    assert check_templates([claim_template(compiled.resolved, claim, "ns", 1)], mig) == []


# --- the proof, with the real CEL engine ----------------------------------------------------------


def test_every_tier_selector_matches_its_pool_only_and_claims_land_on_one_gpu(compiled):
    proof = prove(compiled.resolved)
    assert {tp.claim.tier for tp in proof.tiers} == {"inference-large", "inference-small"}
    for tp in proof.tiers:
        assert tp.ok, (tp.claim.tier, tp.cls.error, tp.unsatisfied, tp.elsewhere)
        own = tp.cls.matched[tp.claim.pool]
        profiles = {d.attr("profile") for d in own}
        assert profiles == {tp.claim.profile}
    small = [tp for tp in proof.tiers if tp.claim.tier == "inference-small"][0]
    own = small.cls.matched["infer-a100"]
    assert len(own) == 8  # 2 per GPU x 4 GPUs, one node
    assert allocatable(own, 2, PARENT_UUID)
    assert not allocatable(own, 3, PARENT_UUID)
    assert allocatable(own, 3, None)  # without the constraint, slices of different GPUs would do


def test_selectors_evaluated_against_every_pool_including_device_plugin_hardware(compiled):
    # the H100 pool publishes nothing (device plugin); modelled as if it did, no tier class matches it
    h100 = compiled.resolved.pool_by_name["train-h100"]
    for c in tier_claims(compiled.resolved):
        assert not [d for d in pool_devices(h100) if matches(c.selector, d)]
    # the chart's gpu.nvidia.com class would match them: whole GPUs
    assert all(matches(CHART_SELECTORS["gpu.nvidia.com"], d) for d in pool_devices(h100))


def test_static_mig_publishes_slices_not_the_parent(compiled):
    devs = pool_devices(compiled.resolved.pool_by_name["infer-a100"])
    assert {d.attr("type") for d in devs} == {"mig"}
    assert len(devs) == 4 * 4
    assert len({d.attr("parentUUID") for d in devs}) == 4


def test_a_selector_that_errors_on_a_device_is_an_error_not_a_miss(compiled):
    devs = pool_devices(compiled.resolved.pool_by_name["infer-a100"])
    # profile before type: fails on... nothing here (all MIG); on a whole GPU it has no profile
    h100 = pool_devices(compiled.resolved.pool_by_name["train-h100"])
    with pytest.raises(SelectorError):
        matches("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", h100[0])
    assert matches("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", devs[1]) in (True, False)


def test_a_selector_the_engine_cannot_compile_or_run_is_a_class_error(compiled):
    """Through gpuplan.verify.cel: a syntax error, a function gpuplan does not provide
    (quantity), a non-bool result and a missing attribute each leave the class with an
    error and no matches; a good selector matches."""
    devices = {"infer-a100": pool_devices(compiled.resolved.pool_by_name["infer-a100"]),
               "train-h100": pool_devices(compiled.resolved.pool_by_name["train-h100"])}
    cases = {
        "device.driver ==": "CEL does not compile",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) > 0":
            "does not implement: compareTo, quantity",
        "device.driver": "not a bool",
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'": "no such key",
    }
    for selector, why in cases.items():
        res = evaluate_class("x", selector, devices)
        assert res.error is not None and why in res.error, (selector, res.error)
        assert res.matched == {}
    ok = evaluate_class("x", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", {"infer-a100": devices["infer-a100"]})
    assert ok.error is None and len(ok.matched["infer-a100"]) == 2 * 4


def test_docs_gates_table_is_the_modules_table():
    from gpuplan.k8s_features_dra import maturity_markdown

    assert maturity_markdown() in (REPO / "docs" / "dra.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_validate_without_dra_pools_never_loads_the_cel_engine(tmp_path):
    import subprocess
    import sys

    def loads_cel(spec: str) -> str:
        # gpuplan.verify.cel.engine() registers the compiled extension as cel.cel
        code = ("import sys\nfrom gpuplan.cli.main import main\n"
                f"try:\n    main(['validate', {spec!r}])\nexcept SystemExit as e:\n    assert e.code == 0\n"
                "print('CEL=' + str('cel.cel' in sys.modules or 'cel' in sys.modules))\n")
        r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()[-1]

    # the placement proof evaluates the admission policy's CEL (docs/placement.md): off here
    spec = tmp_path / "fleet.yaml"
    text = (REPO / "examples" / "fleet.yaml").read_text()
    spec.write_text(text.replace('    kubernetesVersion: "1.33"\n',
                                 '    kubernetesVersion: "1.33"\n    admission: {enabled: false}\n', 1))
    assert "admission: {enabled: false}" in spec.read_text()
    assert loads_cel(str(spec)) == "CEL=False"
    assert loads_cel("examples/dra.yaml") == "CEL=True"  # the check above sees the engine when it loads


@pytest.mark.slow
def test_kubernetes_validate_cli_strict_on_the_committed_dra_tree():
    import shutil
    import subprocess

    import sys
    from pathlib import Path

    # the venv running the tests has it, whether or not that venv is on PATH
    beside = Path(sys.executable).with_name("kubernetes-validate")
    exe = str(beside) if beside.is_file() else shutil.which("kubernetes-validate")
    assert exe, "kubernetes-validate (a test dependency) is not installed"
    tree = REPO / "tests" / "golden" / "dra"
    files = [str(p) for p in sorted(tree.rglob("*.yaml"))
             if "delivery" not in p.parts and "pools" not in p.parts and p.name not in ("values.yaml", "kustomization.yaml")]
    assert any(f.endswith("deviceclasses.yaml") for f in files)
    r = subprocess.run([exe, "-k", "1.36.0", "--strict", *files], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deviceclass/gpuplan-inference-small" in r.stdout + r.stderr


def test_kubectl_kustomize_builds_the_dra_tree_in_both_engines(tmp_path):
    import shutil
    import subprocess

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot run")
    for engine in ("argocd", "flux"):
        c = compile_fleet(spec(tmp_path, example_text().replace("engine: argocd", f"engine: {engine}")),
                          out_dir=tmp_path / "generated")
        root = tmp_path / engine
        for rel, data in c.files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        r = subprocess.run([kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        kinds = [d["kind"] for d in yaml.safe_load_all(r.stdout) if d]
        assert kinds.count("DeviceClass") == 2 and kinds.count("ResourceClaimTemplate") == 6


def test_flux_variant_objects_validate_against_the_upstream_crd_schemas(tmp_path):
    from tests.conformance.test_conformance_schemas import validate

    c = compile_fleet(spec(tmp_path, example_text().replace("engine: argocd", "engine: flux")),
                      out_dir=tmp_path / "generated")
    objs = docs(c.files["delivery/gpu-operator/dra-driver.yaml"])
    assert {o["kind"] for o in objs} == {"Namespace", "HelmRepository", "HelmRelease"}
    for o in objs:
        validate(o, "1.36.0")
    app = one(compile_fleet(EXAMPLE, out_dir=tmp_path / "g2"), "delivery/dra-driver.yaml")
    validate(app, "1.36.0")


def test_whole_gpus_on_a_dra_pool_warn_device_plugin_gpu_tiers_gp688(tmp_path):
    text = example_text().replace("""        layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}""", """        devices:
          - {devices: [0, 1, 2], layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}
          - {devices: [3]}""")
    diags = [d for d in check_fleet(spec(tmp_path, text)).diagnostics if d.code == "GP688"]
    assert len(diags) == 1 and "tier training" in diags[0].message and "1 whole GPU" in diags[0].message
    # the modelled slice: three GPUs of MIG devices, one whole GPU
    pv = check_fleet(spec(tmp_path, text)).resolved.pool_by_name["infer-a100"]
    types = [d.attr("type") for d in pool_devices(pv)]
    assert types.count("gpu") == 1 and types.count("mig") == 12


def test_all_pools_on_dra_turn_the_operators_device_plugin_off(tmp_path):
    text = example_text().replace("      backend: device-plugin\n", "      backend: dra\n").replace(
        "allocation: {backend: dra}", "allocation: {backend: dra}").replace(
        "    - name: training\n      pool: train-h100\n      workload: training\n      priority: 100000\n      maxGPUsPerPod: 8\n", "")
    text = text.replace("        vision-train: {training: 8}\n", "")
    text = text.replace("""    - name: train-h100
      gpu: H100-SXM5-80GB
      gpusPerNode: 8
      nodes: [gpu-h100-01, gpu-h100-02]
      sharing: {mode: exclusive}
      topology: {policy: restricted, scope: pod, reservedSystemCPUs: "0,1"}
      taints:
        - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
""", "")
    c = compile_fleet(spec(tmp_path, text), out_dir=tmp_path / "generated")
    assert not [d for d in c.diagnostics if d.is_error], c.diagnostics
    assert one(c, "gpu-operator/values.yaml")["devicePlugin"]["enabled"] is False
