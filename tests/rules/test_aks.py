"""GP668-GP674 and the AKS side of the shared rules, on examples/aks.yaml edited to break them.

Sources: MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/gpu-multi-instance.md:31-46 (one
gpuInstanceProfile per agent pool, fixed at creation), nvidia-gpu-operator.md:46,50 (`--gpu-driver
none`; one OS version per cluster with the GPU Operator), spot-node-pool.md:41 (the spot taint),
use-labels.md:201,217-222 (the accelerator label, reserved prefixes), custom-node-configuration-
reference.md:27,32 (the kubelet settings an agent pool takes); Azure/AgentBaker @04c076b9
parts/linux/cloud-init/artifacts/mig-partition.sh (profile id and count per gpuInstanceProfile);
Azure/azure-service-operator v1api20250801 managed_clusters_agent_pool_types_gen.go @70edf9f0
(`azureName` pattern); kubernetes/autoscaler@cluster-autoscaler-1.36.1
cloudprovider/azure/azure_cloud_provider.go:45 and utils/gpu/gpu.go:137-146 (#8095)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rules.helpers import check_text as _check, errors as _errors, position, with_code as _codes

REPO = Path(__file__).parents[2]
AKS = (REPO / "examples" / "aks.yaml").read_text()

INFER_SHARING = """      sharing:
        mode: mig
        strategy: single
        layout: {3g.40gb: 2}"""


def test_the_example_is_clean(tmp_path):
    assert not _errors(_check(tmp_path, AKS))


def test_an_aks_pool_needs_cluster_azure(tmp_path):
    text = AKS.replace("    azure:\n      managedCluster: aks-ml\n      namespace: aks-ml\n", "")
    [d] = _codes(_check(tmp_path, text), "GP668")
    assert "train-h100, infer-a100, nb-t4" in d.message


def test_agent_pool_name_must_fit_azure(tmp_path):
    """ASO's azureName pattern ^[a-z][a-z0-9]{0,11}$: the pool name train-h100 has a hyphen."""
    text = AKS.replace("        name: trainh100\n", "")
    [d] = _codes(_check(tmp_path, text), "GP669")
    assert "'train-h100'" in d.message and d.hint == "set aks.name, e.g. trainh100"
    assert (d.line, d.col) == position(text, "train-h100\n      gpu: H100", 0)
    text = AKS.replace("name: trainh100", "name: train-pool-h100")
    [d] = _codes(_check(tmp_path, text), "GP669")
    assert (d.line, d.col) == position(text, "train-pool-h100", 0) and d.hint == "set aks.name, e.g. trainpoolh10"
    text = AKS.replace("name: nbt4", "name: trainh100")  # two agent pools of one cluster, one name
    [d] = _codes(_check(tmp_path, text), "GP669")
    assert "pool train-h100's" in d.message


def test_unknown_vm_size_of_an_aks_mig_pool_is_reported(tmp_path):
    """With gpusPerNode given, GP637 is quiet; the gpuInstanceProfile still depends on the VM size's GPU."""
    text = AKS.replace("vmSize: Standard_NC96ads_A100_v4", "vmSize: Standard_NC96ads_A100_v9\n        # x").replace(
        "      gpu: A100-PCIE-80GB\n", "      gpu: A100-PCIE-80GB\n      gpusPerNode: 4\n")
    c = _check(tmp_path, text)
    assert not _codes(c, "GP637")
    [d] = _codes(c, "GP671")
    assert "Standard_NC96ads_A100_v9" in d.message


@pytest.mark.parametrize("layout,why", [
    ("        layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}", "several profiles"),
    ("        devices:\n          - {devices: [0, 1], layout: {3g.40gb: 2}}\n"
     "          - {devices: [2, 3], layout: {1g.10gb: 7}}", "per-GPU layouts"),
])
def test_aks_mig_needs_one_profile_on_every_gpu(tmp_path, layout, why):
    text = AKS.replace(INFER_SHARING, INFER_SHARING.replace("        layout: {3g.40gb: 2}", layout)
                       .replace("strategy: single", "strategy: mixed")).replace(
        "        minNodes: 1\n", "        minNodes: 4\n")
    c = _check(tmp_path, text)
    [d] = _codes(c, "GP670")
    assert why in d.message and d.hint == "use the GPU Operator path on this pool (aks.driver: gpu-operator)"
    # the GPU Operator path takes the same layout: AKS installs no driver and partitions nothing
    op = text.replace("        vmSize: Standard_NC96ads_A100_v4\n",
                      "        vmSize: Standard_NC96ads_A100_v4\n        driver: gpu-operator\n")
    op = op.replace("      driver: preinstalled\n      toolkit: preinstalled\n", "      driver: managed\n      toolkit: managed\n")
    c = _check(tmp_path, op)
    assert not _codes(c, "GP670") and not _codes(c, "GP671") and not _codes(c, "GP672")


def test_layout_must_be_a_partition_aks_makes_on_the_vm_size(tmp_path):
    """MIG3g is profile id 9 twice per GPU (mig-partition.sh): 3g.40gb x2 on an A100 80GB; three
    would be no gpuInstanceProfile, nor 1g.20gb (id 15), which no MIGng makes."""
    for bad in ("{3g.40gb: 1}", "{1g.20gb: 4}"):
        text = AKS.replace("layout: {3g.40gb: 2}", f"layout: {bad}")
        [d] = _codes(_check(tmp_path, text), "GP671")
        assert "MIG3g: 2x 3g.40gb" in d.message and "MIG1g: 7x 1g.10gb" in d.message
    text = AKS.replace("layout: {3g.40gb: 2}", "layout: {1g.10gb: 7}")
    c = _check(tmp_path, text)
    assert not _codes(c, "GP671")
    from gpuplan.provisioning.aks import gpu_instance_profile

    assert gpu_instance_profile(c.resolved.pool_by_name["infer-a100"].pool) == "MIG1g"


