"""The resolved fleet: a validated spec plus what follows from it.

Rules and lowering targets both need the same derived facts — a pool's GPU
model from the catalog, its GPUs per node, the resources its nodes advertise
under its sharing mode, the resource a tier hands out. They are computed here,
once, so that a quota and the device-plugin config can never disagree about a
resource name.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.spec.loader import Document
from gpuplan.provisioning.pools import (
    ceiling_gpus, karpenter_node_toolkit, karpenter_pool, node_group_gpus_per_node, platform_gpu_stack,
    platform_node_resources, platform_tier_resource, static_nodes)
from gpuplan.spec.models import Fleet, Mig, Pool, Tier
from gpuplan.spec.validate import format_path

if TYPE_CHECKING:
    from gpuplan.catalog import GpuModel
    from gpuplan.capacity import CapacityReport
    from gpuplan.probe.inventory import NodeInventory

GPU = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"  # device plugin DefaultSharedResourceNameSuffix
# Every name NVIDIA's device plugin can advertise: nvidia.com/gpu, nvidia.com/mig-<profile> under
# `mixed`, each with the `.shared` suffix when shared and renamed (the plugin overrides any other
# rename: NVIDIA/k8s-device-plugin@v0.20.0 api/config/v1/replicas.go:38-60). The admission policy
# treats each as a GPU resource, not only the names this spec advertises: a name a change drops
# stays on the nodes until they are repartitioned, and no quota of the new tree charges it.
GPU_NAME_PREFIXES = (f"{GPU}.", "nvidia.com/mig-")


def is_gpu_name(name: str) -> bool:
    """Whether ``name`` is a GPU resource name of NVIDIA's device plugin (:data:`GPU_NAME_PREFIXES`)."""
    return name == GPU or name.startswith(GPU_NAME_PREFIXES)


def mig_resource(profile: str, strategy: str = "mixed") -> str | None:
    """Resource a MIG profile is advertised as (None: created but not advertised,
    e.g. a `<c>c.` compute-instance profile under `mixed`). The catalog owns the rule."""
    from gpuplan.catalog import mig_resource_name

    return mig_resource_name(profile, strategy)


@dataclass(frozen=True)
class PoolView:
    pool: Pool
    index: int
    gpu: "GpuModel | None"
    gpus_per_node: int | None

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def path(self) -> tuple:
        return ("spec", "pools", self.index)

    @property
    def node_count(self) -> int | None:
        """Static: the listed nodes. Autoscaled (Karpenter, node groups): the most nodes
        ``maxGPUs`` allows."""
        if self.pool.nodes is not None:
            return len(self.pool.nodes)
        ceiling = ceiling_gpus(self.pool)
        if ceiling is not None and self.gpus_per_node:
            return ceiling // self.gpus_per_node
        return None

    @property
    def physical_gpus(self) -> int:
        """GPUs the pool holds (Karpenter pools count at their maxGPUs rounded to whole nodes)."""
        nodes = self.node_count
        return (nodes or 0) * (self.gpus_per_node or 0)

    def gpu_layouts(self) -> list[dict[str, int] | None]:
        """The MIG layout of each GPU index of a node (None: MIG disabled)."""
        s = self.pool.sharing
        n = self.gpus_per_node or 0
        if not isinstance(s, Mig):
            return [None] * n
        if s.layout is not None:
            return [dict(s.layout)] * n
        per: list[dict[str, int] | None] = [None] * n
        for group in s.devices or ():
            for i in group.devices:
                if i < n:
                    per[i] = dict(group.layout) if group.layout is not None else None
        return per

    def node_resources(self) -> dict[str, int]:
        """Extended resources one node advertises, in device-plugin units."""
        return dict(self._node_resources)

    @cached_property
    def _node_resources(self) -> dict[str, int]:
        # cached_property writes the instance __dict__ directly, so it works on
        # this frozen dataclass; lowering asks for these once per namespace
        platform = platform_node_resources(self)
        if platform is not None:  # the platform's own device plugin (GKE) decides
            return platform
        s = self.pool.sharing
        n = self.gpus_per_node or 0
        if s.mode == "exclusive":
            return {GPU: n} if n else {}
        if s.mode in ("time-slicing", "mps"):
            name = GPU + SHARED_SUFFIX if s.rename_by_default else GPU
            return {name: n * s.replicas} if n else {}
        out: dict[str, int] = {}
        for layout in self.gpu_layouts():
            if layout is None:
                out[GPU] = out.get(GPU, 0) + 1
                continue
            for profile, count in layout.items():
                name = mig_resource(profile, s.strategy)
                if name is not None:
                    out[name] = out.get(name, 0) + count
        return dict(sorted(out.items()))

    def resources(self) -> dict[str, int]:
        """Extended resources of the whole pool (Karpenter pools at their maximum)."""
        nodes = self.node_count or 0
        return {k: v * nodes for k, v in self.node_resources().items()}

    # The node-label values that select a pool's device-plugin and mig-parted
    # configs are content-addressed, so they are decided where the configs are
    # built: gpuplan.lower.device_plugin.config_key, gpuplan.lower.mig_parted.config_name.


