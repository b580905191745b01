"""The fleet spec, ``apiVersion: gpuplan.dev/v1alpha1``, ``kind: Fleet``.

Models are strict (no type coercion: ``"4"`` is not 4), closed (unknown keys
are errors) and frozen. Only structure lives here; meaning (MIG geometry,
capacity, references between pools, tiers and tenants) is checked by the rule
families in ``gpuplan.rules``, which can explain themselves better than a type.

YAML keys are camelCase, as in Kubernetes; Python attributes are snake_case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

API_VERSION = "gpuplan.dev/v1alpha1"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_PROFILE = re.compile(r"([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-][a-z.]+(,[a-z.]+)*)?\Z")
_DURATION = re.compile(r"(([0-9]+(s|m|h))+|Never)\Z")
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _dns_label(v: str) -> str:
    if len(v) > 63 or not _DNS_LABEL.match(v):
        raise PydanticCustomError(
            "dns1123_label",
            "'{value}' is not a valid name: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (a DNS-1123 label)",
            {"value": v},
        )
    return v


def _dns_subdomain(v: str) -> str:
    if len(v) > 253 or not _DNS_SUBDOMAIN.match(v):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "'{value}' is not a valid node name: use lowercase letters, digits, '-' and '.' "
            "(a DNS-1123 subdomain, at most 253 characters)",
            {"value": v},
        )
    return v


def _label_key(v: str) -> str:
    prefix, _, name = v.rpartition("/")
    ok = 0 < len(name) <= 63 and _LABEL_NAME.match(name)
    if prefix:
        ok = ok and len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)
    if not ok:
        raise PydanticCustomError(
            "label_key", "'{value}' is not a valid Kubernetes label key", {"value": v}
        )
    return v


def _label_value(v: str) -> str:
    if len(v) > 63 or not _LABEL_VALUE.match(v):
        raise PydanticCustomError(
            "label_value",
            "'{value}' is not a valid Kubernetes label value (at most 63 characters: "
            "letters, digits, '-', '_' and '.', starting and ending with a letter or digit)",
            {"value": v},
        )
    return v


def _profile_name(v: str) -> str:
    if len(v) > 32 or not _PROFILE.match(v):
        raise PydanticCustomError(
            "mig_profile_name",
            "'{value}' is not a MIG profile name (expected <G>g.<GB>gb, e.g. 1g.10gb or 1g.10gb+me)",
            {"value": v},
        )
    return v


def _duration(v: str) -> str:
    if len(v) > 32 or not _DURATION.match(v):
        raise PydanticCustomError(
            "duration", "'{value}' is not a duration like 720h, 30m or Never", {"value": v}
        )
    secs = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(v))
    if secs > MAX_DURATION_SECONDS:
        raise PydanticCustomError(
            "duration_range",
            "'{value}' is longer than a Go time.Duration holds (about 292 years, 2562047h); "
            "Karpenter cannot parse it",
            {"value": v},
        )
    return v


@dataclass(frozen=True)
class Why:
    """Why a number has its bound: shown with a range error, listed in docs/limits.md.
    Every number in the spec has an upper bound so that validation work is set by the
    size of the file, never by the size of its numbers."""

    text: str


def bounded(lo: int, hi: int, why: str) -> Any:
    return Annotated[int, Field(ge=lo, le=hi), Why(why)]


# The bounds (docs/limits.md lists them with these reasons).
MAX_GPUS_PER_NODE = 64
MAX_FLEET_GPUS = 100_000
MAX_NODES_PER_POOL = 5_000
MAX_REPLICAS = 1_024
MAX_MIG_INSTANCES = 64
MAX_UNITS_PER_POD = MAX_GPUS_PER_NODE * MAX_REPLICAS
MAX_QUOTA = MAX_FLEET_GPUS * MAX_REPLICAS
MAX_PRICE = 1_000.0
MAX_OVERSUBSCRIPTION = 100.0
MAX_PRIORITY = 1_000_000_000
MIN_PRIORITY = -2_147_483_648
MAX_DURATION_SECONDS = (2**63 - 1) // 10**9  # Go time.Duration (int64 nanoseconds), ~292 years

_WHY_NODE = (f"no GPU server has more than {MAX_GPUS_PER_NODE} GPUs (the largest today have 16)")
_WHY_FLEET = (f"Kubernetes supports at most 5,000 nodes per cluster; {MAX_FLEET_GPUS:,} GPUs is more "
              "than such a cluster can hold")

# Where the generated tree lives: these land in Argo CD Applications / Flux objects verbatim.
_URL_CHAR = r"[^\s\\\"'<>^`{|}]"  # RFC 3986: no spaces, quotes, backslashes or braces
_URL = re.compile(rf"(https?|ssh|git)://[^/\s@\\]+(@[^/\s\\]+)?(/{_URL_CHAR}*)?\Z")
_SCP = re.compile(rf"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s:\\]{_URL_CHAR}*\Z")  # git@host:org/repo.git
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|\.lock(/|\Z)|(\A|/)\.|/\Z|\.\Z|\A/")


def _repo_url(v: str) -> str:
    if len(v) > 2048 or not (_URL.match(v) or _SCP.match(v)):
        raise PydanticCustomError(
            "repo_url",
            "'{value}' is not a Git repository URL: use https://host/org/repo.git, ssh://git@host/org/repo.git "
            "or git@host:org/repo.git (no spaces)",
            {"value": v},
        )
    return v


def _repo_path(v: str) -> str:
    parts = v.split("/")
    if (len(v) > 1024 or v.startswith("/") or "\\" in v or any(p == ".." for p in parts)
            or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in v)):
        raise PydanticCustomError(
            "repo_path",
            "'{value}' is not a path inside the repository: use a relative path without '..', "
            "spaces or a leading '/', e.g. generated or clusters/prod/generated",
            {"value": v},
        )
    return v


def _git_revision(v: str) -> str:
    # git check-ref-format, plus commit ids and tags, which pass it too
    if not v or len(v) > 255 or _REF_BAD.search(v):
        raise PydanticCustomError(
            "git_revision",
            "'{value}' is not a Git branch, tag or commit (git check-ref-format: no spaces, '..', "
            "'~^:?*[\\', leading '/' or '.')",
            {"value": v},
        )
    return v


Name = Annotated[str, AfterValidator(_dns_label)]
NodeName = Annotated[str, AfterValidator(_dns_subdomain)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
ProfileName = Annotated[str, AfterValidator(_profile_name)]
Duration = Annotated[str, AfterValidator(_duration)]
GpusPerNode = bounded(1, MAX_GPUS_PER_NODE, _WHY_NODE)
FleetGpus = bounded(1, MAX_FLEET_GPUS, _WHY_FLEET)
MigCount = bounded(1, MAX_MIG_INSTANCES, "no GPU holds more than 7 MIG instances")
GpuIndex = bounded(0, MAX_GPUS_PER_NODE - 1, f"GPU indices of a node run from 0 to at most {MAX_GPUS_PER_NODE - 1} "
                   f"({_WHY_NODE})")
Replicas = bounded(-(2**31), MAX_REPLICAS, f"more than {MAX_REPLICAS:,} replicas of one GPU leave each pod "
                   "too little of it to run anything, and the device plugin advertises every replica as a device")
UnitsPerPod = bounded(1, MAX_UNITS_PER_POD, f"no node advertises more than {MAX_UNITS_PER_POD:,} units "
                      f"({MAX_GPUS_PER_NODE} GPUs x {MAX_REPLICAS:,} replicas)")
Quota = bounded(0, MAX_QUOTA, f"no fleet holds more than {MAX_QUOTA:,} units ({MAX_FLEET_GPUS:,} GPUs x "
                f"{MAX_REPLICAS:,} replicas)")
Priority = bounded(MIN_PRIORITY, MAX_PRIORITY,
                   "PriorityClass values above 1,000,000,000 are reserved for system classes "
                   "(system-cluster-critical, system-node-critical) and the API server refuses them; "
                   "the value is an int32")
Weight = bounded(1, 100, "Karpenter NodePool weight is 1 to 100 (the NodePool CRD's minimum and maximum)")
Price = Annotated[float, Field(ge=0, le=MAX_PRICE, allow_inf_nan=False),
                  Why(f"a price above {MAX_PRICE:,.0f} per GPU-hour is a typo (on-demand H100s cost about 12)")]
Oversubscription = Annotated[float, Field(gt=0, le=MAX_OVERSUBSCRIPTION, allow_inf_nan=False),
                             Why(f"quota above {MAX_OVERSUBSCRIPTION:.0f}x capacity means no capacity check")]


# Default instances come from model_construct: they hold the models' own
# defaults, valid by definition, whereas calling the class would compile that
# model's validator separately on first use (see gpuplan.spec.validator_cache).
def _dcgm_exporter() -> DcgmExporter:
    return DcgmExporter.model_construct()


def _gpu_operator() -> GpuOperator:
    return GpuOperator.model_construct()


def _exclusive() -> Exclusive:
    return Exclusive.model_construct(mode="exclusive")


def _topology() -> Topology:
    return Topology.model_construct()


def _rules() -> Rules:
    return Rules.model_construct()


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        defer_build=True,
    )


# --- cluster -----------------------------------------------------------------


class GitOps(Model):
    """How the generated tree reaches the cluster."""

    engine: Literal["argocd", "flux"] = "argocd"
    repo_url: Annotated[str, AfterValidator(_repo_url)] = Field(alias="repoURL")
    revision: Annotated[str, AfterValidator(_git_revision)] = "main"
    path: Annotated[str, AfterValidator(_repo_path)] = "generated"
    namespace: Name | None = Field(
        default=None, description="Namespace of the Argo CD / Flux objects (argocd or flux-system)."
    )
    project: Name = Field(default="default", description="Argo CD project.")


class DcgmExporter(Model):
    enabled: bool = True
    service_monitor: bool = True


class GpuOperator(Model):
    chart_version: str = Field(default="v26.7.0", pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")
    namespace: Name = "gpu-operator"
    driver: Literal["managed", "preinstalled"] = Field(
        default="managed",
        description="`preinstalled` on images that ship the driver (EKS AL2023/Bottlerocket NVIDIA AMIs).",
    )
    driver_version: str | None = None
    toolkit: Literal["managed", "preinstalled"] = "managed"
    dcgm_exporter: DcgmExporter = Field(default_factory=_dcgm_exporter)


class Aws(Model):
    """Cluster-wide settings for Karpenter pools on AWS."""

    cluster_name: Name
    node_role: str = Field(min_length=1, description="IAM role of Karpenter-launched nodes.")
    subnet_tags: dict[str, str] | None = Field(
        default=None, description="Default: {karpenter.sh/discovery: <clusterName>}."
    )
    security_group_tags: dict[str, str] | None = Field(
        default=None, description="Default: {karpenter.sh/discovery: <clusterName>}."
    )
    mig_ready_image: str | None = Field(
        default=None,
        alias="migReadyImage",
        min_length=1,
        max_length=1024,
        pattern=r"^\S+$",  # a container image reference: the API server refuses surrounding whitespace
        description="Image (bash + kubectl) of the DaemonSet that removes the MIG startup taint from "
        "Karpenter nodes; default registry.k8s.io/kubectl:v<kubernetesVersion>.0.",
    )


class Cluster(Model):
    name: Name | None = None
    kubernetes_version: str = Field(pattern=r"^1\.[0-9]{2}$")
    gitops: GitOps
    gpu_operator: GpuOperator = Field(default_factory=_gpu_operator)
    aws: Aws | None = None


# --- pools -------------------------------------------------------------------


class Taint(Model):
    key: LabelKey
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Topology(Model):
    """kubelet Topology Manager settings for the pool's nodes."""

    policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = "none"
    scope: Literal["container", "pod"] = "container"
    cpu_manager_policy: Literal["none", "static"] | None = Field(
        default=None, description="Default: static when a policy other than none is set."
    )
    memory_manager_policy: Literal["None", "Static"] | None = None
    reserved_system_cpus: str | None = Field(default=None, alias="reservedSystemCPUs")
    prefer_closest_numa_nodes: bool = Field(default=False, alias="preferClosestNUMANodes")


