"""What a node's GPU Feature Discovery labels say about its GPUs: physical GPUs, MIG strategy
and layout, sharing, and whether the node is in a faulty state.

Every label shape as GFD writes it (NVIDIA/k8s-device-plugin@v0.20.0):

* ``nvidia.com/mig.strategy``: ``single`` or ``mixed``, absent under ``none``
  (``internal/lm/strategy.go:20-28``, merged in ``internal/lm/mig-strategy.go:105-108``).
* ``nvidia.com/gpu.product``/``gpu.count``: first the full-GPU labels, the physical GPUs of each
  model, MIG-enabled or not (``mig-strategy.go:126-177``); labels later in the list overwrite
  earlier ones (``internal/lm/list.go:31-45``). Under ``single`` with MIG enabled the MIG labeler
  then writes the same keys for resource ``nvidia.com/gpu``: product
  ``<model>-MIG-<profile>`` and count = the node's MIG devices (``mig-strategy.go:211-241``,
  ``internal/lm/resource.go:76-108``, product parts joined with ``-``, ``resource.go:189-206``).
  Mixed profiles, a MIG-enabled GPU with no device, or MIG-enabled beside MIG-disabled GPUs
  give ``<model>-MIG-INVALID`` with count 0 (``mig-strategy.go:193-209,236-239,244-264``).
* under ``mixed``: ``nvidia.com/gpu.count`` stays physical and each profile gets
  ``nvidia.com/mig-<profile>.count`` (``mig-strategy.go:266-297``; the profile's ``+`` written
  ``.``, ``internal/resource/nvml-mig-device.go:97-105``).
* sharing: ``nvidia.com/gpu.replicas`` (0 for MIG-enabled GPUs' full-GPU labels, else the
  replicas, 1 unshared; ``resource.go:208-215``), ``nvidia.com/gpu.sharing-strategy``
  (``time-slicing``, ``mps`` or ``none``; ``resource.go:159-178``, ``api/config/v1/sharing.go:30-45``)
  and ``-SHARED`` after the product when replicas > 1 and the resource is not renamed
  (``resource.go:202-204``); the count stays the GPUs (``resource.go:160-171``).

mig-manager (NVIDIA/mig-parted ``cmd/nvidia-mig-manager``) writes ``nvidia.com/mig.config.state``
``failed`` when it could not apply the selected layout (gpuplan/drift.py reads it the same way).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuplan.importer.conventions import GFD_COUNT as COUNT
from gpuplan.importer.conventions import GFD_PRODUCT as PRODUCT
from gpuplan.importer.conventions import INSTANCE_TYPE_LABEL as INSTANCE_TYPE
from gpuplan.importer.conventions import MIG_CONFIG_STATE_LABEL as MIG_STATE

STRATEGY = "nvidia.com/mig.strategy"
REPLICAS = "nvidia.com/gpu.replicas"
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
_MIG_COUNT = re.compile(r"nvidia\.com/mig-([0-9]+g\.[0-9]+gb(\.[a-z.]+)?)\.count\Z")
_SUFFIX = re.compile(r"-MIG-(INVALID|[0-9]+g\.[0-9]+gb(\.[a-z.]+)?)(-SHARED)?\Z|-SHARED\Z")
_INT = re.compile(r"[0-9]{1,4}\Z")


@dataclass
class NodeGpus:
    gpus: int | None = None  # physical GPUs
    source: str = ""  # where ``gpus`` comes from
    strategy: str | None = None  # the node's mig.strategy label (None: none)
    mig: dict[str, int] = field(default_factory=dict)  # profile name -> MIG devices on the node
    sharing: str | None = None  # time-slicing | mps
    replicas: int | None = None
    renamed: bool = False  # shared under another resource name (no -SHARED suffix)
    fault: str | None = None
    todo: str | None = None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, str) and _INT.match(v) else None


def _profile(model: Any, name: str) -> Any:
    """The catalog profile GFD names ``name`` (``+`` written ``.``)."""
    for p in getattr(model, "profiles", ()):
        if name in (p.name, p.resource_suffix):
            return p
    return None


def _instance_gpus(labels: dict[str, str]) -> tuple[int | None, str]:
    """Physical GPUs from what Karpenter's AWS provider labels the node with (its instance type)."""
    from gpuplan.cloud.aws import instance_type

    n = _int(labels.get(KARPENTER_GPU_COUNT))
    if n:
        return n, f"label {KARPENTER_GPU_COUNT}"
    it = instance_type(labels.get(INSTANCE_TYPE, "")) if isinstance(labels.get(INSTANCE_TYPE), str) else None
    if it is not None and it.gpu_count:
        return it.gpu_count, f"instance type {it.name}"
    return None, ""