@dataclass
class ResolvedFleet:
    fleet: Fleet
    doc: Document
    pools: list[PoolView]
    inventory: list["NodeInventory"] = field(default_factory=list)
    inventory_files: list[str] = field(default_factory=list)
    # what the existing generated tree says about config names nodes may still
    # carry (gpuplan.identity.PreviousConfigs), set by the driver before lowering
    previous: Any = None

    @property
    def file(self) -> str:
        return self.doc.file

    @cached_property
    def pool_by_name(self) -> dict[str, PoolView]:
        return {p.name: p for p in self.pools}

    @cached_property
    def tier_by_name(self) -> dict[str, Tier]:
        return {t.name: t for t in self.fleet.spec.tiers}

    @cached_property
    def tier_index(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.fleet.spec.tiers)}

    @cached_property
    def toolkit(self) -> str | None:
        """The fleet's container toolkit: ``managed`` or ``preinstalled``; None
        when the spec leaves it open and the pools disagree (GP640 reports it).
        EKS AL2023 NVIDIA AMIs ship a toolkit; Bottlerocket nodes run no
        operator operand, so they do not count either way."""
        chosen = self.fleet.spec.cluster.gpu_operator.toolkit
        if chosen is not None:
            return chosen
        kinds = set()
        for pv in self.pools:
            k = pv.pool.karpenter
            if k is None and platform_gpu_stack(pv.pool):
                continue  # the platform's own GPU stack: no operator operand on its nodes
            if k is None or k.driver == "gpu-operator":  # NAP without AKS's driver: runc (GP699)
                kinds.add("managed")
            elif karpenter_node_toolkit(self.fleet.spec.cluster, pv.pool):
                kinds.add("preinstalled")
        if len(kinds) > 1:
            return None
        return kinds.pop() if kinds else "managed"

    @cached_property
    def capacity(self) -> "CapacityReport":
        """The capacity report; capacity rules and CAPACITY.md share one computation."""
        from gpuplan.capacity import capacity

        return capacity(self)

    def tier_pool(self, tier: Tier) -> PoolView | None:
        return self.pool_by_name.get(tier.pool)

    def tier_resource(self, tier: Tier) -> str | None:
        """The extended resource a tier's pods request (None when it cannot be told)."""
        return self._tier_resources.get(tier.name) if tier.name in self.tier_by_name else self._tier_resource(tier)

    @cached_property
    def _tier_resources(self) -> dict[str, str | None]:
        return {t.name: self._tier_resource(t) for t in self.fleet.spec.tiers}

    @cached_property
    def gpu_resources(self) -> tuple[str, ...]:
        """Every extended GPU resource the fleet's pools advertise or its tiers name, sorted."""
        names = {name for pv in self.pools for name in pv.node_resources()}
        names.update(r for r in self._tier_resources.values() if r is not None)
        return tuple(sorted(names))

    def _tier_resource(self, tier: Tier) -> str | None:
        pv = self.tier_pool(tier)
        if pv is None:
            return None
        if platform_gpu_stack(pv.pool):
            return platform_tier_resource(pv, tier)
        s = pv.pool.sharing
        if s.mode == "exclusive":
            return GPU
        if s.mode in ("time-slicing", "mps"):
            return GPU + SHARED_SUFFIX if s.rename_by_default else GPU
        if s.strategy == "single":
            return GPU
        if tier.profile:
            return mig_resource(tier.profile)
        # no profile on a mixed pool: the GPUs its device groups leave MIG-disabled
        return GPU if any(lay is None for lay in pv.gpu_layouts()) else None

    def diag(
        self,
        code: Code,
        message: str,
        path: tuple,
        *,
        hint: str | None = None,
        key: bool = False,
        severity: Severity | None = None,
    ) -> Diagnostic:
        line, col = self.doc.locate(path, key=key)
        return code.diag(
            message, file=self.doc.file, line=line, col=col, path=format_path(path) or None,
            hint=hint, severity=severity,
        )


def karpenter_gpus_per_node(pool: Pool) -> int | None:
    """GPUs per node of a Karpenter pool: declared, else from its first known instance type
    (EC2 instance type, else Azure VM size)."""
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    if pool.karpenter is None:
        return None
    from gpuplan.cloud.aws import instance_type

    for name in pool.karpenter.instance_types:
        it = instance_type(name)
        if it is not None and it.gpu_count:
            return it.gpu_count
    from gpuplan.provisioning import nap  # Azure VM sizes (Node Auto Provisioning)

    return nap.gpus_per_node(pool)


def resolve(fleet: Fleet, doc: Document, *, spec_dir: Path | None = None) -> ResolvedFleet:
    from gpuplan.catalog import resolve_gpu

    views = []
    for i, p in enumerate(fleet.spec.pools):
        if static_nodes(p):
            gpn = p.gpus_per_node
        elif karpenter_pool(p):
            gpn = karpenter_gpus_per_node(p)
        else:
            gpn = node_group_gpus_per_node(p)
        views.append(PoolView(pool=p, index=i, gpu=resolve_gpu(p.gpu), gpus_per_node=gpn))
    return ResolvedFleet(fleet=fleet, doc=doc, pools=views)


def as_plain(obj: Any) -> Any:
    """Pydantic model -> plain data with YAML key names (for messages and diffs)."""
    return obj.model_dump(by_alias=True, exclude_none=True)