class Karpenter(Model):
    """The pool's nodes are launched by Karpenter on AWS."""

    instance_types: list[str] = Field(min_length=1)
    capacity_types: list[Literal["spot", "on-demand", "reserved"]] = Field(
        default=["on-demand"], min_length=1
    )
    max_gpus: FleetGpus = Field(alias="maxGPUs")
    ami_family: Literal["AL2023", "Bottlerocket"] = "AL2023"
    ami_version: str = Field(default="latest", description="Pinned version, e.g. v20260801.")
    # at least one: an `In` requirement without values is refused by the NodePool CEL rule
    # "requirements with operator 'In' must have a value defined"
    zones: list[LabelValue] | None = Field(default=None, min_length=1)
    expire_after: Duration = "720h"
    consolidate_after: Duration | None = None
    weight: Weight | None = None
    node_overlay: bool = Field(
        default=False,
        description="Emit a NodeOverlay so Karpenter sees shared/MIG capacity (alpha feature gate).",
    )


class Exclusive(Model):
    mode: Literal["exclusive"]


class MigDevices(Model):
    """A layout for some GPUs of each node, by index (mig-parted `devices`)."""

    devices: list[GpuIndex] = Field(min_length=1, max_length=MAX_GPUS_PER_NODE)
    layout: dict[ProfileName, MigCount] | None = Field(
        default=None, description="Omit to leave these GPUs with MIG disabled (whole GPUs)."
    )


