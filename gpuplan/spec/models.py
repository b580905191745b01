"""The fleet spec, ``apiVersion: gpuplan.dev/v1alpha1``, ``kind: Fleet``.

Models are strict (no type coercion: ``"4"`` is not 4), closed (unknown keys
are errors) and frozen. Only structure lives here; meaning (MIG geometry,
capacity, references between pools, tiers and tenants) is checked by the rule
families in ``gpuplan.rules``, which can explain themselves better than a type.

YAML keys are camelCase, as in Kubernetes; Python attributes are snake_case.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from gpuplan.k8snames import DNS_LABEL, DNS_SUBDOMAIN, LABEL_VALUE, QUALIFIED_NAME
from gpuplan.spec import examples

API_VERSION = "gpuplan.dev/v1alpha1"

_PROFILE = re.compile(r"([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-][a-z.]+(,[a-z.]+)*)?\Z")
_DURATION = re.compile(r"(([0-9]+(s|m|h))+|Never)\Z")
_DURATION_PART = re.compile(r"([0-9]+)(s|m|h)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _dns_label(v: str) -> str:
    if len(v) > 63 or not DNS_LABEL.match(v):
        raise PydanticCustomError(
            "dns1123_label",
            "'{value}' is not a valid name: use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (a DNS-1123 label)",
            {"value": v},
        )
    return v


def _dns_subdomain(v: str) -> str:
    if len(v) > 253 or not DNS_SUBDOMAIN.match(v):
        raise PydanticCustomError(
            "dns1123_subdomain",
            "'{value}' is not a valid node name: use lowercase letters, digits, '-' and '.' "
            "(a DNS-1123 subdomain, at most 253 characters)",
            {"value": v},
        )
    return v


def _label_key(v: str) -> str:
    prefix, _, name = v.rpartition("/")
    ok = 0 < len(name) <= 63 and QUALIFIED_NAME.match(name)
    if prefix:
        ok = ok and len(prefix) <= 253 and DNS_SUBDOMAIN.match(prefix)
    if not ok:
        raise PydanticCustomError(
            "label_key", "'{value}' is not a valid Kubernetes label key", {"value": v}
        )
    return v


def _label_value(v: str) -> str:
    if len(v) > 63 or not LABEL_VALUE.match(v):
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
NodeCount = bounded(0, MAX_NODES_PER_POOL, "a cluster has at most 5,000 nodes (Kubernetes' scalability limit)")
GangNodes = bounded(2, MAX_NODES_PER_POOL, "a job cannot span more nodes than a cluster has (5,000)")
Int32 = bounded(0, 2**31 - 1, "the field is an int32 in the consumer's API")
FairShareWeight = bounded(0, 1_000_000, "Kueue compares weights as ratios; past a million they mean nothing more")



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

    engine: Literal["argocd", "flux"] = Field(
        default="argocd",
        description="What syncs the generated tree: `argocd` (Applications) or `flux` "
        "(Kustomizations, HelmRepository, HelmRelease).",
    )
    repo_url: Annotated[str, AfterValidator(_repo_url)] = Field(
        alias="repoURL", description="Git repository that holds the generated tree."
    )
    revision: Annotated[str, AfterValidator(_git_revision)] = Field(
        default="main", description="Branch, tag or commit of `repoURL` to sync."
    )
    path: Annotated[str, AfterValidator(_repo_path)] = Field(
        default="generated", description="Directory of the generated tree inside `repoURL`."
    )
    namespace: Name | None = Field(
        default=None, description="Namespace of the Argo CD / Flux objects (argocd or flux-system)."
    )
    project: Name | None = Field(
        default=None,
        description="Argo CD project of the Applications. Default: gpuplan emits an AppProject "
        "gpuplan-<fleet> scoped to what it manages.",
    )


class DcgmExporter(Model):
    """DCGM Exporter, the GPU Operator's GPU metrics exporter."""

    enabled: bool = Field(default=True, description="Run DCGM Exporter on GPU nodes.")
    service_monitor: bool = Field(
        default=True, description="Create its Prometheus Operator ServiceMonitor (when `enabled`)."
    )


class DriverUpgrade(Model):
    """How the GPU Operator rolls a changed ``driverVersion`` onto nodes
    (chart ``driver.upgradePolicy``)."""

    auto_upgrade: bool = Field(
        default=True,
        description="The operator's upgrade controller replaces the driver node by node, evicting GPU pods.",
    )
    max_parallel_upgrades: NodeCount = Field(
        default=1, description="Nodes upgraded at once (0: all)."
    )
    max_unavailable: str = Field(
        default="25%", pattern=r"^([0-9]+|(100|[1-9]?[0-9])%)$",
        description="Nodes that may be unavailable during an upgrade: a count or a percentage.",
    )
    hold_job_pools: bool = Field(
        default=True,
        description="Keep automatic upgrades off the nodes of static pools that run a `training` or `batch` "
        "tier (node label `nvidia.com/gpu-driver-upgrade.skip: \"true\"`): the operator would delete their "
        "GPU pods, jobs included, when it upgrades a node. Those nodes are rolled by hand (the generated "
        "README says how).",
    )


class GpuOperator(Model):
    """The NVIDIA GPU Operator Helm release whose values gpuplan writes."""

    chart_version: str = Field(
        default="v26.7.0", pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$",
        description="Version of the gpu-operator Helm chart the values are written for.",
    )
    namespace: Name = Field(
        default="gpu-operator",
        description="Namespace of the GPU Operator and of the device-plugin and mig-parted ConfigMaps.",
    )
    driver: Literal["managed", "preinstalled"] = Field(
        default="managed",
        description="`preinstalled` on images that ship the driver (EKS AL2023/Bottlerocket NVIDIA AMIs).",
    )
    driver_version: str | None = Field(
        default=None,
        description="Managed driver: a branch (`R535`, precompiled driver images) or a full version "
        "(`535.104.05`).",
    )
    driver_upgrade: DriverUpgrade = Field(
        default_factory=DriverUpgrade, description="How the operator rolls a changed driver onto nodes."
    )
    toolkit: Literal["managed", "preinstalled"] | None = Field(
        default=None,
        description="NVIDIA Container Toolkit, one choice for the fleet: `managed` (the operator's, with CDI) "
        "or `preinstalled` (every GPU node ships one). Default: preinstalled when every pool is a Karpenter "
        "pool on an EKS NVIDIA AMI, managed when no pool is; a fleet with both must choose.",
    )
    dcgm_exporter: DcgmExporter = Field(default_factory=DcgmExporter, description="GPU metrics.")


# --- allocation back-end (device plugin or DRA) -------------------------------


AllocationBackend = Literal["device-plugin", "dra"]


