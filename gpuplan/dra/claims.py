"""The DRA back-end's shared facts: which pools use it, and what each tier claims.

Rules (``gpuplan.rules.dra``), the lowering target (``gpuplan.lower.dra``), the
ResourceSlice model and its CEL proof (``gpuplan.dra.slices``,
``gpuplan.dra.proof``) and the migration report all ask here, so a DeviceClass,
its quota key and the proof that checks it can never disagree.

NVIDIA's DRA driver (``kubernetes-sigs/dra-driver-nvidia-gpu``, moved from
``NVIDIA/k8s-dra-driver-gpu``; image v0.5.0 is what GPU Operator v26.7.0 pins,
``NVIDIA/gpu-operator@v26.7.0 : deployments/gpu-operator/values.yaml`` L581-584)
publishes, under driver name ``gpu.nvidia.com``
(``cmd/gpu-kubelet-plugin/main.go`` L45, commit 95932046):

- a GPU whose MIG mode is off as one device of ``type: gpu``;
- a GPU whose MIG mode is on as its pre-created MIG devices only
  (``type: mig``, ``profile``, ``parentUUID``), never the parent GPU
  (static MIG, ``cmd/gpu-kubelet-plugin/nvlib.go`` L300-345).

DRA's CEL sees only a device's driver, attributes and capacity — no node, no
node label, no pool. A tier's selector can therefore only tell its pool apart
from other DRA pools by what the devices say: GPU model (``productName``),
``type`` and MIG ``profile``. The proof checks that this is enough.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.resolve import PoolView, ResolvedFleet
    from gpuplan.spec.models import Tier

DRIVER = "gpu.nvidia.com"  # the driver name and its attribute domain
PARENT_UUID = f"{DRIVER}/parentUUID"  # the matchAttribute that keeps slices on one GPU
DEVICE_PLUGIN = "device-plugin"
DRA = "dra"

# The chart's own GPU DeviceClasses, each rendered when resources.gpus.enabled
# (kubernetes-sigs/dra-driver-nvidia-gpu@95932046, the pinned 0.5.0,
# deployments/helm/dra-driver-nvidia-gpu/templates/): deviceclass-gpu.yaml L1-15 (on
# resource.k8s.io/v1 the `gpu.nvidia.com` class claims extendedResourceName
# nvidia.com/gpu, for every whole GPU on every DRA node), deviceclass-mig.yaml,
# deviceclass-vfio-gpu.yaml L5-10 (a whole GPU bound to vfio-pci for passthrough,
# published with the driver's PassthroughSupport gate: cmd/gpu-kubelet-plugin/
# allocatable.go L292-300). The compute-domain classes are IMEX channels, not GPUs.
# tests/dra checks this table against the pinned chart's DeviceClass templates
# (gpuplan/upstream/charts/dra-driver-nvidia-gpu-0.5.0.json).
CHART_CLASSES: dict[str, str | None] = {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": None,
                                        "vfio.gpu.nvidia.com": None}
CHART_CLASS_TEMPLATES: dict[str, str] = {"templates/deviceclass-gpu.yaml": "gpu.nvidia.com",
                                         "templates/deviceclass-mig.yaml": "mig.nvidia.com",
                                         "templates/deviceclass-vfio-gpu.yaml": "vfio.gpu.nvidia.com"}
NOT_GPU_CLASS_TEMPLATES = ("templates/deviceclass-compute-domain-daemon.yaml",
                           "templates/deviceclass-compute-domain-default-channel.yaml")
# KEP-5004: every DeviceClass is also the extended resource ``<prefix><class>`` (1.34 alpha, 1.36 beta)
IMPLICIT_DRA_PREFIX = "deviceclass.resource.kubernetes.io/"

# The GPU Operator's per-node switch for its device plugin: the DaemonSet selects
# nodes labelled "true" (NVIDIA/gpu-operator@v26.7.0 :
# assets/state-device-plugin/0500_daemonset.yaml L19-20), and the operator sets
# the label only where it is absent or empty, so "false" stays
# (controllers/state_manager.go L476-483). The DRA kubelet plugin selects the
# same label's "false": one label decides which back-end runs on a node.
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"


def pool_backend(rf: "ResolvedFleet", pv: "PoolView") -> str:
    a = pv.pool.allocation
    if a is not None and a.backend is not None:
        return a.backend
    return rf.fleet.spec.cluster.allocation.backend


def is_dra(rf: "ResolvedFleet", pv: "PoolView") -> bool:
    return pool_backend(rf, pv) == DRA


def pool_extended_resources(rf: "ResolvedFleet", pv: "PoolView") -> bool:
    a = pv.pool.allocation
    if a is not None and a.extended_resources is not None:
        return a.extended_resources
    return rf.fleet.spec.cluster.allocation.extended_resources


def dra_pools(rf: "ResolvedFleet") -> list["PoolView"]:
    return [pv for pv in rf.pools if is_dra(rf, pv)]


def any_dra(rf: "ResolvedFleet") -> bool:
    # asked once per namespace: remembered on the fleet (like its cached_property
    # facts) so a build stays linear in namespaces × pools
    memo = rf.__dict__.get("_any_dra")
    if memo is None:
        memo = rf.__dict__["_any_dra"] = any(is_dra(rf, pv) for pv in rf.pools)
    return memo


@dataclass(frozen=True)
class TierClaim:
    """What one DRA tier claims: a DeviceClass, its selector, its templates."""

    tier: str
    pool: str
    device_type: str  # "gpu" or "mig"
    profile: str | None
    product_names: tuple[str, ...]
    extended_resource: str | None  # DeviceClass extendedResourceName (None: pods use the claim template)
    max_per_pod: int

    @property
    def class_name(self) -> str:
        return device_class_name(self.tier)

    @property
    def quota_key(self) -> str:
        return f"{self.class_name}.deviceclass.resource.k8s.io/devices"

    @property
    def selector(self) -> str:
        """The DeviceClass CEL selector. The driver test comes first: ``&&``
        short-circuits, so devices of other drivers never reach an attribute
        lookup that would fail (a CEL error fails the allocation, it is not a
        non-match)."""
        a = f"device.attributes['{DRIVER}']"
        parts = [f"device.driver == '{DRIVER}'", f"{a}.type == '{self.device_type}'"]
        if self.profile is not None:
            parts.append(f"{a}.profile == '{self.profile}'")
        names = ", ".join(f"'{n}'" for n in self.product_names)
        parts.append(f"{a}.productName in [{names}]")
        return " && ".join(parts)

    def template_counts(self) -> tuple[int, ...]:
        """Devices per claim of each ResourceClaimTemplate: 1, and maxGPUsPerPod when larger."""
        return (1,) if self.max_per_pod <= 1 else (1, self.max_per_pod)

    def needs_parent_constraint(self, count: int) -> bool:
        return self.device_type == "mig" and count > 1


def device_class_name(tier: "Tier | str") -> str:
    return f"gpuplan-{tier if isinstance(tier, str) else tier.name}"


def claim_template_name(tier: str, count: int) -> str:
    return f"gpuplan-{tier}" if count == 1 else f"gpuplan-{tier}-x{count}"


def tier_claim(rf: "ResolvedFleet", tier: "Tier") -> TierClaim | None:
    """The tier's DRA claim, or None when the tier is not on a DRA pool or
    its devices cannot be told (unknown pool or GPU; rules report those)."""
    pv = rf.tier_pool(tier)
    if pv is None or not is_dra(rf, pv) or pv.gpu is None:
        return None
    s = pv.pool.sharing
    if s.mode == "mig":
        if tier.profile is not None:
            device_type, profile = "mig", tier.profile
        else:
            device_type, profile = "gpu", None  # the pool's GPUs left without MIG
    elif s.mode == "exclusive":
        device_type, profile = "gpu", None
    else:
        return None  # time-slicing / MPS: not on DRA (rules say so)
    ext = rf.tier_resource(tier) if pool_extended_resources(rf, pv) else None
    return TierClaim(
        tier=tier.name, pool=pv.name, device_type=device_type, profile=profile,
        product_names=tuple(pv.gpu.smi_names), extended_resource=ext,
        max_per_pod=tier.max_gpus_per_pod or 1,
    )


def tier_claims(rf: "ResolvedFleet") -> list[TierClaim]:
    """Every DRA tier's claim, in spec order."""
    out = []
    for t in rf.fleet.spec.tiers:
        c = tier_claim(rf, t)
        if c is not None:
            out.append(c)
    return out