def read_node(labels: dict[str, str], model: Any, per_gpu: int | None = None) -> NodeGpus:
    """The GPUs of one node from its labels; ``model``: the catalog model of its product;
    ``per_gpu``: MIG devices per GPU of the profile, from the mig-parted config it selects."""
    out = NodeGpus()
    strategy = labels.get(STRATEGY)
    out.strategy = strategy if strategy in ("single", "mixed") else None
    product = labels.get(PRODUCT) if isinstance(labels.get(PRODUCT), str) else ""
    m = _SUFFIX.search(product)
    count = _int(labels.get(COUNT))
    replicas = _int(labels.get(REPLICAS))
    mode = labels.get(SHARING_STRATEGY)
    if mode in ("time-slicing", "mps") and replicas is not None and replicas > 1:
        out.sharing, out.replicas = mode, replicas
        shared_suffix = m is not None and (m[3] is not None or m[0] == "-SHARED")
        out.renamed = not shared_suffix
    if labels.get(MIG_STATE) == "failed":
        out.fault = (f"mig-manager could not apply the MIG config the node selects ({MIG_STATE}=failed): its "
                     "GPUs are not in the layout the config asks for")
    if m and m[1] == "INVALID":
        out.fault = (f"GFD labels the node {product} under mig.strategy=single: its GPUs carry several MIG "
                     "profiles, or a MIG-enabled GPU has no MIG device, or MIG-enabled and MIG-disabled GPUs are "
                     "mixed; the device plugin advertises no nvidia.com/gpu there")
        out.gpus, out.source = _instance_gpus(labels)
        return out
    if m and m[1]:  # single, MIG on: the count is the MIG devices
        prof = _profile(model, m[1])
        out.mig = {prof.name if prof is not None else m[1]: count or 0}
        gpus, src = _instance_gpus(labels)
        if gpus is None and count and per_gpu and count % per_gpu == 0:
            gpus, src = count // per_gpu, f"{count} MIG devices / {per_gpu} per GPU in the selected mig-parted config"
        if gpus is None and count and prof is not None and count % prof.max_instances == 0:
            gpus, src = count // prof.max_instances, f"{count} MIG devices / {prof.max_instances} {prof.name} per GPU"
            out.todo = (f"GFD counts {count} MIG devices {prof.name} and not the GPUs: {gpus} GPUs assumes "
                        f"{prof.max_instances} per GPU (check the GPUs per node)")
        if gpus is None:
            out.todo = f"GFD counts {count} MIG devices {m[1]}, not the GPUs: set the GPUs per node"
        out.gpus, out.source = gpus, src or f"label {COUNT}"
        return out
    out.gpus, out.source = count, f"label {COUNT}"
    if out.strategy == "mixed":
        for k, v in labels.items():
            mm = _MIG_COUNT.match(k)
            if mm and _int(v):
                prof = _profile(model, mm[1])
                out.mig[prof.name if prof is not None else mm[1]] = _int(v)
    return out


def layout(ng: NodeGpus) -> dict[str, int] | None:
    """The per-GPU MIG layout the node's MIG devices are, when they divide evenly over its GPUs."""
    if not ng.mig or not ng.gpus or any(n % ng.gpus for n in ng.mig.values()):
        return None
    return {p: n // ng.gpus for p, n in sorted(ng.mig.items())}