class Allocation(Model):
    """How GPUs reach pods, for every pool that does not say otherwise."""

    backend: AllocationBackend = Field(
        default="device-plugin",
        description="`device-plugin`: NVIDIA's device plugin advertises extended resources; `dra`: NVIDIA's DRA "
        "driver publishes ResourceSlices and pods claim devices through DeviceClasses (Kubernetes >= 1.34).",
    )
    dra_driver_version: str = Field(
        default="v0.5.0", alias="draDriverVersion", pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$",
        description="Version of NVIDIA's DRA driver (chart `dra-driver-nvidia-gpu`) installed for `dra` pools.",
    )
    extended_resources: bool = Field(
        default=True,
        description="On `dra` pools, give each tier's DeviceClass the tier's device-plugin resource name as "
        "`extendedResourceName`, so pod specs that request it keep working (feature gate DRAExtendedResource).",
    )
    feature_gates: dict[str, bool] = Field(
        default={},
        description="Kubernetes feature gates the cluster sets away from its version's defaults, e.g. "
        "`{DRAExtendedResource: true}` on 1.34 or 1.35.",
    )


class PoolAllocation(Model):
    """The pool's allocation back-end, when it differs from the cluster's."""

    backend: AllocationBackend | None = Field(
        default=None, description="`device-plugin` or `dra`; default: `cluster.allocation.backend`."
    )
    extended_resources: bool | None = Field(
        default=None, description="Default: `cluster.allocation.extendedResources`."
    )


class Aws(Model):
    """Cluster-wide settings for Karpenter pools on AWS."""

    cluster_name: Name = Field(
        description="EKS cluster name; the default `karpenter.sh/discovery` tag value for subnets and security groups."
    )
    node_role: str = Field(min_length=1, description="IAM role of Karpenter-launched nodes.")
    karpenter_version: str = Field(
        default="1.14.1", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="The Karpenter version the cluster runs (no `v`): what the NodePools can rely on "
        "(GP633: `limits.nodes`, the pools' GPU ceiling, is enforced only from 1.11.0).",
    )
    subnet_tags: dict[str, str] | None = Field(
        default=None, description="Default: `{karpenter.sh/discovery: <clusterName>}`."
    )
    security_group_tags: dict[str, str] | None = Field(
        default=None, description="Default: `{karpenter.sh/discovery: <clusterName>}`."
    )


class Gcp(Model):
    """Cluster-wide settings for GKE node pools (``pools[].gke``), written as Config Connector objects."""

    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")] = Field(
        description="Google Cloud project id of the cluster (Config Connector annotation "
        "`cnrm.cloud.google.com/project-id`).", examples=["ml-platform-prod"],
    )
    location: Annotated[str, Field(pattern=r"^[a-z]+-[a-z]+[0-9]+(-[a-z])?$")] = Field(
        description="The cluster's location: a region (`us-central1`, regional cluster) or a zone "
        "(`us-central1-a`, zonal cluster).", examples=["us-central1"],
    )
    cluster_name: Name = Field(description="GKE cluster name (the node pools' `clusterRef.external`).")
    namespace: Name = Field(
        default="gpuplan-gke",
        description="Namespace of the ContainerNodePools in the cluster that runs Config Connector "
        "(docs/gke.md: they are not delivered with the rest of the tree).",
    )


class Azure(Model):
    """Cluster-wide settings for AKS agent pools (``pools[].aks``), written as Azure Service Operator
    objects (docs/aks.md)."""

    managed_cluster: Name = Field(
        description="Name of the cluster's Azure Service Operator `ManagedCluster` object: the agent pools' "
        "`spec.owner.name`.", examples=["aks-ml"],
    )
    namespace: Name = Field(
        default="gpuplan-aks",
        description="Namespace of the `ManagedCluster` object and the agent pools, in the cluster that runs Azure "
        "Service Operator (docs/aks.md: they are not delivered with the rest of the tree).",
    )


class CapiInfrastructureRef(Model):
    """The infrastructure machine template a Cluster API pool's machines are made from (it exists
    in the management cluster already: gpuplan references it, never writes it)."""

    kind: Annotated[str, Field(pattern=r"^[A-Z][A-Za-z0-9]*$", max_length=63)] = Field(
        description="Its kind, e.g. `Metal3MachineTemplate`, `VSphereMachineTemplate`, `AWSMachineTemplate`."
    )
    name: NodeName = Field(description="Its name, in the Cluster's namespace.")
    api_group: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                                    max_length=253)] = Field(
        default="infrastructure.cluster.x-k8s.io", alias="apiGroup", description="Its API group.",
    )


class CapiGpuTotal(Model):
    """One `--gpu-total=<type>:<min>:<max>` flag of the Cluster Autoscaler."""

    type: LabelValue = Field(description="GPU type: a `cluster-api/accelerator` label value.")
    min: Int32 = Field(default=0, description="Fewest GPUs of this type.")
    max: Int32 = Field(description="Most GPUs of this type in the cluster.")


class CapiCluster(Model):
    """Cluster-wide settings for Cluster API pools (``pools[].capi``): the Cluster their
    MachineDeployments belong to, in the management cluster, and the Cluster Autoscaler that sizes
    them (docs/capi.md)."""

    cluster_name: Name = Field(description="The Cluster API `Cluster` (`spec.clusterName` of the MachineDeployments).")
    namespace: Name = Field(default="default", description="The Cluster's namespace in the management cluster.")
    version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")] = Field(
        description="Kubernetes version of the machines (`spec.template.spec.version`), e.g. `v1.33.4`.",
        examples=["v1.33.4"],
    )
    autoscaler_version: str = Field(
        default="1.36.1", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="The Cluster Autoscaler version (no `v`) running with `--cloud-provider=clusterapi` "
        "(GP675: MIG and shared resources; GP679: scale-from-zero labels and taints from 1.27.1).",
    )
    gpu_total: list[CapiGpuTotal] | None = Field(
        default=None, alias="gpuTotal", min_length=1,
        description="The autoscaler's `--gpu-total` flags, if it runs with any: each Cluster API pool's "
        "accelerator label must be one of their types (GP676).",
    )


class Admission(Model):
    """gpuplan's ValidatingAdmissionPolicy (docs/placement.md)."""

    enabled: bool = Field(default=True, description="Emit the policy and its binding (needs Kubernetes >= 1.30).")
    unmanaged_namespaces: list[Name] = Field(
        default=[],
        description="Namespaces the admission policies leave alone: trusted namespaces whose pods may "
        "request GPU resources or tolerate every taint (node agents' DaemonSets: logging, monitoring, "
        "security). The GPU Operator's, Kueue's, the DRA driver's, the GitOps engine's and the monitoring "
        "namespace always are, and so are `systemNamespaces`.",
    )
    node_agent_namespaces: list[Name] = Field(
        default=[],
        description="Namespaces of node agents (logging, monitoring, security DaemonSets that tolerate every "
        "taint): there a DaemonSet may tolerate the GPU pools' taint, and every other rule of the policies "
        "holds (no GPU resource, no tier class, no node by name, no NVIDIA_VISIBLE_DEVICES). Prefer it to "
        "`unmanagedNamespaces`, which switches every rule off.",
    )
    system_namespaces: list[Name] = Field(
        default=["kube-system", "kube-public", "kube-node-lease"],
        description="The cluster's own namespaces, left alone by the admission policies like "
        "`unmanagedNamespaces` (kube-proxy, the CNI and CSI node plugins tolerate every taint).",
    )


