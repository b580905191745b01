"""GP668-GP674: AKS agent pools — what AKS and Azure Service Operator accept, and what AKS does
to the pool's nodes (``gpuplan.provisioning.aks``).

Sources, all pinned in docs/aks.md: MicrosoftDocs/azure-aks-docs @fb060abe (articles/aks/
gpu-multi-instance.md, nvidia-gpu-operator.md, spot-node-pool.md, use-labels.md), Azure/AgentBaker
@04c076b9 parts/linux/cloud-init/artifacts/mig-partition.sh (what each ``gpuInstanceProfile``
makes), Azure/azure-service-operator v1api20250801 types @70edf9f0 (the agent pool name), and
kubernetes/autoscaler@cluster-autoscaler-1.36.1 (the Azure provider's GPU label and the
readiness of GPU nodes). The VM size against the pool's GPU model and count is GP637-GP639
(``gpuplan.rules.provisioning``). GP674 is checked with the other platforms' MIG-autoscaling
refusals in ``gpuplan.rules.autoscaler`` (one table, ``MIG_AUTOSCALING``).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import PoolView, ResolvedFleet

GPU_OPERATOR_HINT = "use the GPU Operator path on this pool (aks.driver: gpu-operator)"

E_NO_AZURE = Code(
    "GP668", "AKS pool without cluster.azure", Severity.ERROR,
    "An Azure Service Operator `ManagedClustersAgentPool` names its cluster through `spec.owner`: the "
    "ASO `ManagedCluster` object, in the same namespace of the cluster that runs ASO. Set "
    "`cluster.azure` when any pool uses `aks`.",
    bad="cluster:\n  kubernetesVersion: \"1.33\"\n  # no azure:\npools:\n  - {name: infer, aks: {...}}",
    good="cluster:\n  azure: {managedCluster: ml-prod, namespace: aks-ml-prod}",
)
E_AGENT_POOL_NAME = Code(
    "GP669", "AKS agent pool name not allowed", Severity.ERROR,
    "An AKS Linux agent pool's name is 1 to 12 lowercase letters and digits, starting with a letter "
    "(Azure Service Operator v1api20250801 `azureName`: `^[a-z][a-z0-9]{0,11}$`, "
    "managed_clusters_agent_pool_types_gen.go @70edf9f0). A gpuplan pool name with a hyphen or over 12 "
    "characters is refused by the API server; give the agent pool its own name with `aks.name`.",
    bad="- name: train-h100-spot\n  aks: {vmSize: Standard_ND96isr_H100_v5, maxGPUs: 32}",
    good="- name: train-h100-spot\n  aks: {name: trainspot, vmSize: Standard_ND96isr_H100_v5, maxGPUs: 32}",
)
E_MIG_NOT_UNIFORM = Code(
    "GP670", "AKS MIG pool needs one profile on every GPU", Severity.ERROR,
    "With AKS's driver, MIG is the agent pool's `gpuInstanceProfile`: one value (`MIG1g` ... `MIG7g`) for "
    "the whole pool, and the node's bootstrap partitions every GPU the same way (MicrosoftDocs/azure-aks-"
    "docs articles/aks/gpu-multi-instance.md:31-43; Azure/AgentBaker mig-partition.sh "
    "uniform_mig_profile_layout). A layout with several profiles, or per-GPU layouts, cannot be made. On "
    "the GPU Operator path (`aks.driver: gpu-operator`: AKS installs no driver, the operator's mig-manager "
    "partitions each GPU as the spec says) any layout gpuplan accepts works.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}\n"
        "aks: {vmSize: Standard_ND96amsr_A100_v4, maxGPUs: 16}",
    good="sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}}\n"
         "aks: {vmSize: Standard_ND96amsr_A100_v4, maxGPUs: 16, driver: gpu-operator}",
)
E_MIG_PROFILE = Code(
    "GP671", "MIG layout is not a partition AKS makes on this VM size", Severity.ERROR,
    "Each `gpuInstanceProfile` creates one GPU instance profile id a fixed number of times on every GPU: "
    "MIG1g id 19 x7, MIG2g id 14 x3, MIG3g id 9 x2, MIG4g id 5 x1, MIG7g id 0 x1 (Azure/AgentBaker "
    "@04c076b9 parts/linux/cloud-init/artifacts/mig-partition.sh, mig_profile_id and "
    "uniform_mig_profile_layout). What that id is called depends on the VM size's GPU: MIG1g is 1g.5gb on "
    "Standard_ND96asr_v4 (A100 40GB), 1g.10gb on Standard_ND96amsr_A100_v4 and Standard_ND96isr_H100_v5 "
    "(80GB), 1g.12gb on Standard_NC40ads_H100_v5 (H100 NVL). A layout with another profile (1g.20gb), "
    "another count (3 x 1g.10gb) or on a GPU without MIG (T4) has no `gpuInstanceProfile`.",
    bad="gpu: H100-SXM5-80GB\nsharing: {mode: mig, layout: {1g.20gb: 4}}\naks: {vmSize: Standard_ND96isr_H100_v5, ...}",
    good="gpu: H100-SXM5-80GB\nsharing: {mode: mig, layout: {1g.10gb: 7}}   # MIG1g\n"
         "aks: {vmSize: Standard_ND96isr_H100_v5, ...}",
)
E_DRIVER = Code(
    "GP672", "AKS driver setting and the GPU Operator disagree", Severity.ERROR,
    "`aks.driver: gpu-operator` sets the agent pool's `gpuProfile.driver: None` (the API field behind "
    "`az aks nodepool add --gpu-driver none`): AKS installs no NVIDIA driver, so the GPU Operator must "
    "(`gpuOperator.driver: managed`), or the nodes have none; nor does AKS then apply any NVIDIA "
    "configuration to the node (Azure/AgentBaker @003f371f aks-node-controller/proto/aksnodeconfig/v1/"
    "gpu_config.proto, `enable_nvidia`), so the operator must install the container toolkit too "
    "(`gpuOperator.toolkit: managed`). And the GPU Operator on AKS does not "
    "support several OS versions in one cluster (MicrosoftDocs/azure-aks-docs articles/aks/"
    "nvidia-gpu-operator.md:46,50): the AKS pools it serves must share one `osSKU`.",
    bad="cluster:\n  gpuOperator: {driver: preinstalled}\npools:\n  - aks: {vmSize: ..., driver: gpu-operator}",
    good="cluster:\n  gpuOperator: {driver: managed}\npools:\n  - aks: {vmSize: ..., driver: gpu-operator}",
)
E_NOT_ON_AKS = Code(
    "GP673", "setting an AKS agent pool cannot carry", Severity.ERROR,
    "AKS refuses node labels under `kubernetes.azure.com/` and `kubernetes.io/` on any node pool "
    "(MicrosoftDocs/azure-aks-docs articles/aks/use-labels.md:217-222): the agent pool cannot be created "
    "or updated with them. And an agent pool's `kubeletConfig` takes only `cpuManagerPolicy` and "
    "`topologyManagerPolicy` of the kubelet's Topology settings (custom-node-configuration-reference.md:27,32): "
    "a `topology` with `scope: pod`, `reservedSystemCPUs`, `memoryManagerPolicy` or `preferClosestNUMANodes` "
    "would not reach the nodes.",
    bad="labels: {kubernetes.azure.com/team: ml}\ntopology: {policy: restricted, scope: pod}",
    good="labels: {ml.example.com/team: ml}\ntopology: {policy: restricted}",
)
E_CA_GPU_UNREADY = Code(
    "GP674", "AKS cluster autoscaler would count the pool's nodes as unready", Severity.ERROR,
    "AKS labels GPU nodes `kubernetes.azure.com/accelerator=nvidia` (articles/aks/use-labels.md:201), the "
    "GPU label of the Cluster Autoscaler's Azure provider (kubernetes/autoscaler@cluster-autoscaler-1.36.1 "
    "cluster-autoscaler/cloudprovider/azure/azure_cloud_provider.go:45). A node with that label and no "
    "allocatable `nvidia.com/gpu` stays unready to the autoscaler — for good on a node that advertises only "
    "`nvidia.com/mig-*` (MIG strategy mixed) or renamed shared resources (kubernetes/autoscaler#8095, open: "
    "processors/customresources/gpu_processor.go:41-70, utils/gpu/gpu.go:137-146), and enough of them stop "
    "its scale-ups in the whole cluster. An autoscaled AKS pool must advertise `nvidia.com/gpu`; a "
    "fixed-size pool (`minNodes` at the ceiling) is not scaled.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
        "aks: {vmSize: Standard_ND96isr_H100_v5, maxGPUs: 32}",
    good="sharing: {mode: mig, strategy: single, layout: {1g.10gb: 7}}\n"
         "aks: {vmSize: Standard_ND96isr_H100_v5, maxGPUs: 32}",
)

CODES = (E_NO_AZURE, E_AGENT_POOL_NAME, E_MIG_NOT_UNIFORM, E_MIG_PROFILE, E_DRIVER, E_NOT_ON_AKS,
         E_CA_GPU_UNREADY)


def aks_pools(rf: ResolvedFleet) -> list[PoolView]:
    return [pv for pv in rf.pools if pv.pool.aks is not None]


def reserved(key: str) -> bool:
    """A label key under a prefix AKS reserves (use-labels.md:217-222)."""
    from gpuplan.provisioning.aks import RESERVED_LABEL_DOMAINS

    domain = key.split("/", 1)[0] if "/" in key else ""
    return domain in RESERVED_LABEL_DOMAINS


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    pools = aks_pools(rf)
    if not pools:
        return
    if rf.fleet.spec.cluster.azure is None:
        yield rf.diag(E_NO_AZURE, "pools " + ", ".join(pv.name for pv in pools) + " are AKS agent pools but "
                      "cluster.azure is not set", ("spec", "cluster"), key=True,
                      hint="add cluster.azure: {managedCluster: <ASO ManagedCluster name>, namespace: <its namespace>}")
    yield from _names(rf, pools)
    for pv in pools:
        yield from _labels(rf, pv)
        yield from _mig(rf, pv)
    yield from _driver(rf, pools)


def _names(rf: ResolvedFleet, pools: list[PoolView]) -> Iterator[Diagnostic]:
    from gpuplan.provisioning.aks import AGENT_POOL_NAME, agent_pool_name

    seen: dict[str, str] = {}
    for pv in pools:
        name = agent_pool_name(pv.pool)
        where = (*pv.path, "aks", "name") if pv.pool.aks.name is not None else (*pv.path, "name")
        if not AGENT_POOL_NAME.match(name):
            alnum = "".join(c for c in name.lower() if c.isascii() and c.isalnum())
            fit = (alnum if alnum[:1].isalpha() else "gpu" + alnum)[:12]
            yield rf.diag(E_AGENT_POOL_NAME, f"pool {pv.name}: {name!r} is not an AKS agent pool name (1-12 "
                          "lowercase letters and digits, starting with a letter)", where,
                          hint=f"set aks.name, e.g. {fit}")
        elif name in seen:
            yield rf.diag(E_AGENT_POOL_NAME, f"pool {pv.name}: agent pool name {name!r} is also pool {seen[name]}'s; "
                          "one cluster's agent pools have different names", where,
                          hint="give each AKS pool its own aks.name")
        seen.setdefault(name, pv.name)


def _labels(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.identity import kubelet_topology_fields
    from gpuplan.provisioning.aks import kubelet_config

    for key in sorted(pv.pool.labels):
        if reserved(key):
            yield rf.diag(E_NOT_ON_AKS, f"pool {pv.name}: AKS reserves the label prefix of {key}",
                          (*pv.path, "labels", key), key=True, hint="use a domain of your own")
    _, refused = kubelet_config(kubelet_topology_fields(pv.pool.topology))
    if refused:
        yield rf.diag(E_NOT_ON_AKS, f"pool {pv.name}: an AKS agent pool's kubeletConfig has no "
                      + ", ".join(refused), (*pv.path, "topology"), key=True,
                      hint="keep only policy and cpuManagerPolicy on an AKS pool's topology")


def _mig(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.cloud.aks import instance_profiles
    from gpuplan.provisioning.aks import gpu_instance_profile, machine, settings, uniform_profile

    s = pv.pool.sharing
    if s.mode != "mig" or settings(pv.pool).driver != "aks":
        return
    m = machine(pv.pool)
    if m is None:  # GP637 when gpusPerNode is not given either
        if pv.pool.gpus_per_node is not None:
            yield rf.diag(E_MIG_PROFILE, f"pool {pv.name}: gpuplan does not know VM size "
                          f"{settings(pv.pool).vm_size}, so it cannot tell which gpuInstanceProfile makes the layout",
                          (*pv.path, "aks", "vmSize"), hint=GPU_OPERATOR_HINT + ", or use a VM size from docs/aks.md")
        return
    uni = uniform_profile(pv.pool)
    if uni is None:
        what = "per-GPU layouts" if s.layout is None else "several profiles (" + ", ".join(sorted(s.layout)) + ")"
        yield rf.diag(E_MIG_NOT_UNIFORM, f"pool {pv.name}: AKS partitions every GPU of an agent pool with one "
                      f"gpuInstanceProfile, but the layout has {what}", (*pv.path, "sharing"),
                      hint=GPU_OPERATOR_HINT)
        return
    if gpu_instance_profile(pv.pool) is None:
        offered = instance_profiles(m.gpu)
        if not offered:
            why = f"{m.gpu} has no MIG"
        else:
            why = "AKS makes " + "; ".join(f"{k}: {c}x {p}" for k, (p, c) in offered.items())
        yield rf.diag(E_MIG_PROFILE, f"pool {pv.name}: {uni[1]}x {uni[0]} per GPU is no gpuInstanceProfile on "
                      f"{m.name} ({why})", (*pv.path, "sharing", "layout"),
                      hint=GPU_OPERATOR_HINT if offered else "use a VM size with A100, H100 or H200 GPUs")


def _driver(rf: ResolvedFleet, pools: list[PoolView]) -> Iterator[Diagnostic]:
    op = rf.fleet.spec.cluster.gpu_operator
    operator_pools = [pv for pv in pools if pv.pool.aks.driver == "gpu-operator"]
    for pv in operator_pools:
        if op.driver != "managed":
            yield rf.diag(E_DRIVER, f"pool {pv.name}: aks.driver gpu-operator makes AKS skip the NVIDIA driver, but "
                          f"gpuOperator.driver is {op.driver}: no one installs it",
                          (*pv.path, "aks", "driver"),
                          hint="set cluster.gpuOperator.driver: managed, or aks.driver: aks")
        elif rf.toolkit == "preinstalled":
            yield rf.diag(E_DRIVER, f"pool {pv.name}: without AKS's driver AKS configures no NVIDIA container "
                          "runtime, but gpuOperator.toolkit is preinstalled: no one installs the toolkit",
                          (*pv.path, "aks", "driver"),
                          hint="set cluster.gpuOperator.toolkit: managed, or aks.driver: aks")
    skus = sorted({pv.pool.aks.os_sku for pv in pools})
    if operator_pools and len(skus) > 1:
        yield rf.diag(E_DRIVER, "the GPU Operator serves AKS pools with different OS SKUs (" + ", ".join(skus) +
                      "); it does not support several OS versions in one AKS cluster",
                      (*operator_pools[0].path, "aks"), key=True,
                      hint="give every AKS pool the same aks.osSKU")
