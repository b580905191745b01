"""Azure GPU VM sizes for AKS agent pools: which GPU, how many, and the MIG partitions AKS
creates for each ``gpuInstanceProfile``.

Data: ``data/aks-gpu-vm-sizes.json`` (its ``source`` names the MicrosoftDocs/azure-compute-docs
series pages, the commit of each, and the date). Refresh: re-read each series page's
"Accelerators" tab and host specifications include, edit the JSON and its ``retrieved``
date (docs/aks.md).

An agent pool's ``gpuInstanceProfile`` (``MIG1g`` … ``MIG7g``) is one value for the whole
pool: the node's bootstrap (Azure/AgentBaker ``parts/linux/cloud-init/artifacts/mig-partition.sh``
@04c076b9, ``mig_profile_id`` and ``uniform_mig_profile_layout``) runs
``nvidia-smi mig -cgi`` with GPU instance profile id 19, 14, 9, 5 or 0, 7, 3, 2, 1 or 1 times
on every GPU. The profile *name* behind an id depends on the GPU (id 19 is ``1g.5gb`` on an
A100 40GB, ``1g.10gb`` on an A100 80GB or H100 80GB, ``1g.12gb`` on an H100 NVL), so the
names come from gpuplan's MIG catalog by id, never from the label.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path

from gpuplan.cloud.machine import Machine

DATA = Path(__file__).parent / "data" / "aks-gpu-vm-sizes.json"

# gpuInstanceProfile -> (GPU instance profile id, instances per GPU): AgentBaker mig-partition.sh
GPU_INSTANCE_PROFILES: dict[str, tuple[int, int]] = {
    "MIG1g": (19, 7), "MIG2g": (14, 3), "MIG3g": (9, 2), "MIG4g": (5, 1), "MIG7g": (0, 1),
}


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def instance_profile(gpu: str, gpu_instance_profile: str) -> tuple[str, int] | None:
    """The MIG profile name and the instances per GPU AKS creates for ``MIGng`` on ``gpu``
    (a catalog key); None when the GPU has no MIG or no profile with that id."""
    from gpuplan.catalog.gpus import resolve_gpu

    entry = GPU_INSTANCE_PROFILES.get(gpu_instance_profile)
    model = resolve_gpu(gpu)
    if entry is None or model is None or not model.mig_capable:
        return None
    pid, count = entry
    for p in model.profiles:
        if p.smi_id == pid:
            return p.name, count
    return None


def instance_profiles(gpu: str) -> dict[str, tuple[str, int]]:
    """Every ``gpuInstanceProfile`` AKS can create on ``gpu``: ``{"MIG1g": ("1g.10gb", 7), ...}``."""
    out = {}
    for name in GPU_INSTANCE_PROFILES:
        hit = instance_profile(gpu, name)
        if hit is not None:
            out[name] = hit
    return out


@lru_cache(maxsize=1)
def machine_types() -> dict[str, Machine]:
    return {name: Machine(name=name, gpu=v["gpu"], gpu_count=v["gpuCount"],
                          mig_profiles=tuple(p for p, _ in instance_profiles(v["gpu"]).values()))
            for name, v in _table()["vmSizes"].items()}


def machine_type(name: str) -> Machine | None:
    return machine_types().get(name)


def source() -> dict:
    return dict(_table()["source"])


def closest(name: str) -> str | None:
    """The known VM size nearest to a misspelt one (for a "did you mean")."""
    hits = difflib.get_close_matches(name, list(machine_types()), n=1)
    return hits[0] if hits else None


# --- Karpenter on Azure (Node Auto Provisioning): the labels of a VM size ---------------------

_NAP = "karpenter.azure.com/"
# the keys Azure/karpenter-provider-azure@v1.14.2 sets on an instance type that this table can
# compute (pkg/providers/instancetype/instancetype.go:205-262, computeRequirements; label names
# pkg/apis/v1beta1/labels.go:127-148) ...
VM_LABEL_KEYS = frozenset({
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os",
    *(_NAP + k for k in ("sku-name", "sku-family", "sku-series", "sku-version", "sku-cpu", "sku-gpu-name",
                         "sku-gpu-manufacturer", "sku-gpu-count"))})
# ... and those it sets from the Azure SKU API, which the table does not hold
UNREAD_VM_KEYS = frozenset(_NAP + k for k in (
    "sku-memory", "sku-networking-accelerated", "sku-storage-premium-capable", "sku-storage-ephemeralos-maxsize",
    "sku-storage-ultra-ssd", "sku-hyperv-generation"))
# github.com/Azure/skewer@v0.0.24 vmsize.go:15-17 skuSizeScheme (the provider's VM size parser),
# matched against the name after its "Standard_" tier
_SKU = re.compile(
    r"^([A-Z])([A-Z]?)([A-Z]?)([0-9]+)-?((?:[0-9]+)?)((?:[abcdeiflmnotspPr]+|C+|NP)?)_?"
    r"(?:(xl_[A-Z]+[0-9]+[A-Z]*|[A-Z]+[0-9]+)_?)?(_cc_)?(_[0-9]+_)?(_MI300X_)?(_H100_)?((?:[vV][1-9])?)?(_Promo)?$")


def vm_labels(name: str) -> dict[str, str | None]:
    """The value of every :data:`VM_LABEL_KEYS` key on a NAP node of VM size ``name`` (None: the
    provider leaves it unset): family, series and version as skewer's ``GetVMSize`` parses them
    (vmsize.go:60-165: Series = family + subfamily + additive features + "_" + version), the
    version without its "v" and "1" where the name has none (pkg/utils/utils.go:40-55
    ``ExtractVersionFromVMSize``), the GPU's name from the size (the accelerator part, "A100"),
    manufacturer ``nvidia`` (pkg/apis/v1beta1/labels.go:122) and count from this table; every GPU
    size here is x86 Linux."""
    m = machine_type(name)
    parts = _SKU.match(name.removeprefix("Standard_"))
    out: dict[str, str | None] = {k: None for k in VM_LABEL_KEYS}
    out.update({"node.kubernetes.io/instance-type": name, "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                _NAP + "sku-name": name})
    if parts is not None:
        version = parts[12] or ""
        out[_NAP + "sku-family"] = parts[1]
        out[_NAP + "sku-series"] = parts[1] + parts[2] + parts[3] + parts[6] + (f"_{version}" if version else "")
        out[_NAP + "sku-version"] = version[1:] if version else "1"
        out[_NAP + "sku-cpu"] = parts[4]
        if m is not None and m.gpu_count:
            out[_NAP + "sku-gpu-manufacturer"] = "nvidia"
            out[_NAP + "sku-gpu-count"] = str(m.gpu_count)
            if parts[7]:
                out[_NAP + "sku-gpu-name"] = parts[7].removeprefix("xl_")
    return out