class Cluster(Model):
    """The cluster the fleet runs in and how the generated tree reaches it."""

    name: Name | None = Field(default=None, description="The cluster's name, for people; not written into objects.")
    kubernetes_version: str = Field(
        pattern=r"^1\.[0-9]{2}$", description='Kubernetes minor version, quoted: "1.33".', examples=["1.33"]
    )
    gitops: GitOps = Field(description="The GitOps engine and repository that deliver the generated tree.")
    gpu_operator: GpuOperator = Field(default_factory=GpuOperator, description="NVIDIA GPU Operator settings.")
    aws: Aws | None = Field(default=None, description="AWS settings; required when a pool uses `karpenter`.")
    gcp: Gcp | None = Field(default=None, description="Google Cloud settings; required when a pool uses `gke`.")
    azure: Azure | None = Field(default=None, description="Azure settings; required when a pool uses `aks`.")
    capi: CapiCluster | None = Field(
        default=None, description="Cluster API settings; required when a pool uses `capi` (docs/capi.md)."
    )
    allocation: Allocation = Field(
        default_factory=Allocation, description="How GPUs reach pods: device plugin (default) or DRA."
    )
    extended_resource_toleration: bool | None = Field(
        default=None,
        description="The API server runs the ExtendedResourceToleration admission plugin (it adds a toleration "
        "for every extended resource a pod requests). Default: on with `aws` (EKS enables it), off otherwise.",
    )
    admission: Admission = Field(
        default_factory=lambda: Admission(),
        description="The ValidatingAdmissionPolicy that binds tiers to pools and namespaces (Kubernetes >= 1.30).",
    )


# --- pools -------------------------------------------------------------------


class Taint(Model):
    """A node taint (Kubernetes core/v1 Taint)."""

    key: LabelKey = Field(description="Taint key, a label key.", examples=["nvidia.com/gpu"])
    value: LabelValue | None = Field(default=None, description="Taint value.", examples=["present"])
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="What the taint does to pods that do not tolerate it. `NoExecute` only on autoscaled "
        "pools: a static pool's taints are applied to running nodes, where NoExecute evicts every pod "
        "that does not tolerate it (GP986)."
    )


class Topology(Model):
    """kubelet Topology Manager settings for the pool's nodes."""

    policy: Literal["none", "best-effort", "restricted", "single-numa-node"] = Field(
        default="none", description="Topology Manager policy (kubelet `topologyManagerPolicy`)."
    )
    scope: Literal["container", "pod"] = Field(
        default="container",
        description="Align each container's resources, or the whole pod's (kubelet `topologyManagerScope`).",
    )
    cpu_manager_policy: Literal["none", "static"] | None = Field(
        default=None, description="Default: static when a policy other than none is set."
    )
    memory_manager_policy: Literal["None", "Static"] | None = Field(
        default=None, description="Memory Manager policy (kubelet `memoryManagerPolicy`); `Static` aligns memory too."
    )
    reserved_system_cpus: str | None = Field(
        default=None, alias="reservedSystemCPUs", examples=["0,1", "0-3"],
        description="CPUs kept for system daemons, a cpuset (kubelet `reservedSystemCPUs`).",
    )
    prefer_closest_numa_nodes: bool = Field(
        default=False, alias="preferClosestNUMANodes",
        description="Topology Manager policy option `prefer-closest-numa-nodes`.",
    )


class Karpenter(Model):
    """The pool's nodes are launched by Karpenter: on AWS (EC2NodeClass), or on Azure by AKS Node Auto
    Provisioning (AKSNodeClass) on a cluster with `cluster.azure` and no `cluster.aws` (docs/aks.md)."""

    instance_types: list[str] = Field(
        min_length=1, json_schema_extra=examples.instance_types,
        description="EC2 instance types the NodePool may launch; each decides the GPU model and count.",
    )
    capacity_types: list[Literal["spot", "on-demand", "reserved"]] = Field(
        default=["on-demand"], min_length=1, description="Purchase options (`karpenter.sh/capacity-type`)."
    )
    max_gpus: FleetGpus = Field(
        alias="maxGPUs",
        description="Most physical GPUs the pool may have at once, in whole nodes "
        "(the NodePool's node limit).",
    )
    guaranteed_gpus: FleetGpus | None = Field(
        default=None, alias="guaranteedGPUs",
        description="On a pool that allows `spot` and `on-demand` (or `reserved`): the physical GPUs of `maxGPUs`, "
        "in whole nodes, held on the guaranteed types for the tiers that must not be interrupted. gpuplan writes "
        "a second NodePool `<pool>-guaranteed` (only those types, this limit, tried first, tainted so only those "
        "tiers' pods use it); the quotas of those tiers must fit it (GP417).",
    )
    ami_family: Literal["AL2023", "Bottlerocket"] = Field(
        default="AL2023", description="Node image family of the EC2NodeClass (`amiSelectorTerms` alias)."
    )
    ami_version: str = Field(default="latest", description="Pinned version, e.g. v20260714.")
    # at least one: an `In` requirement without values is refused by the NodePool CEL rule
    # "requirements with operator 'In' must have a value defined"
    zones: list[LabelValue] | None = Field(
        default=None, min_length=1, description="Availability zones the pool may use; default: any.",
        examples=[["us-east-1a"]],
    )
    expire_after: Duration = Field(
        default="720h",
        description="Karpenter replaces nodes older than this, running pods or not (expiry is forceful); "
        "`Never` keeps them.",
    )
    consolidate_after: Duration | None = Field(
        default=None, description="How long Karpenter waits before consolidating an empty (inference pools: or "
        "underused) node; default from the tiers' workloads, 10m, or 5m for inference.",
    )
    weight: Weight | None = Field(
        default=None, description="NodePool weight: Karpenter tries pools of higher weight first."
    )
    node_overlay: bool = Field(
        default=False,
        description="Emit a NodeOverlay so Karpenter sees shared/MIG capacity (alpha feature gate).",
    )
    termination_grace_period: Annotated[str, Field(pattern=r"^([0-9]+(s|m|h))+$")] | None = Field(
        default=None,
        description="NodePool `terminationGracePeriod`: how long a node being deleted waits for its pods "
        "(PDBs, `karpenter.sh/do-not-disrupt`) before they are deleted; default 1h on pools with "
        "`training` or `batch` tiers, none (wait for ever) otherwise.",
    )
    efa: bool | None = Field(
        default=None,
        description="Multi-node jobs use EFA: the pods of a `gang` tier on the pool request "
        "`vpc.amazonaws.com/efa` (the fewest interfaces of its instance types; the tenant pages' pods and Jobs "
        "carry it, the tier's admission policy refuses a pod without it), and the README lists the EFA device "
        "plugin. Default: on when a tier with `gang` uses the pool and every instance type supports EFA.",
    )
    capacity_reservations: list["CapacityReservation"] | None = Field(
        default=None, min_length=1, max_length=30,
        description="EC2 capacity reservations the pool may launch into (EC2NodeClass "
        "`capacityReservationSelectorTerms`); needs `reserved` in `capacityTypes`.",
    )
    # AKS Node Auto Provisioning (cluster.azure, no cluster.aws): the AKSNodeClass's fields
    # (Azure/karpenter-provider-azure@v1.14.2 pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml)
    image_family: Literal["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux"] | None = Field(
        default=None, alias="imageFamily",
        description="On Azure (Node Auto Provisioning): the AKSNodeClass `imageFamily`; default: AKS's for the "
        "cluster's Kubernetes version. Not on AWS (`amiFamily`).",
    )
    driver: Literal["aks", "gpu-operator"] | None = Field(
        default=None,
        description="On Azure (Node Auto Provisioning): who installs the GPU driver, AKS's node bootstrap (`aks`, "
        "the default) or the GPU Operator (`gpu-operator`: AKSNodeClass `gpu.mode: None`). Not on AWS.",
    )


