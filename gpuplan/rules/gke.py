"""GP662-GP667, GP980: GKE node pools (``pools[].gke``) against what GKE and Config Connector do.

Sources (docs/gke.md lists them with what each rule models):

- the pinned ContainerNodePool CRD (GoogleCloudPlatform/k8s-config-connector v1.155.1,
  ``config/crds/resources/apiextensions.k8s.io_v1_customresourcedefinition_containernodepools.
  container.cnrm.cloud.google.com.yaml``): one ``gpuPartitionSize`` string per accelerator,
  ``gpuSharingConfig`` with ``maxSharedClientsPerGpu``, a taint ``value`` that is required, a
  ``kubeletConfig`` with no Topology Manager or Memory Manager field;
- GKE's multi-instance GPU page (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi): a
  node pool has one partition size, GKE creates as many partitions of it as fit on each GPU and
  advertises each as ``nvidia.com/gpu``, selected by ``cloud.google.com/gke-gpu-partition-size``;
- GKE's time-sharing and MPS pages (.../concepts/timesharing-gpus, .../how-to/nvidia-mps-gpus):
  every share is ``nvidia.com/gpu``; a container may request at most one ("at most 1
  nvidia.com/gpu can be requested on GPU nodes"); the node-pool API documents no bound for
  ``maxSharedClientsPerGpu`` (container/v1 GPUSharingConfig: an int64), GKE's ComputeClass
  reference gives 2-48 (no stored copy of that page was found to quote), 2 is the least that
  shares a GPU, and CUDA MPS serves at most 48 clients per GPU (the bound GP3xx applies to MPS);
- GKE's GPU Operator page (.../how-to/gpu-operator) and NVIDIA's "GPU Operator with Google GKE"
  (docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html): the Operator runs
  on GKE from v24.6.0, with GKE's driver installation disabled; its driver manager runs on
  Ubuntu node images only.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning.pools import machine, platform_gpu_stack
from gpuplan.resolve import GPU, PoolView, ResolvedFleet
from gpuplan.spec.models import Mig

GKE_OPERATOR_MIN = (24, 6, 0)
MAX_SHARED_CLIENTS = 48

E_GKE_SETTINGS = Code(
    "GP662", "GKE node pool Config Connector cannot create", Severity.ERROR,
    "A GKE pool becomes a Config Connector ContainerNodePool: it needs `cluster.gcp` (project, location, "
    "cluster), zones inside the cluster's region, and taints with a value (the CRD requires "
    "`nodeConfig.taint[].value`).",
    bad="pools:\n  - name: train\n    gke: {machineType: a3-highgpu-8g, maxGPUs: 16, zones: [europe-west4-a]}\n"
        "cluster:\n  gcp: {project: ml-prod, location: us-central1, clusterName: ml}",
    good="pools:\n  - name: train\n    gke: {machineType: a3-highgpu-8g, maxGPUs: 16, zones: [us-central1-a]}",
)
E_GKE_MIG_LAYOUT = Code(
    "GP663", "GKE MIG pool without one partition size", Severity.ERROR,
    "GKE partitions a node pool's GPUs itself, with one `gpuPartitionSize` for every GPU of every node: "
    "a per-GPU layout (`devices`) or a layout that mixes profiles cannot be expressed. Use one profile, "
    "or let the GPU Operator partition this pool (`gke.driver: gpu-operator`, mig-manager applies any "
    "layout gpuplan can place).",
    bad="gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}\nsharing: {mode: mig, layout: {3g.40gb: 1, 1g.10gb: 3}}",
    good="gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}\nsharing: {mode: mig, layout: {3g.40gb: 2}}",
)
E_GKE_PARTITION = Code(
    "GP664", "GKE does not create this MIG partition", Severity.ERROR,
    "GKE creates only the partition sizes it lists for the machine type's GPU (A100 40GB: 1g.5gb, "
    "2g.10gb, 3g.20gb, 7g.40gb; A100 80GB: 1g.10gb, 2g.20gb, 3g.40gb, 7g.80gb; H100: also 1g.20gb; "
    "H200: 1g.18gb ... 7g.141gb), and always as many as fit on the GPU: the layout's count must be that "
    "number, or capacity and quotas are computed for partitions the nodes do not have.",
    bad="gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}\nsharing: {mode: mig, layout: {1g.10gb: 4}}",
    good="gke: {machineType: a2-ultragpu-1g, maxGPUs: 8}\nsharing: {mode: mig, layout: {1g.10gb: 7}}",
)
E_GKE_SHARING = Code(
    "GP665", "GKE GPU sharing out of bounds", Severity.ERROR,
    "GKE time-sharing and MPS (`gpuSharingConfig`) share each GPU between 2 and 48 containers "
    "(`maxSharedClientsPerGpu`), advertise every share as `nvidia.com/gpu` (never `nvidia.com/gpu.shared`), "
    "and refuse a container that requests more than one (UnexpectedAdmissionError \"at most 1 "
    "nvidia.com/gpu can be requested\"): a tier on such a pool takes one unit per pod.",
    bad="gke: {machineType: g2-standard-8, maxGPUs: 8}\nsharing: {mode: time-slicing, replicas: 64}",
    good="gke: {machineType: g2-standard-8, maxGPUs: 8}\nsharing: {mode: time-slicing, replicas: 8}",
)
E_GKE_QUOTA = Code(
    "GP666", "GKE partitions countable against another tier's quota (retired)", Severity.ERROR,
    "On a pool where GKE runs MIG or sharing, every partition and share is `nvidia.com/gpu`, like a whole "
    "GPU, so one quota key would count a partition and a whole GPU of another pool alike. No longer "
    "reported: every tier whose resource is handed out on more than one pool has its grant in a quota "
    "scoped to its PriorityClass (GP405), which the admission policy binds to its pool, so a namespace's "
    "units of one tier are never spent on another pool. The code stays so that `disabledRules` entries "
    "naming it remain valid.",
    bad="tiers:\n  - {name: inference, pool: infer-a100-mig}\n  - {name: training, pool: train-h100}\n"
        "tenants:\n  - {name: a, namespaces: [a], quotas: {a: {inference: 8, training: 8}}}",
    good="(the same: each tier's quota is scoped to its PriorityClass)",
)
E_GKE_STACK = Code(
    "GP667", "GKE pool setting its GPU stack cannot honour", Severity.ERROR,
    "What each GKE path can do: with the GPU Operator (`gke.driver: gpu-operator`) the Operator must be "
    "v24.6.0 or later and manage the driver on an Ubuntu node image (`imageType: UBUNTU_CONTAINERD`); "
    "with GKE's own stack there is no DRA driver and no operator device plugin. The node pool's "
    "kubeletConfig has no Topology Manager, Memory Manager or reserved-CPU field.",
    bad="gke: {machineType: a3-highgpu-8g, maxGPUs: 16, driver: gpu-operator}   # COS_CONTAINERD",
    good="gke: {machineType: a3-highgpu-8g, maxGPUs: 16, driver: gpu-operator, imageType: UBUNTU_CONTAINERD}",
)
W_GKE_UPGRADES_JOBS = Code(
    "GP980", "GKE upgrades a training pool's nodes", Severity.WARNING,
    "GKE upgrades a node pool's nodes itself (node auto-upgrade, on by default and always on for a cluster "
    "enrolled in a release channel): each node is recreated with the new GKE version, and GKE's driver "
    "with it, after a drain that honours PodDisruptionBudgets and grace periods for at most an hour. A "
    "training or batch job on the node loses its work since its last checkpoint, and no disruption budget "
    "of gpuplan's holds the upgrade (those are Karpenter's). The pinned ContainerNodePool (Config Connector "
    "v1.155.1) has no field that holds it on a release channel; the cluster's maintenance exclusions do (scope \"no minor or node upgrades\"). On a "
    "cluster in no release channel, `gke.autoUpgrade: false` turns the pool's upgrades off "
    "(`management.autoUpgrade`); then its nodes change only when you upgrade the pool.",
    bad="pools:\n  - name: train\n    gke: {machineType: a3-highgpu-8g, maxGPUs: 16}\n"
        "tiers:\n  - {name: training, pool: train, workload: training}",
    good="pools:\n  - name: train\n    gke: {machineType: a3-highgpu-8g, maxGPUs: 16, autoUpgrade: false}\n"
         "# or, on a release channel: a maintenance exclusion on the cluster, and rules.disable: [GP980]",
)
CODES = (E_GKE_SETTINGS, E_GKE_MIG_LAYOUT, E_GKE_PARTITION, E_GKE_SHARING, E_GKE_QUOTA, E_GKE_STACK,
         W_GKE_UPGRADES_JOBS)


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    pools = [pv for pv in rf.pools if pv.pool.gke is not None]
    if not pools:
        return
    for pv in pools:
        yield from _settings(rf, pv)
        yield from _mig(rf, pv)
        yield from _sharing(rf, pv)
        yield from _stack(rf, pv)
        yield from _upgrades(rf, pv)


def _settings(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    gcp = rf.fleet.spec.cluster.gcp
    g = pv.pool.gke
    assert g is not None
    if gcp is None:
        yield rf.diag(E_GKE_SETTINGS, f"pool {pv.name!r} is a GKE node pool, but cluster.gcp is not set",
                      pv.path + ("gke",), key=True,
                      hint="set cluster.gcp: {project: ..., location: ..., clusterName: ...}")
    else:
        region = gcp.location if gcp.location.count("-") == 1 else gcp.location.rsplit("-", 1)[0]
        for i, z in enumerate(g.zones or ()):
            # a regional cluster's node pools, and a zonal (multi-zonal) one's, lie in its region
            if not z.startswith(region + "-"):
                yield rf.diag(E_GKE_SETTINGS,
                              f"pool {pv.name!r}: zone {z} is outside the cluster's region {region}",
                              pv.path + ("gke", "zones", i), hint=f"use zones of {region}")
    for i, t in enumerate(pv.pool.taints or ()):
        if t.value is None:
            yield rf.diag(E_GKE_SETTINGS,
                          f"pool {pv.name!r}: taint {t.key} has no value; a ContainerNodePool taint needs one",
                          pv.path + ("taints", i), hint="give the taint a value, e.g. value: \"true\"")


def _mig(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    s = pv.pool.sharing
    if not isinstance(s, Mig) or not platform_gpu_stack(pv.pool):
        return
    where = pv.path + ("sharing",)
    layouts = [s.layout] if s.layout is not None else [g.layout for g in s.devices or ()]
    profiles = sorted({p for lay in layouts if lay for p in lay})
    if s.devices is not None or len(profiles) != 1 or not all(layouts):
        what = ("a per-GPU layout (devices)" if s.devices is not None
                else f"{len(profiles)} partition sizes ({', '.join(profiles)})")
        yield rf.diag(E_GKE_MIG_LAYOUT,
                      f"pool {pv.name!r}: GKE partitions every GPU of a node pool with one size, not {what}",
                      where + (("devices",) if s.devices is not None else ("layout",)),
                      hint="use the GPU Operator path on this pool (gke.driver: gpu-operator), or one partition "
                      "size for every GPU")
        return
    [size] = profiles
    m = machine(pv.pool)
    if m is None:
        return  # GP637
    lay = layouts[0] or {}
    if size not in m.mig_profiles:
        offered = ", ".join(m.mig_profiles) or "none"
        yield rf.diag(E_GKE_PARTITION,
                      f"pool {pv.name!r}: GKE does not create {size} partitions on {m.name} ({m.gpu}); it offers: "
                      f"{offered}", where + ("layout", size), key=True,
                      hint="pick one of those sizes" if m.mig_profiles else "use a machine type whose GPU GKE "
                      "partitions (A2, A3)")
        return
    from gpuplan.catalog import resolve_gpu
    from gpuplan.mig.solver import geometry_profile

    gpu = resolve_gpu(m.gpu)
    prof = geometry_profile(gpu, size) if gpu is not None else None
    if prof is not None and lay.get(size) != prof.max_instances:
        yield rf.diag(E_GKE_PARTITION,
                      f"pool {pv.name!r}: GKE makes {prof.max_instances} partitions of {size} on each GPU, not "
                      f"{lay.get(size)}", where + ("layout", size),
                      hint=f"set {size}: {prof.max_instances}")


def _sharing(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    s = pv.pool.sharing
    if s.mode not in ("time-slicing", "mps") or not platform_gpu_stack(pv.pool):
        return
    where = pv.path + ("sharing",)
    if not 2 <= s.replicas <= MAX_SHARED_CLIENTS:
        yield rf.diag(E_GKE_SHARING,
                      f"pool {pv.name!r}: GKE shares a GPU between 2 and {MAX_SHARED_CLIENTS} containers "
                      f"(maxSharedClientsPerGpu), not {s.replicas}", where + ("replicas",),
                      hint=f"set replicas between 2 and {MAX_SHARED_CLIENTS}")
    if "rename_by_default" in s.model_fields_set and s.rename_by_default:
        yield rf.diag(E_GKE_SHARING,
                      f"pool {pv.name!r}: GKE advertises each share as {GPU}, never {GPU}.shared; "
                      "renameByDefault does nothing here", where + ("renameByDefault",),
                      hint="remove renameByDefault (the tiers' pods request nvidia.com/gpu)")
    for i, t in enumerate(rf.fleet.spec.tiers):
        if t.pool == pv.name and t.max_gpus_per_pod is not None and t.max_gpus_per_pod > 1:
            yield rf.diag(E_GKE_SHARING,
                          f"tier {t.name!r}: GKE refuses a container that requests more than one shared "
                          f"{GPU} on pool {pv.name!r}, but maxGPUsPerPod is {t.max_gpus_per_pod}",
                          ("spec", "tiers", i, "maxGPUsPerPod"), hint="set maxGPUsPerPod: 1")


def _stack(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    g = pv.pool.gke
    assert g is not None
    op = rf.fleet.spec.cluster.gpu_operator
    where = pv.path + ("gke", "driver")
    if g.driver == "gpu-operator":
        version = tuple(int(x) for x in op.chart_version.lstrip("v").split("."))
        if version < GKE_OPERATOR_MIN:
            yield rf.diag(E_GKE_STACK,
                          f"pool {pv.name!r}: the GPU Operator runs on GKE from v24.6.0; the fleet's chart is "
                          f"{op.chart_version}", where, hint="raise gpuOperator.chartVersion, or use driver: default")
        if op.driver != "managed":
            yield rf.diag(E_GKE_STACK,
                          f"pool {pv.name!r}: GKE installs no driver on this pool (INSTALLATION_DISABLED) and "
                          "gpuOperator.driver is preinstalled: its nodes would have none", where,
                          hint="set gpuOperator.driver: managed, or use driver: default")
        elif g.image_type != "UBUNTU_CONTAINERD":
            yield rf.diag(E_GKE_STACK,
                          f"pool {pv.name!r}: the GPU Operator's driver runs on Ubuntu node images only, and the "
                          f"pool uses {g.image_type}", pv.path + ("gke",), key=True,
                          hint="set imageType: UBUNTU_CONTAINERD")
    else:
        from gpuplan.dra.claims import is_dra

        if is_dra(rf, pv):
            yield rf.diag(E_GKE_STACK,
                          f"pool {pv.name!r}: GKE's own GPU stack runs its device plugin; gpuplan's DRA driver "
                          "cannot serve this pool", where, hint="use driver: gpu-operator, or the device-plugin "
                          "allocation back-end on this pool")
    t = pv.pool.topology
    unset = [name for name, on in (("topology.policy", t.policy != "none"),
                                   ("topology.memoryManagerPolicy", t.memory_manager_policy is not None),
                                   ("topology.reservedSystemCPUs", t.reserved_system_cpus is not None)) if on]
    if unset:
        yield rf.diag(E_GKE_STACK,
                      f"pool {pv.name!r}: a GKE node pool's kubeletConfig cannot set {', '.join(unset)} "
                      "(Config Connector v1.155.1 ContainerNodePool)", pv.path + ("topology",), key=True,
                      hint="remove them (cpuManagerPolicy: static is supported)")


def _upgrades(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    """GP980: a training or batch pool that GKE's node auto-upgrade may recreate under its jobs
    (GKE "Node auto-upgrades": auto-upgrade cannot be turned off on a release channel; GKE "Node pool
    upgrade strategies": PodDisruptionBudgets and grace periods are honoured for up to one hour)."""
    from gpuplan.identity import job_pool

    g = pv.pool.gke
    assert g is not None
    if not g.auto_upgrade or not job_pool(rf, pv):
        return
    yield rf.diag(W_GKE_UPGRADES_JOBS,
                  f"pool {pv.name!r} runs training or batch jobs, and GKE's node auto-upgrade recreates its nodes "
                  "(and GKE's driver) under them, draining each for at most an hour; no ContainerNodePool field "
                  "holds it on a release channel", pv.path + ("gke",), key=True,
                  hint="on a release channel: add a maintenance exclusion (scope: no minor or node upgrades) to "
                  "the cluster for the runs and disable GP980; on no release channel: set gke.autoUpgrade: false")
