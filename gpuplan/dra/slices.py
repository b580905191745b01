"""A model of the ResourceSlices NVIDIA's DRA driver publishes for a pool's node.

The proof (``gpuplan.dra.proof``) evaluates every DeviceClass and claim
selector gpuplan emits against these slices. The model follows the driver's
kubelet plugin (``kubernetes-sigs/dra-driver-nvidia-gpu`` @95932046, the
0.5.0 line; file:line at that commit):

- one pool per node, named after the node, driver ``gpu.nvidia.com``
  (``cmd/gpu-kubelet-plugin/main.go`` L45; docs ``site/content/docs/install.md``:
  "The pool name matches the node name");
- static MIG (no ``DynamicMIG`` feature gate): a GPU with MIG mode off is one
  device ``gpu-<minor>`` of ``type: gpu``; a GPU with MIG mode on publishes
  only its pre-created MIG devices, never itself (``nvlib.go`` L300-345);
- GPU attributes ``type, uuid, productName, brand, architecture,
  cudaComputeCapability, driverVersion, cudaDriverVersion`` and capacity
  ``memory`` (``deviceinfo.go`` L170-218, L249-256); MIG attributes ``type:
  mig, parentUUID, profile, uuid`` plus the parent's ``productName, brand,
  architecture, ...`` (``mig.go`` L139-187, ``deviceinfo.go`` L258-281); MIG
  device names ``gpu-<minor>-mig-<profile without dots>-<profile id>-<placement
  start>`` (``mig.go`` L111-114) and one ``memorySlice<N>`` capacity per memory
  slice the instance covers (``deviceinfo.go`` L273-278).

Values that only a live node knows — UUIDs, PCI addresses, driver versions —
are stand-ins here (deterministic, derived from pool, node and GPU index); the
selectors gpuplan writes never test them. ``productName`` is the NVML name
(``device.GetName()``, ``nvlib.go`` L499), i.e. the catalog's nvidia-smi
name; MIG placements come from the same geometry engine that checks the
pool's mig-manager layout. One node stands for the pool: every node of a pool
has the same GPUs and layouts.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuplan.dra.claims import DRIVER
from gpuplan.k8s_features_dra import RESOURCE_API

if TYPE_CHECKING:
    from gpuplan.resolve import PoolView

# stand-ins for what only a node knows (never tested by gpuplan's selectors)
DRIVER_VERSION = "570.0.0"
CUDA_DRIVER_VERSION = "12.8.0"
BRAND = "Nvidia"


@dataclass(frozen=True)
class Device:
    """One published device, as DRA's CEL sees it."""

    pool: str  # gpuplan pool
    node: str
    name: str
    attributes: dict[str, dict[str, Any]]  # domain -> name -> value
    capacity: dict[str, dict[str, str]]  # domain -> name -> quantity

    @property
    def gpu_index(self) -> int:
        return int(self.name.split("-")[1])

    def attr(self, qualified: str) -> Any:
        domain, _, name = qualified.rpartition("/")
        return self.attributes.get(domain or DRIVER, {}).get(name)


def _rfc1123(s: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", s.lower())


def representative_node(pv: "PoolView") -> str:
    if pv.pool.nodes:
        return pv.pool.nodes[0]
    return f"{pv.name}-node"


def _uuid(kind: str, *parts: object) -> str:
    return f"{kind}-gpuplan-" + "-".join(str(p) for p in parts)


def pool_devices(pv: "PoolView") -> list[Device]:
    """The devices one node of the pool publishes (empty when the GPU model is unknown)."""
    from gpuplan.mig.solver import check_layout

    gpu = pv.gpu
    if gpu is None:
        return []
    node = representative_node(pv)
    common = {
        "productName": gpu.smi_names[0],
        "brand": BRAND,
        "architecture": gpu.architecture,
        "cudaComputeCapability": f"{gpu.compute_capability}.0",
        "driverVersion": DRIVER_VERSION,
        "cudaDriverVersion": CUDA_DRIVER_VERSION,
    }
    out: list[Device] = []
    for i, layout in enumerate(pv.gpu_layouts()):
        parent = _uuid("GPU", pv.name, node, i)
        if layout is None:
            out.append(Device(
                pv.name, node, f"gpu-{i}",
                {DRIVER: {"type": "gpu", "uuid": parent, **common}},
                {DRIVER: {"memory": f"{gpu.memory_mib}Mi"}},
            ))
            continue
        check = check_layout(gpu, layout)
        if not check.ok:
            continue  # MIG rules report it; mig-manager would create nothing
        for n, pl in enumerate(check.placements):
            prof = gpu.profile(pl.profile)
            pid = prof.smi_id if prof is not None and prof.smi_id is not None else 0
            gb = prof.memory_gb if prof is not None else 0
            cap = {"memory": f"{gb}Gi"}
            cap.update({f"memorySlice{s}": "1" for s in range(pl.start, pl.start + pl.size)})
            out.append(Device(
                pv.name, node, f"gpu-{i}-mig-{_rfc1123(pl.profile.replace('.', ''))}-{pid}-{pl.start}",
                {DRIVER: {"type": "mig", "uuid": _uuid("MIG", pv.name, node, i, n), "parentUUID": parent,
                          "profile": pl.profile, **common}},
                {DRIVER: cap},
            ))
    return out


def _attribute_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    return {"string": v}


_VERSION_ATTRS = frozenset({"cudaComputeCapability", "driverVersion", "cudaDriverVersion"})


def resource_slice(pv: "PoolView", devices: list[Device]) -> dict[str, Any]:
    """The ResourceSlice object (resource.k8s.io/v1) the driver would publish for the node."""
    node = representative_node(pv)
    devs = []
    for d in devices:
        attrs = {}
        for name, v in sorted(d.attributes[DRIVER].items()):
            attrs[name] = {"version": v} if name in _VERSION_ATTRS else _attribute_value(v)
        cap = {name: {"value": q} for name, q in sorted(d.capacity[DRIVER].items())}
        devs.append({"name": d.name, "attributes": attrs, "capacity": cap})
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devs,
        },
    }