class Gke(Model):
    """The pool is a GKE node pool (Config Connector ``ContainerNodePool``); GKE's cluster
    autoscaler sizes it between ``minNodes`` and the ``maxGPUs`` ceiling."""

    machine_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9]*-[a-z0-9-]+$", max_length=63)] = Field(
        json_schema_extra=examples.gke_machine_types,
        description="Compute Engine machine type with built-in GPUs (a2-*, a3-*, g2-*); it decides the GPU "
        "model and count (docs/gke.md).",
    )
    max_gpus: FleetGpus = Field(
        alias="maxGPUs",
        description="Most physical GPUs the pool may have at once, in whole nodes (the node pool's "
        "`autoscaling.totalMaxNodeCount`).",
    )
    min_nodes: NodeCount = Field(
        default=0, description="Nodes the autoscaler keeps (`autoscaling.totalMinNodeCount`)."
    )
    spot: bool = Field(
        default=False,
        description="Spot VMs (`nodeConfig.spot`): Compute Engine may reclaim them at any time; GKE labels the "
        "nodes `cloud.google.com/gke-spot: \"true\"`.",
    )
    zones: list[LabelValue] | None = Field(
        default=None, min_length=1, description="Zones of the node pool (`nodeLocations`); default: the "
        "cluster's.", examples=[["us-central1-a"]],
    )
    driver: Literal["default", "latest", "gpu-operator"] = Field(
        default="default",
        description="Who runs the GPU software on the pool's nodes: `default` or `latest`: GKE installs that "
        "driver version and runs its own device plugin, MIG partitions and sharing; `gpu-operator`: GKE "
        "installs no driver (`INSTALLATION_DISABLED`) and the GPU Operator (>= v24.6.0) runs driver, device "
        "plugin and MIG manager, with every sharing mode gpuplan knows.",
    )
    image_type: Literal["COS_CONTAINERD", "UBUNTU_CONTAINERD"] = Field(
        default="COS_CONTAINERD", description="Node image (`nodeConfig.imageType`)."
    )
    auto_upgrade: bool = Field(
        default=True,
        description="GKE upgrades the pool's nodes (`management.autoUpgrade`): it recreates each node with the "
        "new GKE version and its driver, draining it. `false` is written as `management.autoUpgrade: false`, "
        "which GKE accepts only on a cluster enrolled in no release channel; on a release channel hold upgrades "
        "with the cluster's maintenance exclusions (GP980, docs/gke.md).",
    )


class Aks(Model):
    """The pool is an AKS agent pool (Azure Service Operator ``ManagedClustersAgentPool``); AKS's
    cluster autoscaler sizes it between ``minNodes`` and the ``maxGPUs`` ceiling (docs/aks.md)."""

    vm_size: Annotated[str, Field(pattern=r"^Standard_[A-Za-z0-9_]+$", max_length=64)] = Field(
        alias="vmSize", json_schema_extra=examples.aks_vm_sizes,
        description="Azure VM size with GPUs (`Standard_ND96isr_H100_v5`, ...); it decides the GPU model and "
        "count (docs/aks.md).",
    )
    max_gpus: FleetGpus = Field(
        alias="maxGPUs",
        description="Most physical GPUs the pool may have at once, in whole nodes (the agent pool's `maxCount`).",
    )
    min_nodes: NodeCount = Field(
        default=0, description="Nodes the autoscaler keeps (`minCount`); at the ceiling the pool has a fixed size "
        "and no autoscaling.",
    )
    name: Annotated[str, Field(max_length=63)] | None = Field(
        default=None, description="The agent pool's name in Azure (`azureName`: 1-12 lowercase letters and "
        "digits, starting with a letter); default: the pool's name (GP669).", examples=["infera100"],
    )
    spot: bool = Field(
        default=False,
        description="Spot VMs (`scaleSetPriority: Spot`, evicted VMs deleted, up to the on-demand price): Azure "
        "may evict them at any time; AKS labels and taints the nodes `kubernetes.azure.com/scalesetpriority=spot`.",
    )
    driver: Literal["aks", "gpu-operator"] = Field(
        default="aks",
        description="Who installs the NVIDIA driver: `aks` (AKS, from its GPU node image; MIG through the agent "
        "pool's `gpuInstanceProfile`) or `gpu-operator` (`gpuProfile.driver: None`: AKS installs none, the GPU "
        "Operator installs it and its mig-manager partitions any layout; needs `gpuOperator.driver: managed`).",
    )
    os_sku: Literal["Ubuntu", "AzureLinux"] = Field(
        default="Ubuntu", alias="osSKU", description="Node OS (`osSKU`).",
    )
    zones: list[LabelValue] | None = Field(
        default=None, min_length=1, description="Availability zones of the agent pool (`availabilityZones`).",
        examples=[["1", "2"]],
    )


CpuQuantity = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$", max_length=16)]
MemoryQuantity = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$", max_length=16)]


