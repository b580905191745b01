"""GP695-GP699 and the generic machine rules on Karpenter pools of AKS Node Auto Provisioning,
on examples/aks-nap.yaml edited to break them.

Sources: MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/supported-kubernetes-versions.md:90,96,102,
108 (AKS's Karpenter per Kubernetes minor); Azure/karpenter-provider-azure go.mod at v0.7.3/v1.6.5/v1.7.0/
v1.12.2 (its Karpenter core: 1.0.5, 1.6.2, 1.7.1, 1.12.x); kubernetes-sigs/karpenter 9f749d9 (#2526,
limits.nodes from v1.11.0); Azure/karpenter-provider-azure@v1.14.2
pkg/providers/instance/aksmachineinstanceutils.go:50-52 (spot and on-demand only),
pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322 (gpu.mode None: no driver, runc),
pkg/apis/v1beta1/aksnodeclass.go (no MIG field, no user data); the AKSNodeClass CRD (gpu.mode from v1.12.2)."""

from __future__ import annotations

from pathlib import Path

from tests.rules.helpers import Run, errors as _errors, position, with_code as _codes

REPO = Path(__file__).parents[2]
NAP = (REPO / "examples" / "aks-nap.yaml").read_text()
BATCH = "        instanceTypes: [Standard_NC24ads_A100_v4]\n"


def test_the_example_is_clean(tmp_path):
    c = Run(tmp_path).checked(NAP)
    assert not _errors(c)
    assert not _codes(c, "GP614")  # no cluster.aws needed for an AKSNodeClass
    assert not _codes(c, "GP613")  # no AMI on Azure


def test_aws_only_fields_are_refused_at_their_line_on_azure(tmp_path):
    text = NAP.replace(BATCH, BATCH + "        amiVersion: v20260714\n        efa: true\n"
                       "        capacityReservations: [{id: cr-0123456789abcdef0}]\n", 1)
    ds = _codes(Run(tmp_path).checked(text), "GP695")
    keys = sorted(d.message.split("karpenter.")[1].split(" ")[0] for d in ds)
    assert keys == ["amiVersion", "capacityReservations", "efa"]
    [ami] = [d for d in ds if "amiVersion" in d.message]
    assert (ami.line, ami.col) == position(text, "amiVersion", 0)
    assert "AKSNodeClass" in ami.message and "imageFamily" in ami.hint


def test_reserved_capacity_is_refused_on_azure(tmp_path):
    """The Azure provider maps only spot and on-demand to a VM priority (aksmachineinstanceutils.go:50-52)."""
    text = NAP.replace("capacityTypes: [spot]", "capacityTypes: [spot, reserved]")
    [d] = _codes(Run(tmp_path).checked(text), "GP695")
    assert "reserved" in d.message
    assert (d.line, d.col) == position(text, "reserved]", 0)


def test_azure_only_fields_are_refused_on_aws(tmp_path):
    text = (REPO / "examples" / "fleet.yaml").read_text()
    [line] = [ln for ln in text.splitlines() if "instanceTypes:" in ln][:1]
    indent = line[: len(line) - len(line.lstrip())]
    text = text.replace(line + "\n", line + f"\n{indent}imageFamily: AzureLinux\n", 1)
    [d] = _codes(Run(tmp_path).checked(text), "GP695")
    assert "imageFamily" in d.message and "EC2NodeClass" in d.message
    assert (d.line, d.col) == position(text, "imageFamily", 0)


def test_topology_the_aksnodeclass_cannot_carry(tmp_path):
    """The AKSNodeClass kubelet has cpuManagerPolicy and topologyManagerPolicy, no reservedSystemCPUs."""
    text = NAP.replace("      pricePerGPUHour: 1.10\n",
                       "      topology: {policy: restricted, reservedSystemCPUs: \"0-1\"}\n      pricePerGPUHour: 1.10\n")
    [d] = _codes(Run(tmp_path).checked(text), "GP695")
    assert "reservedSystemCPUs" in d.message


def test_vm_sizes_unknown_wrong_gpu_and_mixed_counts(tmp_path):
    text = NAP.replace(BATCH, "        instanceTypes: [Standard_NC24ads_A100_v5]\n")
    [d] = _codes(Run(tmp_path).checked(text), "GP696")
    assert "Standard_NC24ads_A100_v5" in d.message and d.hint == "did you mean Standard_NC24ads_A100_v4?"
    assert (d.line, d.col) == position(text, "Standard_NC24ads_A100_v5", 0)
    # an H100 NVL VM size in an A100 pool: the generic machine rule
    wrong = NAP.replace(BATCH, "        instanceTypes: [Standard_NC40ads_H100_v5]\n", 1)
    [d] = _codes(Run(tmp_path).checked(wrong), "GP638")
    assert "Standard_NC40ads_H100_v5" in d.message and "A100-PCIE-80GB" in d.message
    # 1 and 2 GPUs per VM in one pool
    mixed = NAP.replace(BATCH, "        instanceTypes: [Standard_NC24ads_A100_v4, Standard_NC48ads_A100_v4]\n")
    [d] = _codes(Run(tmp_path).checked(mixed), "GP612")
    assert "Standard_NC48ads_A100_v4 has 2 GPUs" in d.message


