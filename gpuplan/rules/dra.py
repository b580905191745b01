"""GP680-GP699: the DRA back-end (``allocation.backend: dra``).

What gpuplan relies on (sources in ``gpuplan.k8s_features_dra``,
``gpuplan.dra``, ``gpuplan.lower.dra`` and docs/dra.md):

- the ``resource.k8s.io/v1`` API gpuplan writes is served from Kubernetes 1.34
  (DRA GA); DeviceClass ``extendedResourceName`` needs the
  ``DRAExtendedResource`` gate (alpha, off, in 1.34-1.35; beta, on, in 1.36);
- "If two device classes have the same [extendedResourceName], then the class
  created later is picked" (kubernetes/api@v0.36.3 resource/v1/types.go
  L1982-1985): a duplicate silently moves pods to another class — and the
  driver chart's own ``gpu.nvidia.com`` class already claims ``nvidia.com/gpu``;
- the scheduler allocates a claim's devices independently unless a
  ``matchAttribute`` constraint ties them: several MIG slices for one pod land
  on different GPUs without ``gpu.nvidia.com/parentUUID``;
- a node must run exactly one back-end: one label
  (``nvidia.com/gpu.deploy.device-plugin``) switches the operator's device
  plugin off and the DRA kubelet plugin on; Bottlerocket's NVIDIA images run
  a device plugin of their own.

The proof (GP686, GP687, GP688) evaluates every emitted selector with a real CEL
engine against the ResourceSlices the driver would publish
(``gpuplan.dra.proof``).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.dra.claims import (
    CHART_CLASSES, DEVICE_PLUGIN_DEPLOY_LABEL, DRA, any_dra, is_dra, pool_backend, pool_extended_resources,
    tier_claims)
from gpuplan.k8s_features_dra import DRA_EXTENDED_RESOURCE, DYNAMIC_RESOURCE_ALLOCATION, MIN_MINOR, minor
from gpuplan.resolve import GPU, PoolView, ResolvedFleet

MODELLED_DRIVER = "v0.5.0"

E_DRA_VERSION = Code(
    "GP680", "DRA needs Kubernetes 1.34", Severity.ERROR,
    "gpuplan writes DRA objects as `resource.k8s.io/v1`, served from Kubernetes 1.34, where Dynamic "
    "Resource Allocation is GA (KEP-4381); NVIDIA's DRA driver documents 1.34.2 or later. On 1.34 the "
    "`DynamicResourceAllocation` gate can still be turned off (it is locked on from 1.35).",
    bad='kubernetesVersion: "1.33"\nallocation: {backend: dra}',
    good='kubernetesVersion: "1.34"\nallocation: {backend: dra}',
)
E_EXT_GATE = Code(
    "GP681", "extendedResourceName without its feature gate", Severity.ERROR,
    "`extendedResources: true` gives each DRA tier's DeviceClass an `extendedResourceName`, so pods "
    "that request `nvidia.com/mig-1g.10gb` keep working. That field needs the `DRAExtendedResource` "
    "gate (KEP-5004): alpha and off in 1.34 and 1.35, beta and on from 1.36. Without it the API server "
    "drops the field and such pods stay Pending.",
    bad='kubernetesVersion: "1.35"\nallocation: {backend: dra}   # extendedResources defaults to true',
    good='kubernetesVersion: "1.35"\nallocation: {backend: dra, featureGates: {DRAExtendedResource: true}}',
)
E_DUP_EXT = Code(
    "GP682", "two DeviceClasses claim one extendedResourceName", Severity.ERROR,
    "An extended resource name must be unique among DeviceClasses: when two classes carry it, the one "
    "created later silently serves every pod that requests it. NVIDIA's DRA driver chart already gives "
    "its `gpu.nvidia.com` class `nvidia.com/gpu`, so a DRA tier of whole GPUs cannot keep that name.",
    bad="tiers on two DRA pools that both hand out nvidia.com/mig-1g.10gb, with extendedResources: true",
    good="extendedResources: false on one of the pools (its pods use the tier's ResourceClaimTemplate)",
)
E_BOTH = Code(
    "GP684", "a node advertised by both back-ends", Severity.ERROR,
    "A GPU node must be served by one back-end only: the device plugin and the DRA driver would both "
    "hand out the same GPUs. gpuplan switches back-ends per pool with the label "
    "`nvidia.com/gpu.deploy.device-plugin` (\"false\" on DRA pools). It cannot do so when a pool sets that "
    "label itself, or on Bottlerocket NVIDIA images, "
    "which run their own device plugin (`settings.kubelet-device-plugins.nvidia.enabled`).",
    bad="allocation: {backend: dra}\nkarpenter: {amiFamily: Bottlerocket, ...}",
    good="allocation: {backend: dra}\nkarpenter: {amiFamily: AL2023, ...}",
)
E_DRA_SHARING = Code(
    "GP685", "time-slicing or MPS on a DRA pool", Severity.ERROR,
    "On DRA, GPU sharing is configured per claim (opaque `GpuConfig` sharing in the claim), not per "
    "node; gpuplan writes DRA objects for whole GPUs and static MIG only.",
    bad="sharing: {mode: time-slicing, replicas: 4}\nallocation: {backend: dra}",
    good="sharing: {mode: mig, layout: {1g.10gb: 7}}\nallocation: {backend: dra}",
)
E_ELSEWHERE = Code(
    "GP686", "a tier's DeviceClass matches devices of another pool", Severity.ERROR,
    "DRA selectors see only what a device publishes (driver, type, MIG profile, GPU model), never its "
    "node or pool. Two DRA pools whose devices look alike cannot be told apart: the tier's claims "
    "would be served from either. Found by evaluating the selector against the modelled ResourceSlices.",
    bad="two DRA pools of A100-SXM4-80GB, both with 1g.10gb slices, and a 1g.10gb tier on one",
    good="one DRA pool per (GPU model, MIG profile) that a tier hands out",
)
E_UNSAT = Code(
    "GP687", "a tier's claim cannot be allocated on its pool", Severity.ERROR,
    "Evaluated against the devices the DRA driver would publish for one node of the pool, the tier's "
    "ResourceClaimTemplate cannot be satisfied: too few matching devices on a node, or — for several "
    "MIG slices, which must share one GPU — on one GPU.",
    bad="layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}\ntier: {profile: 1g.10gb, maxGPUsPerPod: 3}",
    good="layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}\ntier: {profile: 1g.10gb, maxGPUsPerPod: 2}",
)
W_CHART_CLASS = Code(
    "GP688", "nvidia.com/gpu pods may be served from a DRA pool", Severity.WARNING,
    "NVIDIA's DRA driver chart creates DeviceClass `gpu.nvidia.com` with extendedResourceName "
    "`nvidia.com/gpu`, selecting every whole GPU on every DRA node. Pods of a device-plugin tier that "
    "request `nvidia.com/gpu` can then be scheduled onto a DRA pool's GPUs (their quota still counts "
    "`requests.nvidia.com/gpu`). Steer them with node selectors or taints, or give the DRA pool no "
    "MIG-disabled GPUs.",
    bad="a device-plugin tier of nvidia.com/gpu, and a DRA pool of whole GPUs",
    good="a device-plugin tier of nvidia.com/gpu, and a DRA pool whose GPUs are all MIG-partitioned",
)
W_DRIVER_VERSION = Code(
    "GP689", "DRA driver version not modelled", Severity.WARNING,
    "gpuplan's model of the ResourceSlices the driver publishes, and so its selector proof, follows "
    "the DRA driver v0.5.0 (the version GPU Operator v26.7.0 pins). Another version may publish other "
    "attributes.",
    bad="allocation: {draDriverVersion: v0.7.0}",
    good="allocation: {draDriverVersion: v0.5.0}",
)
W_KARPENTER = Code(
    "GP690", "Karpenter does not schedule for DRA", Severity.WARNING,
    "Karpenter v1.14 ignores pods' DRA requests in its scheduling simulation (`--ignore-dra-requests`, "
    "default true: kubernetes-sigs/karpenter@v1.14.1 pkg/operator/options/options.go L133) and knows no "
    "instance type that offers a DRA-served extended resource; the NodePool's `nvidia.com/gpu` limit "
    "counts no DRA GPU either. A Karpenter pool on DRA may launch nodes for the wrong pods, or none, "
    "and grows past maxGPUs.",
    bad="karpenter: {instanceTypes: [p5.48xlarge], maxGPUs: 32}\nallocation: {backend: dra}",
    good="nodes: [gpu-01, gpu-02]\nallocation: {backend: dra}",
)
CODES = (E_DRA_VERSION, E_EXT_GATE, E_DUP_EXT, E_BOTH, E_DRA_SHARING, E_ELSEWHERE, E_UNSAT,
         W_CHART_CLASS, W_DRIVER_VERSION, W_KARPENTER)

CLUSTER_ALLOCATION = ("spec", "cluster", "allocation")


def _backend_path(pv: PoolView) -> tuple:
    if pv.pool.allocation is not None and pv.pool.allocation.backend is not None:
        return (*pv.path, "allocation", "backend")
    return (*CLUSTER_ALLOCATION, "backend")


def _ext_path(rf: ResolvedFleet, pv: PoolView) -> tuple:
    if pv.pool.allocation is not None and pv.pool.allocation.extended_resources is not None:
        return (*pv.path, "allocation", "extendedResources")
    if "extended_resources" in rf.fleet.spec.cluster.allocation.model_fields_set:
        return (*CLUSTER_ALLOCATION, "extendedResources")
    return _backend_path(pv)


def _versions(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    alloc = rf.fleet.spec.cluster.allocation
    kv = rf.fleet.spec.cluster.kubernetes_version
    m = minor(kv)
    gates = alloc.feature_gates
    dra = [pv for pv in rf.pools if is_dra(rf, pv)]
    if m < MIN_MINOR or not DYNAMIC_RESOURCE_ALLOCATION.enabled(m, gates):
        why = (f"Kubernetes {kv} does not serve resource.k8s.io/v1" if m < MIN_MINOR
               else "the DynamicResourceAllocation feature gate is turned off")
        for pv in dra:
            yield rf.diag(E_DRA_VERSION, f"pool {pv.name} uses the DRA back-end, but {why}",
                          _backend_path(pv),
                          hint='set kubernetesVersion to "1.34" or later, or allocation.backend: device-plugin')
        return
    if DRA_EXTENDED_RESOURCE.enabled(m, gates):
        return
    st = DRA_EXTENDED_RESOURCE.stage(m)
    state = "turned off" if st is not None and st[1] else f"{st[0]} and off by default" if st else "absent"
    claims = {c.pool for c in tier_claims(rf) if c.extended_resource is not None}
    for pv in dra:
        if pv.name in claims and pool_extended_resources(rf, pv):
            yield rf.diag(E_EXT_GATE,
                          f"pool {pv.name}: DeviceClass extendedResourceName needs the DRAExtendedResource "
                          f"feature gate, which is {state} in Kubernetes {kv}",
                          _ext_path(rf, pv),
                          hint="turn it on (cluster.allocation.featureGates: {DRAExtendedResource: true}, "
                               "and on the cluster's kube-apiserver, kube-scheduler and kubelets), or set "
                               "extendedResources: false (pods then use the tier's ResourceClaimTemplate)")


def _duplicates(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    seen: dict[str, str] = {res: f"the DRA driver chart's DeviceClass {name}"
                            for name, res in CHART_CLASSES.items() if res is not None}
    for c in tier_claims(rf):
        if c.extended_resource is None:
            continue
        first = seen.get(c.extended_resource)
        if first is None:
            seen[c.extended_resource] = f"DeviceClass {c.class_name} (tier {c.tier})"
            continue
        hint = ("set allocation.extendedResources: false on pool " + c.pool +
                " (its pods then claim through ResourceClaimTemplate " + f"gpuplan-{c.tier})")
        if c.extended_resource == GPU:
            hint += "; whole GPUs on DRA cannot keep nvidia.com/gpu, which the driver chart's class holds"
        yield rf.diag(E_DUP_EXT,
                      f"DeviceClass {c.class_name} (tier {c.tier}) would carry extendedResourceName "
                      f"{c.extended_resource}, already claimed by {first}; the class created later "
                      "silently serves every pod that requests it",
                      ("spec", "tiers", rf.tier_index[c.tier]), hint=hint)


def _pools(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    # a node listed in two pools is already GP106 (the spec is not checked further)
    for pv in rf.pools:
        backend = pool_backend(rf, pv)
        label = pv.pool.labels.get(DEVICE_PLUGIN_DEPLOY_LABEL)
        if label is not None:
            yield rf.diag(E_BOTH, f"pool {pv.name} sets {DEVICE_PLUGIN_DEPLOY_LABEL}={label}; that label decides "
                          "whether the device plugin or the DRA driver serves a node, and gpuplan sets it from "
                          "the pool's allocation back-end",
                          (*pv.path, "labels", DEVICE_PLUGIN_DEPLOY_LABEL), key=True,
                          hint="remove the label; choose the back-end with allocation.backend")
        if backend == DRA and pv.pool.karpenter is not None and pv.pool.karpenter.ami_family == "Bottlerocket":
            yield rf.diag(E_BOTH, f"pool {pv.name} uses DRA on Bottlerocket, whose NVIDIA images run their own "
                          "device plugin: both back-ends would advertise the node's GPUs",
                          (*pv.path, "karpenter", "amiFamily"),
                          hint="use amiFamily: AL2023 for DRA pools (gpuplan cannot set Bottlerocket's "
                               "settings.kubelet-device-plugins.nvidia.enabled=false)")
        if backend == DRA and pv.pool.karpenter is not None:
            yield rf.diag(W_KARPENTER, f"pool {pv.name} is a Karpenter pool on DRA: Karpenter ignores DRA requests "
                          "when it decides which nodes to launch, and its nvidia.com/gpu limit counts no DRA GPU",
                          _backend_path(pv),
                          hint="keep Karpenter pools on the device plugin until Karpenter schedules DRA claims")
        if backend == DRA and pv.pool.sharing.mode in ("time-slicing", "mps"):
            yield rf.diag(E_DRA_SHARING, f"pool {pv.name} shares GPUs by {pv.pool.sharing.mode}, which gpuplan "
                          "writes for the device plugin only", (*pv.path, "sharing", "mode"),
                          hint="keep this pool on the device plugin, or use exclusive GPUs or MIG on DRA")


def _proof(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.dra.proof import prove

    proof = prove(rf)
    for tp in proof.tiers:
        c = tp.claim
        path = ("spec", "tiers", rf.tier_index[c.tier])
        if tp.cls.error is not None:
            yield rf.diag(E_UNSAT, f"tier {c.tier}: the selector of DeviceClass {c.class_name} {tp.cls.error}", path)
            continue
        for count, why in tp.unsatisfied:
            yield rf.diag(E_UNSAT, f"tier {c.tier}: a claim for {why} of DeviceClass {c.class_name}",
                          path, hint="lower maxGPUsPerPod, or change the pool's MIG layout")
        for other, n in sorted(tp.elsewhere.items()):
            yield rf.diag(E_ELSEWHERE, f"tier {c.tier}: DeviceClass {c.class_name} also matches {n} device(s) of "
                          f"pool {other}: DRA selectors cannot see which pool a device is on",
                          path, hint=f"give pools {c.pool} and {other} different GPU models or MIG profiles, "
                                     "or move one back to the device plugin")
    gpu_dp_tiers = [t for t in rf.fleet.spec.tiers
                    if rf.tier_resource(t) == GPU and (pv := rf.tier_pool(t)) is not None and not is_dra(rf, pv)]
    chart = proof.chart["gpu.nvidia.com"]
    for pool, devs in sorted(chart.matched.items()):
        for t in gpu_dp_tiers:
            yield rf.diag(W_CHART_CLASS,
                          f"tier {t.name} hands out nvidia.com/gpu through the device plugin, but DRA pool {pool} "
                          f"publishes {len(devs)} whole GPU(s) per node that the driver chart's DeviceClass "
                          "gpu.nvidia.com serves to pods requesting nvidia.com/gpu",
                          ("spec", "tiers", rf.tier_index[t.name]),
                          hint=f"keep those pods off pool {pool} (node affinity or a taint they do not tolerate)")


def check(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    if not any_dra(rf):
        return
    alloc = rf.fleet.spec.cluster.allocation
    if alloc.dra_driver_version != MODELLED_DRIVER:
        yield rf.diag(W_DRIVER_VERSION,
                      f"the DRA driver {alloc.dra_driver_version} is not the version gpuplan models "
                      f"({MODELLED_DRIVER}); selectors are proved against {MODELLED_DRIVER}'s ResourceSlices",
                      (*CLUSTER_ALLOCATION, "draDriverVersion"))
    yield from _versions(rf)
    yield from _pools(rf)
    yield from _duplicates(rf)
    yield from _proof(rf)