class Capi(Model):
    """The pool is a Cluster API MachineDeployment (with a KubeadmConfigTemplate) in the management
    cluster, sized by the Cluster Autoscaler between ``minNodes`` and the ``maxGPUs`` ceiling."""

    infrastructure_ref: CapiInfrastructureRef = Field(
        alias="infrastructureRef", description="The existing infrastructure machine template of the pool's machines."
    )
    max_gpus: FleetGpus = Field(
        alias="maxGPUs", description="Most physical GPUs the pool may have, in whole nodes (the autoscaler's "
        "max-size annotation, or the replicas of a fixed-size pool).",
    )
    min_nodes: NodeCount = Field(
        default=0, description="Nodes the autoscaler keeps (min-size annotation). At the ceiling the pool is "
        "fixed-size: `replicas`, no autoscaler annotations.",
    )
    cpu: CpuQuantity | None = Field(
        default=None, description="CPU of one machine, for scale from zero "
        "(`capacity.cluster-autoscaler.kubernetes.io/cpu`).", examples=["128"],
    )
    memory: MemoryQuantity | None = Field(
        default=None, description="Memory of one machine, for scale from zero "
        "(`capacity.cluster-autoscaler.kubernetes.io/memory`).", examples=["2Ti"],
    )
    accelerator: LabelValue | None = Field(
        default=None, description="The `cluster-api/accelerator` label value (the `--gpu-total` type); default: "
        "the GPU model in lower case.",
    )
    failure_domain: Annotated[str, Field(min_length=1, max_length=256)] | None = Field(
        default=None, alias="failureDomain", description="The machines' failure domain (`spec.template.spec.failureDomain`).",
    )
    max_node_provision_time: Annotated[str, Field(pattern=r"^([0-9]+[hms])+$", max_length=16)] | None = Field(
        default=None,
        description="How long the Cluster Autoscaler waits for a new machine to become a node before it gives "
        "the scale-up up (annotation `cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime`; default: "
        "the autoscaler's `--max-node-provision-time`, 15m). Bare-metal machines often need longer.",
        examples=["45m"],
    )
    kubelet_extra_args: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$", max_length=256)],
                             Annotated[str, Field(max_length=1024)]] | None = Field(
        default=None, alias="kubeletExtraArgs",
        description="More kubelet flags for the bootstrap config (e.g. `cloud-provider: external`); gpuplan sets "
        "`node-labels` and `config-dir` itself.", examples=[{"cloud-provider": "external"}],
    )

    @field_validator("kubelet_extra_args")
    @classmethod
    def _own_kubelet_flags(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        taken = sorted(set(v or ()) & {"node-labels", "config-dir", "register-with-taints"})
        if taken:
            raise PydanticCustomError(
                "capi_kubelet_flag",
                "kubeletExtraArgs sets {flags}, which gpuplan writes itself from the pool's labels, taints "
                "and topology (docs/capi.md): put the labels in `labels`, the taints in `taints`",
                {"flags": ", ".join(taken)},
            )
        # kubeadm joins the flags with spaces into one variable of
        # /var/lib/kubelet/kubeadm-flags.env (kubernetes/kubernetes@v1.36.3
        # cmd/kubeadm/app/phases/kubelet/flags.go:77-80, `%s=%q` of strings.Join(args, " ");
        # constants/constants.go:325 KUBELET_KUBEADM_ARGS), and the kubelet's systemd unit
        # passes $KUBELET_KUBEADM_ARGS unquoted, which systemd splits at whitespace
        # (systemd.service(5) "Command lines"): a space in a value starts another flag;
        # quotes, backslashes, `$` and backticks are refused with it, as a shell reads them
        # (a cloud-init variable, `{{ ds.meta_data.uuid }}`, is rendered from the machine's own
        # metadata before kubeadm runs: allowed as a bare dotted name)
        bad = sorted(k for k, val in (v or {}).items() if _UNSAFE_FLAG_VALUE.search(_CLOUD_INIT_VAR.sub("", val)))
        if bad:
            raise PydanticCustomError(
                "capi_kubelet_value",
                "kubeletExtraArgs {keys}: a value with whitespace, a quote, a backslash, `$`, a backtick or a brace "
                "(but for a cloud-init variable in double braces, such as ds.meta_data.uuid) "
                "would pass more flags to the kubelet (kubeadm writes them into one shell-split line); "
                "write one flag per key, e.g. cloud-provider: external",
                {"keys": ", ".join(bad)},
            )
        return v


_UNSAFE_FLAG_VALUE = re.compile(r"[\s\"'\\`${}]")
_CLOUD_INIT_VAR = re.compile(r"\{\{ ?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)* ?\}\}")


class CapacityReservation(Model):
    """One `capacityReservationSelectorTerms` entry: a reservation id, or tags (with an owner)."""

    id: Annotated[str, Field(pattern=r"^cr-[0-9a-z]+$")] | None = Field(
        default=None, description="Capacity reservation id (`cr-...`)."
    )
    tags: dict[str, str] | None = Field(
        default=None, min_length=1, max_length=20, description="Reservations with all these tags."
    )
    owner_id: Annotated[str, Field(pattern=r"^[0-9]{12}$")] | None = Field(
        default=None, alias="ownerID", description="AWS account that owns the tagged reservations."
    )

    @model_validator(mode="after")
    def _one_selector(self) -> "CapacityReservation":
        if (self.id is None) == (self.tags is None):
            raise ValueError("give either `id` or `tags` (Karpenter: 'id' is mutually exclusive)")
        if self.id is not None and self.owner_id is not None:
            raise ValueError("`ownerID` goes with `tags`, not with `id`")
        return self


class Exclusive(Model):
    """Whole GPUs, advertised as nvidia.com/gpu."""

    mode: Literal["exclusive"] = Field(description="One pod per GPU.")


class MigDevices(Model):
    """A layout for some GPUs of each node, by index (mig-parted `devices`)."""

    devices: list[GpuIndex] = Field(
        min_length=1, max_length=MAX_GPUS_PER_NODE, description="GPU indexes, as nvidia-smi numbers them."
    )
    layout: dict[ProfileName, MigCount] | None = Field(
        default=None, json_schema_extra=examples.mig_layout,
        description="MIG profile -> instances per GPU; omit to leave these GPUs with MIG disabled (whole GPUs).",
    )


class Mig(Model):
    """Multi-Instance GPU: GPUs split into GPU instances by mig-manager (Karpenter AL2023: by the userData)."""

    mode: Literal["mig"] = Field(description="Split GPUs into MIG instances.")
    strategy: Literal["mixed", "single"] = Field(
        default="mixed",
        description="Device-plugin MIG strategy: `mixed` advertises `nvidia.com/mig-<profile>`; `single` "
        "advertises nvidia.com/gpu and needs one identical profile on every GPU of a node.",
    )
    layout: dict[ProfileName, MigCount] | None = Field(
        default=None, json_schema_extra=examples.mig_layout,
        description="MIG profile -> instances per GPU, one layout for every GPU of every node.",
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
    replicas: Replicas = Field(
        description="Pods that share each GPU: the device plugin advertises this many units per GPU."
    )
    rename_by_default: bool = Field(
        default=True, description="Advertise `<resource>.shared` instead of `nvidia.com/gpu`."
    )
    fail_requests_greater_than_one: bool = Field(
        default=True, description="Reject a container that requests more than one unit (it would get no more GPU)."
    )


class TimeSlicing(_Shared):
    """GPUs time-sliced between pods (no memory or fault isolation)."""

    mode: Literal["time-slicing"] = Field(description="Time-slice each GPU between `replicas` pods.")


class Mps(_Shared):
    """GPUs shared through CUDA MPS (not with MIG)."""

    mode: Literal["mps"] = Field(description="Share each GPU through CUDA MPS between `replicas` pods.")


Sharing = Annotated[Union[Exclusive, Mig, TimeSlicing, Mps], Field(discriminator="mode")]


class PerGPU(Model):
    """CPU and memory a pod of the pool's tiers may request per GPU it requests (per unit: a MIG
    slice or a shared replica gets its part of a GPU's share). A pod that asks for more would
    hold one GPU and keep the node's other GPUs from the pods granted them."""

    cpu: CpuQuantity | None = Field(
        default=None, description="CPU per GPU (`24`, `7500m`); default: the node's CPUs ÷ its GPUs, where "
        "gpuplan knows the node's size (an EC2 instance type, a Cluster API `capi.cpu`, the node probe).",
        examples=["24"],
    )
    memory: MemoryQuantity | None = Field(
        default=None, description="Memory per GPU (`240Gi`); default: the node's memory ÷ its GPUs, where "
        "gpuplan knows it (an EC2 instance type, a Cluster API `capi.memory`).", examples=["240Gi"],
    )


Provisioner = Literal["static", "karpenter", "gke", "aks", "capi"]
# The pool fields that say how nodes come to exist; exactly one is set (``nodes``: static).
PROVISIONING_FIELDS = ("nodes", "karpenter", "gke", "aks", "capi")


class Rollout(Model):
    """How a change of a static pool's MIG layout or sharing reaches its nodes (docs/transitions.md)."""

    max_unavailable: Annotated[int, Field(ge=1, le=MAX_NODES_PER_POOL)] | Annotated[
        str, Field(pattern=r"^(100|[1-9][0-9]?)%$")] = Field(
        default=1,
        description="Nodes of the pool that take a new MIG layout or device-plugin config per step: a count or "
        "a percentage of the pool's nodes (rounded up). A build of the change moves the first step; `gpuplan "
        "build --advance POOL` moves the next once those nodes are done. `100%`: every node at once.",
        examples=[1, "50%"],
    )


class PoolHealth(Model):
    """What the pool's grants must survive when its nodes fail (docs/capacity.md "Failure headroom")."""

    nodes_down: NodeCount | None = Field(
        default=None,
        description="How many of the pool's nodes may be down at once: the quotas of its tiers that must not be "
        "interrupted (not preemptible) must still fit with that many of its largest nodes gone (GP434). "
        "Default: 1 on a pool that holds such a tier, 0 otherwise; `0` accepts that a failed node leaves "
        "those grants short.",
        examples=[1, 0],
    )
    headroom: Literal["warn", "error"] = Field(
        default="warn",
        description="Severity of GP434, grants that do not fit with `nodesDown` nodes down: `warn` (default) or "
        "`error`.",
    )


class Pool(Model):
    """Nodes with one GPU model and the same sharing and topology settings."""

    name: Name = Field(description="Pool name; used in node labels, file paths and object names.")
    gpu: str = Field(
        min_length=1, json_schema_extra=examples.gpu_models,
        description="GPU model: GFD name, nvidia-smi name or alias.",
    )
    gpus_per_node: GpusPerNode | None = Field(
        default=None, description="Required for static pools; Karpenter pools take it from the instance type, "
        "node groups (`gke`, ...) from the machine type."
    )
    nodes: list[NodeName] | None = Field(
        default=None, max_length=MAX_NODES_PER_POOL, description="Static nodes, by Kubernetes node name."
    )
    karpenter: Karpenter | None = Field(
        default=None, description="Karpenter launches the pool's nodes on AWS (instead of `nodes`)."
    )
    gke: Gke | None = Field(default=None, description="A GKE node pool (instead of `nodes`; docs/gke.md).")
    aks: Aks | None = Field(default=None, description="An AKS agent pool (instead of `nodes`).")
    capi: Capi | None = Field(default=None, description="A Cluster API MachineDeployment (instead of `nodes`).")
    sharing: Sharing = Field(
        default_factory=lambda: Exclusive(mode="exclusive"),
        description="How GPUs are shared: `exclusive` (default), `mig`, `time-slicing` or `mps`.",
    )
    topology: Topology = Field(default_factory=Topology, description="kubelet Topology Manager settings.")
    taints: list[Taint] | None = Field(
        default=None, description="Default for Karpenter pools: nvidia.com/gpu=present:NoSchedule."
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default={}, description="Labels for the pool's nodes (static nodes and NodePool template alike)."
    )
    price_per_gpu_hour: Price | None = Field(
        default=None, alias="pricePerGPUHour", description="Price of one GPU-hour, for cost reports."
    )
    spot_price_per_gpu_hour: Price | None = Field(
        default=None, alias="spotPricePerGPUHour",
        description="Price of one GPU-hour on spot capacity (a Karpenter pool that allows `spot`), for the "
        "cost of interruptible capacity in the capacity report; from your provider's price list.",
    )
    interconnect: Literal["nvlink", "pcie"] | None = Field(
        default=None, description="GPU-to-GPU paths when no inventory says; default from the GPU model."
    )
    per_gpu: PerGPU | None = Field(
        default=None, alias="perGPU",
        description="Most CPU and memory a tier pod may request per GPU; default: the node's share per GPU, "
        "where gpuplan knows the node's size (docs/placement.md \"CPU and memory per GPU\").",
    )
    allocation: PoolAllocation | None = Field(
        default=None, description="The pool's allocation back-end; default: `cluster.allocation`."
    )
    driver_version: str | None = Field(
        default=None,
        description="The managed driver of this static pool, as `gpuOperator.driverVersion` (a branch `R570` or a "
        "release `570.133.20`); default: `gpuOperator.driverVersion`. A fleet whose pools differ in driver or `os`, "
        "or that has Karpenter pools beside static ones, gets one NVIDIADriver per static pool.",
    )
    rollout: Rollout | None = Field(
        default=None,
        description="Static pools: how many nodes take a MIG layout or sharing change at a time (default: one "
        "node per step).",
    )
    health: PoolHealth | None = Field(
        default=None,
        description="Node failures the pool's grants must survive: the failure headroom of the capacity report "
        "and GP434.",
    )
    os: str | None = Field(
        default=None, pattern=r"^[a-z]+[0-9]+(\.[0-9]+)?$",
        description="Operating system of a static pool's nodes as the GPU Operator names it in driver image "
        "tags (`ubuntu22.04`, `ubuntu24.04`, `rhel9.4`). Precompiled drivers (`driverVersion: R<branch>`) "
        "exist only for `ubuntu22.04`.",
    )

    @model_validator(mode="after")
    def _one_provisioning(self) -> "Pool":
        if sum(getattr(self, f) is not None for f in PROVISIONING_FIELDS) != 1:
            raise PydanticCustomError(
                "pool_provisioning",
                "a pool needs exactly one of `nodes` (static nodes) or `karpenter`, `gke`, `aks`, `capi` (autoscaled)",
            )
        if self.nodes is not None and self.gpus_per_node is None:
            raise PydanticCustomError(
                "pool_gpus_per_node", "a static pool needs `gpusPerNode`"
            )
        return self

    @property
    def provisioner(self) -> Provisioner:
        """Which back-end brings the pool's nodes into being (the one provisioning field set)."""
        for f in PROVISIONING_FIELDS:
            if getattr(self, f) is not None:
                return "static" if f == "nodes" else f  # type: ignore[return-value]
        raise AssertionError("a validated pool has one provisioning field")

    @property
    def is_static(self) -> bool:
        return self.nodes is not None


# --- tiers and tenants -------------------------------------------------------


class Tier(Model):
    """A service class users consume: one pool's resource, with a priority."""

    name: Name = Field(description="Tier name; its PriorityClass is `gpuplan-<name>` unless `priorityClassName` says.")
    priority_class_name: Annotated[str, AfterValidator(_dns_subdomain)] | None = Field(
        default=None, alias="priorityClassName", examples=["high"],
        description="The PriorityClass the tier's pods name, when workloads already use one (e.g. `high`); "
        "gpuplan manages it with this tier's priority. Default: `gpuplan-<name>`.",
    )
    pool: Name = Field(description="The pool whose GPUs the tier hands out.")
    profile: ProfileName | None = Field(
        default=None, json_schema_extra=examples.mig_profile, description="MIG profile, for tiers on MIG pools."
    )
    workload: Literal["training", "inference", "interactive", "batch"] | None = Field(
        default=None, description="What runs in the tier; sets Karpenter disruption defaults and some checks."
    )
    priority: Priority = Field(
        default=0, description="PriorityClass value; immutable: a change replaces the PriorityClass."
    )
    preemption: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority", description="PriorityClass preemptionPolicy; immutable like the value."
    )
    max_gpus_per_pod: UnitsPerPod | None = Field(
        default=None, alias="maxGPUsPerPod", description="Most units one pod may request; checked against one node."
    )
    requires_nvlink: bool = Field(
        default=False, alias="requiresNVLink", description="Pods need their GPUs connected by NVLink."
    )
    max_oversubscription: Oversubscription | None = Field(
        default=None, description="Quota / capacity ratio allowed (default 1.0)."
    )
    enforce_priority: bool = Field(
        default=False, description="Scope this tier's quota to its PriorityClass."
    )
    preemptible: bool | None = Field(
        default=None,
        description="The tier may run on preemptible (spot) capacity, which the cloud can reclaim with two "
        "minutes' notice. Default: yes for `workload: batch` and `interactive` tiers without `gang`, no "
        "otherwise (inference, training, gangs). Quotas of tiers that are not preemptible must fit the pool's "
        "guaranteed capacity (GP413).",
    )
    description: str | None = Field(
        default=None, description="Description of the tier's PriorityClass; default names its resource and pool."
    )
    gang: Gang | None = Field(
        default=None,
        description="The tier runs multi-node jobs admitted all-or-nothing (gang admission through Kueue; "
        "needs `spec.queueing`).",
    )


class Tenant(Model):
    """A team: its namespaces and their quotas per tier."""

    name: Name = Field(description="Tenant name.")
    namespaces: list[Name] = Field(min_length=1, description="Namespaces gpuplan creates for the tenant.")
    quotas: dict[Name, dict[Name, Quota]] = Field(
        default={}, description="namespace -> tier -> units of the tier's resource (one ResourceQuota per namespace)."
    )
    labels: dict[LabelKey, LabelValue] = Field(default={}, description="Labels for the tenant's namespaces.")
    pod_security: Literal["privileged", "baseline", "restricted"] = Field(
        default="baseline",
        description="Pod Security Standard the tenant's namespaces enforce (label "
        "`pod-security.kubernetes.io/enforce`): `baseline` refuses privileged containers, which would see every "
        "device of a GPU node.",
    )
    queueing: TenantQueueing | None = Field(
        default=None, description="The tenant's Kueue ClusterQueue: borrowing, lending and fair-sharing weight."
    )


class DisabledRule(Model):
    code: str = Field(
        pattern=r"^GP[0-9]{3}$", json_schema_extra=examples.disableable_codes,
        description="Diagnostic code of the rule (`gpuplan explain CODE`).",
    )
    reason: str = Field(min_length=1, description="Why, for reviewers.")


class Rules(Model):
    disable: list[DisabledRule] = Field(default=[], description="Rules turned off for this fleet, each with a reason.")


# --- monitoring --------------------------------------------------------------


# a Prometheus duration (rule `for:`), without "Never"
PromDuration = Annotated[str, Field(pattern=r"^([0-9]+[smhd])+$")]


class MonitoringThresholds(Model):
    """When an alert fires: a level and how long it must hold (Prometheus durations)."""

    underused_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        default=10, description="A tier's GPUs, allocated to a namespace, under this average use are wasted."
    )
    underused_for: PromDuration = Field(default="2h", description="How long a tier stays under-used before the alert fires.")
    memory_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        default=95, description="Framebuffer memory used, in % of the GPU (or MIG instance)."
    )
    memory_for: PromDuration = Field(default="15m", description="How long GPU memory stays near full before the alert fires.")
    quota_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        default=90, description="A namespace's use of a tier's quota."
    )
    quota_for: PromDuration = Field(default="30m", description="How long a namespace stays near its quota before the alert fires.")
    not_ready_for: PromDuration = Field(
        default="15m", description="Device plugin / DCGM exporter missing on a node, or capacity off plan."
    )
    mig_failed_for: PromDuration = Field(
        default="5m", description="How long a node's nvidia.com/mig.config.state stays failed before the alert fires."
    )