def test_mig_names_per_gpu_follow_the_profile_id():
    """AKS's own table for Standard_ND96asr_v4 (A100 40GB, gpu-multi-instance.md:33-39); the same
    ids on an H100 NVL are 1g.12gb ... 7g.94gb."""
    from gpuplan.cloud.aks import instance_profiles, machine_type

    assert instance_profiles(machine_type("Standard_ND96asr_v4").gpu) == {
        "MIG1g": ("1g.5gb", 7), "MIG2g": ("2g.10gb", 3), "MIG3g": ("3g.20gb", 2),
        "MIG4g": ("4g.20gb", 1), "MIG7g": ("7g.40gb", 1)}
    assert instance_profiles(machine_type("Standard_NC40ads_H100_v5").gpu)["MIG1g"] == ("1g.12gb", 7)
    assert instance_profiles(machine_type("Standard_NC64as_T4_v3").gpu) == {}


def test_gpu_operator_path_needs_the_operator_driver_and_one_os(tmp_path):
    text = AKS.replace("        vmSize: Standard_ND96isr_H100_v5\n",
                       "        vmSize: Standard_ND96isr_H100_v5\n        driver: gpu-operator\n")
    [d] = _codes(_check(tmp_path, text), "GP672")
    assert "gpuOperator.driver is preinstalled" in d.message
    assert (d.line, d.col) == position(text, "gpu-operator\n", 0)
    managed = text.replace("      driver: preinstalled\n", "      driver: managed\n")
    [d] = _codes(_check(tmp_path, managed), "GP672")
    assert "gpuOperator.toolkit is preinstalled" in d.message
    managed = managed.replace("      toolkit: preinstalled\n", "      toolkit: managed\n")
    assert not _codes(_check(tmp_path, managed), "GP672")
    mixed_os = managed.replace("        name: nbt4\n", "        name: nbt4\n        osSKU: AzureLinux\n")
    [d] = _codes(_check(tmp_path, mixed_os), "GP672")
    assert "AzureLinux, Ubuntu" in d.message


def test_reserved_labels_and_kubelet_settings_aks_cannot_carry(tmp_path):
    text = AKS.replace("      pricePerGPUHour: 0.55\n",
                       "      pricePerGPUHour: 0.55\n      labels: {kubernetes.azure.com/team: research}\n")
    [d] = _codes(_check(tmp_path, text), "GP673")
    assert "kubernetes.azure.com/team" in d.message
    text = AKS.replace("topology: {policy: restricted}", "topology: {policy: restricted, scope: pod}")
    [d] = _codes(_check(tmp_path, text), "GP673")
    assert "topologyManagerScope" in d.message


@pytest.mark.parametrize("old,new", [
    ("strategy: single", "strategy: mixed"),  # nvidia.com/mig-3g.40gb only
])
def test_autoscaled_pool_must_advertise_nvidia_gpu(tmp_path, old, new):
    text = AKS.replace(old, new)
    [d] = _codes(_check(tmp_path, text), "GP674")
    assert "nvidia.com/mig-3g.40gb" in d.message and "aks.minNodes: 4" in d.hint
    fixed = text.replace("        minNodes: 1\n", "        minNodes: 4\n")
    assert not _codes(_check(tmp_path, fixed), "GP674")


def test_renamed_shared_gpus_stall_the_autoscaler(tmp_path):
    text = AKS.replace("renameByDefault: false", "renameByDefault: true")
    [d] = _codes(_check(tmp_path, text), "GP674")
    assert "nb-t4" in d.message and "nvidia.com/gpu.shared" in d.message


def test_spot_agent_pool_holds_only_preemptible_tiers(tmp_path):
    """A spot agent pool's purchase option is spot (gpuplan.provisioning.aks.preemptible): the spot
    rules refuse a quota of a tier that must not be interrupted there (GP413)."""
    assert not _codes(_check(tmp_path, AKS), "GP413")
    text = AKS.replace("      workload: interactive\n", "      workload: inference\n")
    [d] = _codes(_check(tmp_path, text), "GP413")
    assert "notebooks" in d.message


def test_vm_size_decides_gpu_model(tmp_path):
    text = AKS.replace("vmSize: Standard_ND96isr_H100_v5", "vmSize: Standard_ND96isr_H100_v6")
    [d] = _codes(_check(tmp_path, text), "GP637")
    assert d.hint == "did you mean Standard_ND96isr_H100_v5?"
    text = AKS.replace("vmSize: Standard_ND96isr_H100_v5", "vmSize: Standard_ND96amsr_A100_v4")
    [d] = _codes(_check(tmp_path, text), "GP638")
    assert "A100-SXM4-80GB" in d.message


def test_a_fixed_size_mixed_mig_pool_still_counts_unready(tmp_path):
    """GP975: AKS labels the nodes kubernetes.azure.com/accelerator itself (its driver), so a
    fixed-size pool with only nvidia.com/mig-* is not scaled but still counted unready."""
    text = AKS.replace("strategy: single", "strategy: mixed").replace("        minNodes: 1\n", "        minNodes: 4\n")
    [d] = _codes(_check(tmp_path, text), "GP975")
    assert "infer-a100" in d.message and "kubernetes.azure.com/accelerator" in d.message
    assert not _codes(_check(tmp_path, AKS), "GP975")