class Mig(Model):
    mode: Literal["mig"]
    strategy: Literal["mixed", "single"] = "mixed"
    layout: dict[ProfileName, MigCount] | None = Field(
        default=None, description="One layout for every GPU of every node."
    )
    devices: list[MigDevices] | None = Field(
        default=None, description="Per-GPU layouts; every GPU index appears once."
    )

    @model_validator(mode="after")
    def _one_layout_form(self) -> "Mig":
        if (self.layout is None) == (self.devices is None):
            raise PydanticCustomError(
                "mig_layout_form",
                "a MIG pool needs exactly one of `layout` (same on every GPU) or `devices` (per GPU)",
            )
        return self


class _Shared(Model):
    replicas: Replicas
    rename_by_default: bool = Field(
        default=True, description="Advertise <resource>.shared instead of nvidia.com/gpu."
    )
    fail_requests_greater_than_one: bool = True


class TimeSlicing(_Shared):
    mode: Literal["time-slicing"]


class Mps(_Shared):
    mode: Literal["mps"]


Sharing = Annotated[Union[Exclusive, Mig, TimeSlicing, Mps], Field(discriminator="mode")]


class Pool(Model):
    name: Name
    gpu: str = Field(min_length=1, description="GPU model: GFD name, nvidia-smi name or alias.")
    gpus_per_node: GpusPerNode | None = Field(
        default=None, description="Required for static pools; Karpenter pools take it from the instance type."
    )
    nodes: list[NodeName] | None = Field(default=None, max_length=MAX_NODES_PER_POOL, description="Static nodes, by Kubernetes node name.")
    karpenter: Karpenter | None = None
    sharing: Sharing = Field(default_factory=_exclusive)
    topology: Topology = Field(default_factory=_topology)
    taints: list[Taint] | None = Field(
        default=None, description="Default for Karpenter pools: nvidia.com/gpu=present:NoSchedule."
    )
    labels: dict[LabelKey, LabelValue] = {}
    price_per_gpu_hour: Price | None = Field(default=None, alias="pricePerGPUHour")
    interconnect: Literal["nvlink", "pcie"] | None = Field(
        default=None, description="GPU-to-GPU paths when no inventory says; default from the GPU model."
    )

    @model_validator(mode="after")
    def _one_provisioning(self) -> "Pool":
        if (self.nodes is None) == (self.karpenter is None):
            raise PydanticCustomError(
                "pool_provisioning",
                "a pool needs exactly one of `nodes` (static nodes) or `karpenter` (autoscaled)",
            )
        if self.nodes is not None and self.gpus_per_node is None:
            raise PydanticCustomError(
                "pool_gpus_per_node", "a static pool needs `gpusPerNode`"
            )
        return self

    @property
    def is_static(self) -> bool:
        return self.nodes is not None