class Monitoring(Model):
    """Scraping, alert rules and a dashboard for a kube-prometheus-stack install."""

    release: LabelValue = Field(
        default="kube-prometheus-stack",
        description="Helm release of kube-prometheus-stack: its Prometheus selects ServiceMonitors and "
        "PrometheusRules labelled release=<this>.",
    )
    namespace: Name | None = Field(
        default=None, description="Namespace of the PrometheusRules and dashboard; default: the GPU Operator's."
    )
    dashboard_label: LabelKey = Field(
        default="grafana_dashboard", description="Label the Grafana dashboard sidecar watches (value \"1\")."
    )
    scrape_interval: PromDuration = Field(default="15s", description="DCGM exporter scrape interval.")
    thresholds: MonitoringThresholds = Field(
        default_factory=MonitoringThresholds, description="Alert levels and durations."
    )


# --- queueing (Kueue) ----------------------------------------------------------


KUEUE_INTEGRATIONS = (
    "batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/jaxjob",
    "trainer.kubeflow.org/trainjob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
    "workload.codeflare.dev/appwrapper", "sparkoperator.k8s.io/sparkapplication", "pod", "deployment",
    "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
)  # the framework names Kueue v0.19.2 registers (pkg/controller/jobs/*)

# a Go duration as Kueue's configuration reads it (metav1.Duration)
GoDuration = Annotated[str, Field(pattern=r"^([0-9]+(ms|s|m|h))+$")]
UnitLimits = dict[Name, Quota]


