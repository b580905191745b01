"""GKE node pools as ``gke:`` pools: the Config Connector ContainerNodePools and the Nodes
grouped by ``cloud.google.com/gke-nodepool`` (gpuplan.importer.platforms says how).

On GKE's own GPU stack the nodes carry no GPU Feature Discovery label: the GPU model comes from
the machine type (gpuplan.cloud.gke table) or GKE's accelerator label
(``cloud.google.com/gke-accelerator``, kubernetes/autoscaler cluster-autoscaler-1.36.1
cluster-autoscaler/cloudprovider/gce/gce_cloud_provider.go:47), MIG from
``cloud.google.com/gke-gpu-partition-size`` and sharing from
``cloud.google.com/gke-gpu-sharing-strategy`` / ``cloud.google.com/gke-max-shared-clients-per-gpu``
(the labels gpuplan.provisioning.gke writes and its docstring cites). Without the pool object the
autoscaling limits are not visible through the Kubernetes API: the draft sizes the pool to the
nodes it sees and says so.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import conventions as V
from gpuplan.importer import draft as I
from gpuplan.importer import nodegroups as N
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_dns_label

_get = dig

GKE_GROUP = "container.cnrm.cloud.google.com"
GCP_PROJECT_ANNOTATION = "cnrm.cloud.google.com/project-id"  # gpuplan.lower.provision_gke
_CLUSTER_REF = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/clusters/(?P<name>[^/]+)\Z")
REGION_LABEL = "topology.kubernetes.io/region"
# GKE's gpuDriverVersion values (the ContainerNodePool field gpuplan writes) -> gke.driver
GKE_DRIVERS = {"DEFAULT": "default", "LATEST": "latest", "INSTALLATION_DISABLED": "gpu-operator"}
GKE_SHARING = {"TIME_SHARING": "time-slicing", "MPS": "mps", "time-sharing": "time-slicing", "mps": "mps"}


def gke_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: N.Platforms) -> None:
    from gpuplan.catalog.gpus import resolve_gpu
    from gpuplan.cloud.gke import accelerator_gpu, machine_type
    from gpuplan.mig.solver import geometry_profile
    from gpuplan.provisioning import gke as G

    cnps = {}
    for o in N.objects_of(objs, "ContainerNodePool", GKE_GROUP):
        cnps[(_get(o.data, "spec", "resourceID") or o.name)] = o
    groups: dict[str, list[Obj]] = {}
    for n in nodes:
        np_ = n.labels.get(G.NODEPOOL_LABEL)
        if isinstance(np_, str) and (G.ACCELERATOR_LABEL in n.labels or np_ in cnps):
            groups.setdefault(np_, []).append(n)
    for np_name in sorted(set(cnps) | set(groups)):
        cnp, members = cnps.get(np_name), sorted(groups.get(np_name, ()), key=lambda o: o.name)
        first = cnp or members[0]
        nc = _get(cnp.data, "spec", "nodeConfig") if cnp else None
        nc = nc if isinstance(nc, dict) else {}
        acc = (nc.get("guestAccelerator") or [{}])[0] if isinstance(nc.get("guestAccelerator"), list) else {}
        acc = acc if isinstance(acc, dict) else {}
        name = (nc.get("labels") or {}).get(V.POOL_LABEL) if isinstance(nc.get("labels"), dict) else None
        name = name if is_dns_label(name) else np_name
        if N.bad_name(draft, name, f"GKE node pool {show(np_name)}", first):
            continue
        mt, m = N.machine_of(machine_type, nc.get("machineType"), members)
        if m is None and not acc and not any(G.ACCELERATOR_LABEL in n.labels for n in members):
            continue  # a node pool without GPUs
        if m is None:
            accel = acc.get("type") or N.majority_label(members, G.ACCELERATOR_LABEL)
            N.left_out(draft, f"GKE node pool {np_name}", f"machine type {show(mt)} (accelerator {show(accel)}) is "
                      f"not in gpuplan's GKE table{' (GPU ' + accelerator_gpu(accel) + ')' if accelerator_gpu(str(accel)) else ''}",
                      first, *(("spec", "nodeConfig", "machineType") if cnp else ("metadata", "labels",
                                                                                  V.INSTANCE_TYPE_LABEL)))
            continue
        out.claimed |= {n.name for n in members}
        gpu = resolve_gpu(m.gpu)
        where = f"ContainerNodePool {cnp.namespace}/{cnp.name}" if cnp else f"Nodes labelled {G.NODEPOOL_LABEL}={np_name}"
        pool = N.base_pool(out, name, members, gpu, [cnp] if cnp else [], where, cfg, draft, nc.get("labels") or {})
        N.labels_and_taints(pool, N.declared(G.read_template, cnp), members, where, (G.GPU_TAINT["key"],))
        notes = pool["_notes"]
        notes["gpu"] = I.Note(f"from machine type {m.name} (gpuplan's GKE table)")
        g: dict[str, Any] = {"machineType": m.name}
        kn: dict[str, I.Note] = {"machineType": I.Note(f"from {where}" if cnp else
                                                       f"from the Nodes' label {V.INSTANCE_TYPE_LABEL}")}
        driver = GKE_DRIVERS.get(str(_get(acc, "gpuDriverInstallationConfig", "gpuDriverVersion")))
        if driver is None and members:
            # GPU Feature Discovery runs only where the GPU Operator serves the node
            driver = "gpu-operator" if all(V.GFD_PRODUCT in n.labels for n in members) else "default"
            kn["driver"] = I.Note(f"the Nodes {'carry' if driver == 'gpu-operator' else 'lack'} GFD labels",
                                  None if driver == "gpu-operator" else "GKE's driver: default or latest")
        elif driver is not None:
            kn["driver"] = I.Note(f"from {where} gpuDriverInstallationConfig")
        if driver and driver != "default":
            g["driver"] = driver
        autos = _get(cnp.data, "spec", "autoscaling") if cnp else None
        maxn = N.as_int(_get(autos, "totalMaxNodeCount")) if isinstance(autos, dict) else None
        minn = N.as_int(_get(autos, "totalMinNodeCount")) if isinstance(autos, dict) else None
        if maxn is None and cnp is not None and N.as_int(_get(cnp.data, "spec", "nodeCount")) is not None:
            maxn = minn = N.as_int(_get(cnp.data, "spec", "nodeCount"))
        N.size_pool(g, kn, maxn, minn, m.gpu_count, members, f"from {where} autoscaling", "node pool", "ContainerNodePool")
        if nc.get("spot") is True or any(n.labels.get(G.SPOT_LABEL) == "true" for n in members):
            g["spot"] = True
        zones = _get(cnp.data, "spec", "nodeLocations") if cnp else None
        if isinstance(zones, list) and zones and all(isinstance(z, str) for z in zones):
            g["zones"] = list(zones)
        if nc.get("imageType") == "UBUNTU_CONTAINERD":
            g["imageType"] = "UBUNTU_CONTAINERD"
        if _get(cnp.data, "spec", "management", "autoUpgrade") is False if cnp else False:
            g["autoUpgrade"] = False
        pool["gke"], pool["_knotes"] = g, kn
        pool["sharing"] = pool.pop("sharing")  # after the node group, as the examples write it
        pool["_gpus"] = m.gpu_count
        if driver != "gpu-operator":
            _gke_sharing(pool, acc, members, gpu, geometry_profile, G, where)
            # GKE advertises every partition and share as nvidia.com/gpu (gpuplan.provisioning.gke)
            s = pool["sharing"]
            per = next(iter(s["layout"].values())) if s["mode"] == "mig" else s.get("replicas", 1)
            pool["_resources"] = {V.GPU: m.gpu_count * per}
        out.pools.append(pool)
        if "gcp" not in out.cluster:
            out.cluster["gcp"] = _gcp(cnp, members, draft)


def _gke_sharing(pool: dict, acc: dict, members: list[Obj], gpu: Any, geometry_profile: Any, G: Any, where: str) -> None:
    """GKE's own stack: MIG partitions and sharing from the node pool's guestAccelerator, else
    the labels GKE sets on its nodes."""
    size = acc.get("gpuPartitionSize") or N.majority_label(members, G.PARTITION_LABEL)
    sharing_cfg = acc.get("gpuSharingConfig") if isinstance(acc.get("gpuSharingConfig"), dict) else {}
    strategy = sharing_cfg.get("gpuSharingStrategy") or N.majority_label(members, G.SHARING_STRATEGY_LABEL)
    clients = N.as_int(sharing_cfg.get("maxSharedClientsPerGpu")) or N.as_int(N.majority_label(members, G.MAX_SHARED_LABEL))
    src = f"{where} guestAccelerator" if acc else "the Nodes' label " + (
        G.PARTITION_LABEL if size else f"{G.SHARING_STRATEGY_LABEL}, {G.MAX_SHARED_LABEL}")
    if isinstance(size, str):
        prof = geometry_profile(gpu, size) if gpu.mig_capable else None
        # GKE makes as many partitions of the one size as fit on each GPU (gpuplan.rules.gke GP664)
        pool["sharing"] = {"mode": "mig", "layout": {size: prof.max_instances if prof else 1}}
        pool["_notes"]["sharing"] = I.Note(f"from {src} (GKE partitions each GPU into {size})")
    elif GKE_SHARING.get(str(strategy)) and clients:
        pool["sharing"] = {"mode": GKE_SHARING[str(strategy)], "replicas": clients}
        pool["_notes"]["sharing"] = I.Note(f"from {src} ({strategy}, {clients} clients per GPU)")


def _gcp(cnp: Obj | None, members: list[Obj], draft: I.Draft) -> tuple[dict, str | None, str | None]:
    if cnp is not None:
        ref = _CLUSTER_REF.match(str(_get(cnp.data, "spec", "clusterRef", "external") or ""))
        project = cnp.meta.get("annotations", {}).get(GCP_PROJECT_ANNOTATION) if isinstance(
            cnp.meta.get("annotations"), dict) else None
        gcp = {"project": project or (ref["project"] if ref else "todo-project"),
               "location": _get(cnp.data, "spec", "location") or (ref["location"] if ref else "us-central1"),
               "clusterName": ref["name"] if ref else "todo-cluster"}
        if cnp.namespace and cnp.namespace != "gpuplan-gke":
            gcp["namespace"] = cnp.namespace
        todo = None if ref and project else "check project and clusterName (the ContainerNodePool's clusterRef)"
        return gcp, f"from ContainerNodePool {cnp.namespace}/{cnp.name}", todo
    region = N.majority_label(members, REGION_LABEL)
    return ({"project": "todo-project", "location": region or "us-central1", "clusterName": "todo-cluster"},
            f"location from the Nodes' label {REGION_LABEL}" if region else None,
            "the Google Cloud project and GKE cluster name are not on the Nodes: set them (a zonal cluster's "
            "location is its zone)")