def test_gpus_per_node_come_from_the_vm_size(tmp_path):
    text = NAP.replace(BATCH, "        instanceTypes: [Standard_NC48ads_A100_v4]\n")
    c = Run(tmp_path).checked(text)
    assert c.resolved.pool_by_name["batch-a100"].gpus_per_node == 2
    assert not _errors(c)


def test_the_node_ceiling_needs_aks_136(tmp_path):
    """AKS 1.35 runs Karpenter 1.7.0-aks (core 1.7.1): limits.nodes is ignored before core 1.11.0."""
    for version, bundled in (("1.35", "1.7.0-aks"), ("1.34", "1.6.5-aks"), ("1.33", "0.7.3-aks")):
        text = NAP.replace('kubernetesVersion: "1.36"', f'kubernetesVersion: "{version}"')
        ds = _codes(Run(tmp_path).checked(text), "GP697")
        assert {d.message.split("'")[1] for d in ds} == {"batch-a100", "serve-h100"}
        assert all(bundled in d.message and "limits.nodes" in d.message for d in ds)
        assert (ds[0].line, ds[0].col) == position(text, f'"{version}"', 0)


def test_gpu_operator_path_needs_gpu_mode(tmp_path):
    """gpu.mode is in the AKSNodeClass CRD from provider v1.12.2 (AKS 1.36), not in v1.7.0 (AKS 1.35)."""
    op = NAP.replace("      driver: preinstalled\n      toolkit: preinstalled\n",
                     "      driver: managed\n      toolkit: managed\n")
    op = op.replace("        imageFamily: Ubuntu2204\n", "        imageFamily: Ubuntu2204\n        driver: gpu-operator\n")
    # serve-h100 keeps AKS's driver and NVIDIA runtime: the operator's toolkit would clash there (GP640)
    [d] = _codes(Run(tmp_path).checked(op), "GP640")
    assert "'serve-h100'" in d.message and "AKS" in d.message
    op = op.replace("        imageFamily: AzureLinux\n", "        imageFamily: AzureLinux\n        driver: gpu-operator\n")
    assert not _errors(Run(tmp_path).checked(op))
    old = op.replace('kubernetesVersion: "1.36"', 'kubernetesVersion: "1.35"')
    [d] = [d for d in _codes(Run(tmp_path).checked(old), "GP697") if "batch-a100" in d.message]
    assert "gpu.mode" in d.message and "limits.nodes" in d.message


def test_gpu_operator_path_needs_the_operators_driver_and_toolkit(tmp_path):
    text = NAP.replace("        imageFamily: Ubuntu2204\n", "        imageFamily: Ubuntu2204\n        driver: gpu-operator\n")
    [d] = _codes(Run(tmp_path).checked(text), "GP699")
    assert "gpuOperator.driver is preinstalled" in d.message
    assert (d.line, d.col) == position(text, "gpu-operator\n", 0)
    driver_only = text.replace("      driver: preinstalled\n", "      driver: managed\n")
    [d] = _codes(Run(tmp_path).checked(driver_only), "GP699")
    assert "toolkit is preinstalled" in d.message


def test_mig_on_a_nap_pool_is_refused(tmp_path):
    text = NAP.replace("      sharing: {mode: exclusive}\n      pricePerGPUHour: 1.10\n",
                       "      sharing: {mode: mig, strategy: single, layout: {3g.40gb: 2}}\n"
                       "      pricePerGPUHour: 1.10\n")
    [d] = _codes(Run(tmp_path).checked(text), "GP698")
    assert "batch-a100" in d.message and "aks:" in d.hint


def test_spot_nap_pool_is_preemptible_capacity(tmp_path):
    """capacity-type spot launches Spot VMs (aksmachineinstanceutils.go:50-52): the spot ledger and the
    tier rules treat the pool as on AWS (a non-preemptible tier there is GP413)."""
    from gpuplan.units import pool_capacity_types

    c = Run(tmp_path).checked(NAP)
    assert pool_capacity_types(c.resolved.pool_by_name["batch-a100"].pool) == ("spot",)
    firm = NAP.replace("      preemptible: true\n", "      preemptible: false\n")
    assert _codes(Run(tmp_path).checked(firm), "GP413")