# --- tiers and tenants -------------------------------------------------------


class Tier(Model):
    name: Name
    pool: Name
    profile: ProfileName | None = Field(default=None, description="MIG profile, for tiers on MIG pools.")
    workload: Literal["training", "inference", "interactive", "batch"] | None = None
    priority: Priority = 0
    preemption: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    max_gpus_per_pod: UnitsPerPod | None = Field(default=None, alias="maxGPUsPerPod")
    requires_nvlink: bool = Field(default=False, alias="requiresNVLink")
    max_oversubscription: Oversubscription | None = Field(
        default=None, description="Quota / capacity ratio allowed (default 1.0)."
    )
    enforce_priority: bool = Field(
        default=False, description="Scope this tier's quota to its PriorityClass."
    )
    description: str | None = None


class Tenant(Model):
    name: Name
    namespaces: list[Name] = Field(min_length=1)
    quotas: dict[Name, dict[Name, Quota]] = Field(
        default={}, description="namespace -> tier -> units of the tier's resource"
    )
    labels: dict[LabelKey, LabelValue] = {}


class DisabledRule(Model):
    code: str = Field(pattern=r"^GP[0-9]{3}$")
    reason: str = Field(min_length=1)


class Rules(Model):
    disable: list[DisabledRule] = []


class FleetSpec(Model):
    cluster: Cluster
    inventory: list[str] = Field(default=[], description="Globs of node-probe inventory files, relative to this file.")
    pools: list[Pool] = Field(min_length=1)
    tiers: list[Tier] = []
    tenants: list[Tenant] = []
    rules: Rules = Field(default_factory=_rules)


class Metadata(Model):
    name: Name
    labels: dict[LabelKey, LabelValue] = {}
    annotations: dict[str, str] = {}


class Fleet(Model):
    api_version: Literal["gpuplan.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Fleet"]
    metadata: Metadata
    spec: FleetSpec
