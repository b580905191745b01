"""Kubernetes features the DRA back-end uses, and their maturity per minor version.

One table, read by the DRA rules (``gpuplan.rules.dra``) and rendered into
docs/dra.md. Each row says, per Kubernetes minor, whether the feature exists
and whether its feature gate is on by default. Sources (pinned):

- ``kubernetes/kubernetes : pkg/features/kube_features.go`` (versioned feature
  gates): ``DynamicResourceAllocation`` alpha 1.26 (off), beta 1.32 (off),
  GA 1.34 (on), locked on 1.35; ``DRAExtendedResource`` alpha 1.34 (off),
  beta 1.36 (on), GA 1.37 (locked);
- ``kubernetes/enhancements : keps/sig-node/4381-dra-structured-parameters``
  (KEP-4381, the ``resource.k8s.io/v1`` API: served from 1.34) and
  ``keps/sig-scheduling/5004-dra-extended-resource/kep.yaml`` (KEP-5004:
  alpha v1.34, beta v1.36, stable v1.37);
- ``kubernetes/api@v0.36.3 : resource/v1/types.go`` L1978-1992:
  ``DeviceClassSpec.extendedResourceName``, ``+featureGate=DRAExtendedResource``.

Not used by gpuplan (listed so the docs can say why): partitionable devices
(KEP-4815, ``DRAPartitionableDevices``) and consumable capacity (KEP-5075,
``DRAConsumableCapacity``) — both are what dynamic MIG needs, which gpuplan
does not emit.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass

# The API version of every DRA object gpuplan writes (DeviceClass,
# ResourceClaimTemplate); resource.k8s.io/v1 is served from Kubernetes 1.34.
RESOURCE_API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class Feature:
    gate: str
    kep: str
    what: str
    # (first minor, stage, on by default), ascending; absent before the first
    stages: tuple[tuple[int, str, bool], ...]
    used_for: str
    source: str
    locked_from: int | None = None  # GA and no longer switchable from this minor


    def stage(self, minor: int) -> tuple[str, bool] | None:
        """(stage, default) at a Kubernetes minor; None: the feature does not exist yet."""
        found = None
        for first, stage, default in self.stages:
            if minor >= first:
                found = (stage, default)
        return found

    def enabled(self, minor: int, gates: dict[str, bool]) -> bool:
        st = self.stage(minor)
        if st is None:
            return False
        stage, default = st
        if self.locked_from is not None and minor >= self.locked_from:
            return default  # locked: the API server ignores the flag
        return gates.get(self.gate, default)

    @property
    def first_minor(self) -> int:
        return self.stages[0][0]


DYNAMIC_RESOURCE_ALLOCATION = Feature(
    gate="DynamicResourceAllocation",
    kep="KEP-4381",
    what="Dynamic Resource Allocation with structured parameters: ResourceSlices, DeviceClasses, "
         "ResourceClaims and their templates, CEL selectors, matchAttribute constraints, "
         "`<class>.deviceclass.resource.k8s.io/devices` quotas",
    stages=((26, "alpha", False), (32, "beta", False), (34, "GA", True)),
    used_for="every DRA object; gpuplan writes resource.k8s.io/v1, served from 1.34",
    locked_from=35,
    source="kubernetes/kubernetes pkg/features/kube_features.go; "
           "kubernetes/enhancements keps/sig-node/4381-dra-structured-parameters",
)

DRA_EXTENDED_RESOURCE = Feature(
    gate="DRAExtendedResource",
    kep="KEP-5004",
    what="DeviceClass `extendedResourceName`: pods that request an extended resource "
         "(nvidia.com/gpu, nvidia.com/mig-1g.10gb) are served by DRA on nodes without a device plugin",
    stages=((34, "alpha", False), (36, "beta", True), (37, "GA", True)),
    used_for="`extendedResources: true` (unchanged pod specs)",
    locked_from=37,
    source="kubernetes/kubernetes pkg/features/kube_features.go; "
           "kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource/kep.yaml; "
           "kubernetes/api@v0.36.3 resource/v1/types.go L1978-1992",
)

# Listed for the docs only: gpuplan never emits what needs them.
DRA_PARTITIONABLE_DEVICES = Feature(
    gate="DRAPartitionableDevices",
    kep="KEP-4815",
    what="devices that share counters (dynamic MIG partitions of one GPU)",
    stages=((33, "alpha", False), (36, "beta", True)),
    used_for="not used: dynamic MIG is out of scope (static MIG through mig-manager)",
    source="kubernetes/kubernetes pkg/features/kube_features.go; KEP-4815",
)
DRA_CONSUMABLE_CAPACITY = Feature(
    gate="DRAConsumableCapacity",
    kep="KEP-5075",
    what="devices shared by several claims, each consuming part of its capacity",
    stages=((34, "alpha", False), (36, "beta", True)),
    used_for="not used: gpuplan does not share DRA devices between claims",
    source="kubernetes/kubernetes pkg/features/kube_features.go; KEP-5075",
)

FEATURES: tuple[Feature, ...] = (
    DYNAMIC_RESOURCE_ALLOCATION, DRA_EXTENDED_RESOURCE, DRA_PARTITIONABLE_DEVICES, DRA_CONSUMABLE_CAPACITY,
)
USED: tuple[Feature, ...] = (DYNAMIC_RESOURCE_ALLOCATION, DRA_EXTENDED_RESOURCE)
BY_GATE = {f.gate: f for f in FEATURES}

# The minor from which gpuplan can emit DRA objects at all (resource.k8s.io/v1).
MIN_MINOR = 34


def minor(kubernetes_version: str) -> int:
    """``"1.34"`` -> 34."""
    return int(kubernetes_version.split(".")[1])


def maturity_table(minors: range = range(32, 38)) -> list[list[str]]:
    """Rows for docs/dra.md: gate, KEP, then the stage per minor (``-`` absent, ``+`` on by default)."""
    rows = []
    for f in FEATURES:
        cells = [f"`{f.gate}`", f.kep]
        for m in minors:
            st = f.stage(m)
            cells.append("-" if st is None else f"{st[0]}{' (on)' if st[1] else ' (off)'}")
        cells.append(f.used_for)
        rows.append(cells)
    return rows


def maturity_markdown(minors: range = range(32, 38)) -> str:
    """The gates table of docs/dra.md (a test keeps the page in step with this module)."""
    head = ["gate", "KEP", *(f"1.{m}" for m in minors), "gpuplan uses it for"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in maturity_table(minors)]
    return "\n".join(lines) + "\n"