class Gang(Model):
    """A tier whose jobs span nodes: one pod per node, admitted all-or-nothing."""

    nodes_per_job: GangNodes = Field(
        description="Pods of one job, one per node; Kueue admits the job only when all of them fit. With "
        "`minNodesPerJob`: the most a job may have (gangs of up to this many nodes)."
    )
    min_nodes_per_job: GangNodes | None = Field(
        default=None,
        description="The fewest pods a job of the tier may have, for gangs of a range of sizes (2 to "
        "`nodesPerJob`); every tenant that can reach the tier must admit a job of this size (GP421), and "
        "each tenant page says the largest its queue admits. Default: `nodesPerJob` (one size).",
    )
    units_per_node: UnitsPerPod | None = Field(
        default=None,
        description="Units of the tier's resource each pod requests; default `maxGPUsPerPod`, else all the "
        "units one node of the pool advertises.",
    )
    topology_level: LabelKey | None = Field(
        default=None,
        description="Node label (one of `queueing.topologyLevels`) inside whose domain all pods of a job must "
        "land (Kueue `kueue.x-k8s.io/podset-required-topology`).",
        examples=["topology.kubernetes.io/zone"],
    )


class TenantQueueing(Model):
    """How a tenant's ClusterQueue shares with the cohort (units of each tier's resource)."""

    borrowing_limit: UnitLimits | None = Field(
        default=None,
        description="tier -> most units the tenant may borrow above its quota; a granted tier left out may "
        "borrow whatever the cohort lends; a tier named here without quota is borrowed only.",
    )
    lending_limit: UnitLimits | None = Field(
        default=None,
        description="tier -> most units of the tenant's quota others may borrow; a tier left out lends all of "
        "its unused quota.",
    )
    fair_sharing_weight: FairShareWeight = Field(
        default=1, description="The ClusterQueue's fair-sharing weight; 0 makes it borrow only what nobody else wants."
    )
    cohort: Name | None = Field(
        default=None,
        description="A child Cohort (under the fleet's cohort) for this tenant's queue; tenants that name the "
        "same one share among themselves first (hierarchical cohorts).",
    )


class KueueInstall(Model):
    """The Kueue Helm chart gpuplan delivers."""

    chart_version: str = Field(
        default="0.19.2", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="Version of the chart `oci://registry.k8s.io/kueue/charts/kueue` (the API is `kueue.x-k8s.io/v1beta2`).",
    )
    namespace: Name = Field(default="kueue-system", description="Namespace of the Kueue controller.")


class GangAdmission(Model):
    """Kueue `waitForPodsReady`: an admitted job must have all its pods ready in time, or it is evicted and requeued."""

    timeout: GoDuration = Field(
        default="30m",
        description="How long an admitted job may take to get all its pods ready (Kueue's default: 30m).",
    )
    block_admission: bool = Field(
        default=False,
        description="Admit the next job only when the previous one's pods are ready (sequential, no "
        "partial-gang deadlocks, slower).",
    )
    backoff_limit_count: Int32 | None = Field(
        default=None, description="Requeues of a job that timed out before it is deactivated; default: no limit."
    )


class VolcanoInstall(Model):
    """The Volcano Helm chart gpuplan delivers (volcano-sh/volcano `installer/helm/chart/volcano`)."""

    chart_version: str = Field(
        default="1.15.1", pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="Version of the chart `volcano` from https://volcano-sh.github.io/helm-charts (the APIs are "
        "`scheduling.volcano.sh/v1beta1` and `batch.volcano.sh/v1alpha1`).",
    )
    namespace: Name = Field(default="volcano-system", description="Namespace of the Volcano scheduler, controllers "
                            "and admission webhook.")


QUEUE_ENGINES = ("kueue", "volcano")


class Queueing(Model):
    """Job queueing over the tiers' quotas, by one engine: Kueue (docs/kueue.md) or Volcano (docs/volcano.md)."""

    engine: Literal[QUEUE_ENGINES] = Field(  # type: ignore[valid-type]
        default="kueue",
        description="The queueing engine: `kueue` (ClusterQueues over flavors, jobs held until admitted) or "
        "`volcano` (the Volcano scheduler, a hierarchical Queue per tenant and pool). One fleet, one engine.",
    )
    kueue: KueueInstall = Field(default_factory=KueueInstall, description="The Kueue installation (engine `kueue`).")
    volcano: VolcanoInstall = Field(default_factory=VolcanoInstall,
                                    description="The Volcano installation (engine `volcano`).")
    tiers: list[Name] | None = Field(
        default=None,
        description="Tiers whose quota Kueue manages; default: tiers with `workload: training` or `batch`, and "
        "tiers with `gang`.",
    )
    cohort: Name | None = Field(
        default=None, description="Name of the cohort every tenant's ClusterQueue joins; default `gpuplan-<fleet>`."
    )
    fair_sharing: bool = Field(
        default=True,
        description="Fair sharing: borrowed capacity is divided by the queues' weights and reclaimed by preemption.",
    )
    gang_admission: GangAdmission = Field(
        default_factory=GangAdmission,
        description="All-or-nothing admission settings, used when a tier declares `gang`.",
    )
    integrations: list[Literal[KUEUE_INTEGRATIONS]] = Field(  # type: ignore[valid-type]
        default=["batch/job", "jobset.x-k8s.io/jobset"], min_length=1,
        description="Workload kinds Kueue manages (its `integrations.frameworks`).",
    )
    controllers: list[Annotated[str, Field(min_length=1, max_length=253)]] | None = Field(
        default=None,
        description="Users (as the API server names them) of the controllers that create the pods and child Jobs "
        "of Kueue-managed workloads: only they may create pods of a queued tier's PriorityClass outside Kueue's "
        "own gate (docs/placement.md). Default: the Job controller, and the JobSet controller and Kubeflow "
        "training operator where those integrations are on.",
        examples=[["system:serviceaccount:kube-system:job-controller"]],
    )
    topology_levels: list[LabelKey] | None = Field(
        default=None,
        description="Node labels of the network topology, outermost first (e.g. block, rack); Kueue places "
        "gangs by them (a `Topology` with `kubernetes.io/hostname` as the last level).",
        examples=[["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"]],
    )


class FleetSpec(Model):
    cluster: Cluster = Field(description="The cluster the fleet runs in.")
    inventory: list[str] = Field(default=[], description="Globs of node-probe inventory files, relative to this file.")
    pools: list[Pool] = Field(min_length=1, description="GPU node pools.")
    tiers: list[Tier] = Field(default=[], description="Service classes users consume.")
    tenants: list[Tenant] = Field(default=[], description="Teams, their namespaces and quotas.")
    rules: Rules = Field(default_factory=Rules, description="Rule settings.")
    monitoring: Monitoring | None = Field(
        default=None, description="Alert rules, a dashboard and DCGM scraping for kube-prometheus-stack."
    )
    queueing: Queueing | None = Field(
        default=None,
        description="A queueing engine over the quotas - Kueue (flavors per pool, a ClusterQueue per tenant) or "
        "Volcano (a Queue per tenant and pool) -: borrowing, fair sharing and gang admission (docs/kueue.md, "
        "docs/volcano.md).",
    )


class Metadata(Model):
    name: Name = Field(
        description="Fleet name; names the delivery objects (`gpuplan-<name>`) and labels every generated object "
        "(`app.kubernetes.io/part-of`)."
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default={}, description="Labels of this document (not copied to objects)."
    )
    annotations: dict[str, str] = Field(default={}, description="Annotations of this document (not copied to objects).")


class Fleet(Model):
    """A GPU fleet: its cluster, node pools, tiers and tenants."""

    api_version: Literal["gpuplan.dev/v1alpha1"] = Field(alias="apiVersion", description="Spec version.")
    kind: Literal["Fleet"] = Field(description="Always `Fleet`.")
    metadata: Metadata = Field(description="The fleet's name.")
    spec: FleetSpec = Field(description="The fleet.")
