"""Node groups of a managed platform: GKE node pools, AKS agent pools and Cluster API
MachineDeployments, drafted as ``gke:``, ``aks:`` and ``capi:`` pools instead of static ones.

Two sources per pool, the declared and the running one:

* the pool object gpuplan writes for the platform (Config Connector ``ContainerNodePool``,
  Azure Service Operator ``ManagedClustersAgentPool``, Cluster API ``MachineDeployment``), when
  the export holds it: machine type, autoscaling limits, spot, driver, MIG and sharing settings;
* the Nodes, grouped by the label the platform puts on every node of a group:
  ``cloud.google.com/gke-nodepool`` (gpuplan.provisioning.gke.NODEPOOL_LABEL) and
  ``kubernetes.azure.com/agentpool`` (gpuplan.provisioning.aks.AGENTPOOL_LABEL); Cluster API
  nodes by gpuplan's pool label (its KubeadmConfigTemplate's ``node-labels``) or by the MachineSet
  Cluster API names in their ``cluster.x-k8s.io/owner-name`` annotation
  (kubernetes-sigs/cluster-api@v1.14.0 core/reconcilers/machine/machine_controller_noderef.go:49-56,
  CommonNodeAnnotations; a MachineSet of a MachineDeployment is named ``<deployment>-<suffix>``).

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

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer import draft as I
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_dns_label

GKE_GROUP = "container.cnrm.cloud.google.com"
ASO_GROUP = "containerservice.azure.com"
CAPI_GROUP = "cluster.x-k8s.io"
GCP_PROJECT_ANNOTATION = "cnrm.cloud.google.com/project-id"  # gpuplan.lower.provision_gke
_CLUSTER_REF = re.compile(r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/clusters/(?P<name>[^/]+)\Z")
REGION_LABEL = "topology.kubernetes.io/region"
AKS_SPOT_LABEL = "kubernetes.azure.com/scalesetpriority"  # AKS labels spot nodes (gpuplan.provisioning.aks)
# Cluster API's autoscaler annotations and the Node annotation naming the Machine's owner
# (cluster-api@v1.14.0 core/reconcilers/machine/machine_controller_noderef.go:49-56)
CAPI_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
CAPI_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPI_OWNER = "cluster.x-k8s.io/owner-name"
CAPI_CAPACITY = "capacity.cluster-autoscaler.kubernetes.io/"
CAPI_PROVISION_TIME = "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime"
KUBELET_CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"  # gpuplan.lower.provision_capi: the kubelet drop-in's dir
# GKE's gpuDriverVersion values (the ContainerNodePool field gpuplan writes) -> gke.driver
GKE_DRIVERS = {"DEFAULT": "default", "LATEST": "latest", "INSTALLATION_DISABLED": "gpu-operator"}
GKE_SHARING = {"TIME_SHARING": "time-slicing", "MPS": "mps", "time-sharing": "time-slicing", "mps": "mps"}

_get = dig


@dataclass
class Platforms:
    # infer's readers of a pool's sharing and a node's GPUs (``_pool_sharing``, ``_node_gpus``)
    sharing: Any = None
    node_gpus: Any = None
    pools: list[dict] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)  # nodes drafted into these pools
    cluster: dict[str, tuple[dict, str | None, str | None]] = field(default_factory=dict)  # key -> (settings, source, todo)


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.isdigit() else None


def _objects(objs: list[Obj], kind: str, group: str) -> list[Obj]:
    return sorted((o for o in objs if o.kind == kind and o.api_group == group), key=lambda o: (o.namespace, o.name))


def _majority_label(members: list[Obj], key: str) -> str | None:
    vals = [m.labels[key] for m in members if isinstance(m.labels.get(key), str)]
    return I.majority(vals) if vals else None


def _base(out: Platforms, name: str, members: list[Obj], gpu: Any, provisioned: list[Obj], where: str, cfg: Any,
          draft: I.Draft, labels: dict[str, str]) -> dict:
    """The fields every platform pool has; sharing from the operator's configs the nodes (or the
    pool object's node labels) select, or the nodes' GFD labels."""
    notes = {"name": I.Note(f"from {where}"), "gpu": I.Note(None)}
    dp_sel = labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL) or _majority_label(members, V.DEVICE_PLUGIN_CONFIG_LABEL)
    mig_sel = labels.get(V.MIG_CONFIG_LABEL) or _majority_label(members, V.MIG_CONFIG_LABEL)
    observed = out.node_gpus(members[0], gpu, cfg) if members and V.GFD_PRODUCT in members[0].labels else None
    sharing, note = out.sharing(name, gpu, None, dp_sel, mig_sel, cfg, draft, members[0] if members else
                                    (provisioned[0] if provisioned else None),
                                    ("metadata", "labels") if members else ("metadata",), observed)
    notes["sharing"] = note
    return {"name": name, "gpu": gpu.key, "sharing": sharing, "_notes": notes, "_nodes": members,
            "_selected": (dp_sel, mig_sel), "_dra": False, "_provisioned": provisioned}


def _bad_name(draft: I.Draft, name: Any, what: str, o: Obj) -> bool:
    if is_dns_label(name):
        return False
    draft.diagnostics.append(I.diag(C.W_BAD_NAME, f"{what}: pool name {show(name)} is not a DNS-1123 label; left out",
                                    o, "metadata", "name"))
    return True


def _machine(lookup: Any, declared: Any, members: list[Obj]) -> tuple[Any, Any]:
    """(machine type or VM size, its table entry): the pool object's, else the nodes' instance type."""
    name = declared if isinstance(declared, str) else _majority_label(members, V.INSTANCE_TYPE_LABEL)
    return name, lookup(name) if isinstance(name, str) else None


def _size(group: dict, kn: dict, maxn: int | None, minn: int | None, per: int, members: list[Obj], source: str,
          what: str, kind: str) -> None:
    """maxGPUs and minNodes from the pool object's limits, else the nodes seen (a TODO)."""
    if maxn is not None:
        kn["maxGPUs"] = I.Note(f"{source} x {per} GPUs per node")
    else:
        maxn = max(len(members), 1)
        kn["maxGPUs"] = I.Note(f"the {len(members)} Nodes of the {what} x {per} GPUs per node",
                               f"the {what}'s autoscaling limits are not visible through the Kubernetes API: set "
                               f"maxGPUs and minNodes (or add the {kind} to the export)")
    group["maxGPUs"] = maxn * per
    if minn:
        group["minNodes"] = minn


def _left_out(draft: I.Draft, what: str, why: str, o: Obj, *sub: Any) -> None:
    draft.diagnostics.append(I.diag(C.W_UNKNOWN_GPU, f"{what}: {why}; left out", o, *sub,
                                     hint="`gpuplan schema --markdown` lists the machine types gpuplan knows"))


# --------------------------------------------------------------------------------- GKE


def gke_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: Platforms) -> None:
    from gpuplan.catalog.gpus import resolve_gpu
    from gpuplan.cloud.gke import accelerator_gpu, machine_type
    from gpuplan.mig.solver import geometry_profile
    from gpuplan.provisioning import gke as G

    cnps = {}
    for o in _objects(objs, "ContainerNodePool", GKE_GROUP):
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
        if _bad_name(draft, name, f"GKE node pool {show(np_name)}", first):
            continue
        mt, m = _machine(machine_type, nc.get("machineType"), members)
        if m is None and not acc and not any(G.ACCELERATOR_LABEL in n.labels for n in members):
            continue  # a node pool without GPUs
        if m is None:
            accel = acc.get("type") or _majority_label(members, G.ACCELERATOR_LABEL)
            _left_out(draft, f"GKE node pool {np_name}", f"machine type {show(mt)} (accelerator {show(accel)}) is "
                      f"not in gpuplan's GKE table{' (GPU ' + accelerator_gpu(accel) + ')' if accelerator_gpu(str(accel)) else ''}",
                      first, *(("spec", "nodeConfig", "machineType") if cnp else ("metadata", "labels",
                                                                                  V.INSTANCE_TYPE_LABEL)))
            continue
        out.claimed |= {n.name for n in members}
        gpu = resolve_gpu(m.gpu)
        where = f"ContainerNodePool {cnp.namespace}/{cnp.name}" if cnp else f"Nodes labelled {G.NODEPOOL_LABEL}={np_name}"
        pool = _base(out, name, members, gpu, [cnp] if cnp else [], where, cfg, draft, nc.get("labels") or {})
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
        maxn = _int(_get(autos, "totalMaxNodeCount")) if isinstance(autos, dict) else None
        minn = _int(_get(autos, "totalMinNodeCount")) if isinstance(autos, dict) else None
        if maxn is None and cnp is not None and _int(_get(cnp.data, "spec", "nodeCount")) is not None:
            maxn = minn = _int(_get(cnp.data, "spec", "nodeCount"))
        _size(g, kn, maxn, minn, m.gpu_count, members, f"from {where} autoscaling", "node pool", "ContainerNodePool")
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
    size = acc.get("gpuPartitionSize") or _majority_label(members, G.PARTITION_LABEL)
    sharing_cfg = acc.get("gpuSharingConfig") if isinstance(acc.get("gpuSharingConfig"), dict) else {}
    strategy = sharing_cfg.get("gpuSharingStrategy") or _majority_label(members, G.SHARING_STRATEGY_LABEL)
    clients = _int(sharing_cfg.get("maxSharedClientsPerGpu")) or _int(_majority_label(members, G.MAX_SHARED_LABEL))
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
    region = _majority_label(members, REGION_LABEL)
    return ({"project": "todo-project", "location": region or "us-central1", "clusterName": "todo-cluster"},
            f"location from the Nodes' label {REGION_LABEL}" if region else None,
            "the Google Cloud project and GKE cluster name are not on the Nodes: set them (a zonal cluster's "
            "location is its zone)")


# --------------------------------------------------------------------------------- AKS


def aks_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: Platforms) -> None:
    from gpuplan.catalog.gpus import resolve_gpu
    from gpuplan.cloud.aks import instance_profile, machine_type
    from gpuplan.provisioning import aks as A

    agentpools = {}
    for o in _objects(objs, "ManagedClustersAgentPool", ASO_GROUP):
        agentpools[_get(o.data, "spec", "azureName") or o.name] = o
    groups: dict[str, list[Obj]] = {}
    for n in nodes:
        ap = n.labels.get(A.AGENTPOOL_LABEL)
        if isinstance(ap, str) and (n.labels.get(A.ACCELERATOR_LABEL) == A.ACCELERATOR_VALUE or ap in agentpools
                                    or V.GFD_PRODUCT in n.labels):
            groups.setdefault(ap, []).append(n)
    for az in sorted(set(agentpools) | set(groups)):
        o, members = agentpools.get(az), sorted(groups.get(az, ()), key=lambda n: n.name)
        first = o or members[0]
        spec = o.data.get("spec") if o is not None and isinstance(o.data.get("spec"), dict) else {}
        node_labels = spec.get("nodeLabels") if isinstance(spec.get("nodeLabels"), dict) else {}
        name = node_labels.get(V.POOL_LABEL) or (o.name if o is not None else az)
        if _bad_name(draft, name, f"AKS agent pool {show(az)}", first):
            continue
        size, m = _machine(machine_type, spec.get("vmSize"), members)
        if m is None and not any(n.labels.get(A.ACCELERATOR_LABEL) == A.ACCELERATOR_VALUE or V.GFD_PRODUCT in n.labels
                                 for n in members):
            continue  # an agent pool without GPUs (the system pool)
        if m is None:
            _left_out(draft, f"AKS agent pool {az}", f"VM size {show(size)} is not in gpuplan's AKS table", first,
                      *(("spec", "vmSize") if o is not None else ("metadata", "labels", V.INSTANCE_TYPE_LABEL)))
            continue
        out.claimed |= {n.name for n in members}
        gpu = resolve_gpu(m.gpu)
        where = f"ManagedClustersAgentPool {o.namespace}/{o.name}" if o is not None else \
            f"Nodes labelled {A.AGENTPOOL_LABEL}={az}"
        pool = _base(out, name, members, gpu, [o] if o is not None else [], where, cfg, draft, node_labels)
        pool["_notes"]["gpu"] = I.Note(f"from VM size {m.name} (gpuplan's AKS table)")
        a: dict[str, Any] = {"vmSize": m.name}
        kn: dict[str, I.Note] = {"vmSize": I.Note(f"from {where}" if o is not None else
                                                  f"from the Nodes' label {V.INSTANCE_TYPE_LABEL}")}
        if az != name:
            a["name"] = az
        auto = spec.get("enableAutoScaling") is True
        maxn = _int(spec.get("maxCount")) if auto else _int(spec.get("count"))
        minn = _int(spec.get("minCount")) if auto else maxn
        _size(a, kn, maxn, minn, m.gpu_count, members, f"from {where} {'maxCount' if auto else 'count'}",
              "agent pool", "ManagedClustersAgentPool")
        if spec.get("scaleSetPriority") == "Spot" or any(n.labels.get(AKS_SPOT_LABEL) == "spot" for n in members):
            a["spot"] = True
        if _get(spec, "gpuProfile", "driver") == "None":
            a["driver"] = "gpu-operator"
        if spec.get("osSKU") == "AzureLinux":
            a["osSKU"] = "AzureLinux"
        if isinstance(spec.get("availabilityZones"), list) and spec["availabilityZones"]:
            a["zones"] = [str(z) for z in spec["availabilityZones"]]
        if o is not None:
            _topology(pool, spec.get("kubeletConfig"), o, ("spec", "kubeletConfig"), f"{where} kubeletConfig", draft)
        profile = spec.get("gpuInstanceProfile")
        hit = instance_profile(gpu.key, profile) if isinstance(profile, str) else None
        if hit is not None and pool["sharing"].get("mode") != "mig":
            # AKS partitions every GPU of the agent pool with one profile (gpuplan.cloud.aks)
            pool["sharing"] = {"mode": "mig", "strategy": cfg.strategy if cfg.strategy in ("single", "mixed")
                               else "single", "layout": {hit[0]: hit[1]}}
            pool["_notes"]["sharing"] = I.Note(f"from {where} gpuInstanceProfile {profile}")
        pool["aks"], pool["_knotes"], pool["_gpus"] = a, kn, m.gpu_count
        pool["sharing"] = pool.pop("sharing")
        out.pools.append(pool)
        if "azure" not in out.cluster:
            owner = _get(spec, "owner", "name")
            if o is not None and is_dns_label(owner):
                az_cfg = {"managedCluster": owner}
                if o.namespace and o.namespace != "gpuplan-aks":
                    az_cfg["namespace"] = o.namespace
                out.cluster["azure"] = (az_cfg, f"from {where} spec.owner", None)
            else:
                out.cluster["azure"] = ({"managedCluster": "todo-managed-cluster"}, None,
                                        "the Azure Service Operator ManagedCluster of the cluster")


# --------------------------------------------------------------------------------- Cluster API


def capi_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: Platforms) -> None:
    for md in _objects(objs, "MachineDeployment", CAPI_GROUP):
        tspec = _get(md.data, "spec", "template", "spec")
        tspec = tspec if isinstance(tspec, dict) else {}
        ann = md.meta.get("annotations") if isinstance(md.meta.get("annotations"), dict) else {}
        name = md.labels.get(V.POOL_LABEL) or md.name
        if _bad_name(draft, name, f"MachineDeployment {show(md.name)}", md):
            continue
        members = sorted((n for n in nodes if n.labels.get(V.POOL_LABEL) == name or str(
            (n.meta.get("annotations") or {}).get(CAPI_OWNER, "")).startswith(md.name + "-")), key=lambda n: n.name)
        from gpuplan.provisioning.capi import read_template

        # the node labels: the KubeadmConfigTemplate's kubelet node-labels, else the autoscaler's
        # scale-from-zero copy of them
        ref = _get(tspec, "bootstrap", "configRef", "name")
        kct = next((o for o in _objects(objs, "KubeadmConfigTemplate", "bootstrap.cluster.x-k8s.io")
                    if o.namespace == md.namespace and o.name == ref), None)
        read_kct = read_template(kct.data) if kct is not None else None
        labels = {**_capacity_labels(ann), **(read_kct[1] if read_kct else {})}
        from gpuplan.catalog.gpus import resolve_gpu

        gpu = resolve_gpu(_majority_label(members, V.GFD_PRODUCT) or labels.get("cluster-api/accelerator"))
        where = f"MachineDeployment {md.namespace}/{md.name}"
        gpu_labels = ("cluster-api/accelerator", V.POOL_LABEL, V.DEVICE_PLUGIN_CONFIG_LABEL, V.MIG_CONFIG_LABEL)
        if gpu is None and not any(k in labels for k in gpu_labels) and not any(V.GFD_PRODUCT in n.labels
                                                                                for n in members):
            continue  # machines without GPUs
        if gpu is None:
            _left_out(draft, where, "no GFD label on a Node of it in the input and no cluster-api/accelerator "
                      "node label names a GPU gpuplan knows", md, "metadata", "name")
            continue
        out.claimed |= {n.name for n in members}
        pool = _base(out, name, members, gpu, [md] + ([kct] if kct is not None else []), where, cfg, draft, labels)
        counts = [out.node_gpus(n, gpu, cfg).gpus for n in members]
        per = I.majority(counts) if counts and None not in counts else None
        pool["_notes"]["gpu"] = I.Note("from its Nodes' GFD labels" if members else
                                       "from its node labels' cluster-api/accelerator")
        advertised = _advertised_gpus(_int(ann.get(CAPI_CAPACITY + "gpu-count")), pool["sharing"])
        if per:
            pool["_notes"]["gpusPerNode"] = I.Note(f"from its Nodes' label {V.GFD_COUNT}")
        elif advertised:
            per = advertised
            pool["_notes"]["gpusPerNode"] = I.Note(f"from {where} annotation {CAPI_CAPACITY}gpu-count (the "
                                                   "nvidia.com/gpu a node advertises) and the pool's sharing")
        else:
            per = 1
            pool["_notes"]["gpusPerNode"] = I.Note(None, "no Node of the MachineDeployment in the input: set the "
                                                   "GPUs per node")
        pool["gpusPerNode"] = per
        ref = tspec.get("infrastructureRef") if isinstance(tspec.get("infrastructureRef"), dict) else {}
        infra: dict[str, Any] = {"kind": ref.get("kind") or "TODO", "name": ref.get("name") or "todo"}
        group = ref.get("apiGroup") or str(ref.get("apiVersion") or "").split("/")[0]
        if group and group != "infrastructure.cluster.x-k8s.io":
            infra["apiGroup"] = group
        c: dict[str, Any] = {"infrastructureRef": infra}
        kn = {"infrastructureRef": I.Note(f"from {where} spec.template.spec.infrastructureRef")}
        maxn, minn = _int(ann.get(CAPI_MAX)), _int(ann.get(CAPI_MIN))
        if maxn is None:  # a fixed-size pool: replicas, no autoscaler annotations
            maxn = minn = _int(_get(md.data, "spec", "replicas")) or len(members) or 1
            kn["maxGPUs"] = I.Note(f"from {where} spec.replicas (fixed size) x {per} GPUs per node")
        else:
            kn["maxGPUs"] = I.Note(f"from {where} annotation {CAPI_MAX} x {per} GPUs per node")
        c["maxGPUs"] = maxn * per
        if minn:
            c["minNodes"] = minn
        for key in ("cpu", "memory"):
            if isinstance(ann.get(CAPI_CAPACITY + key), str):
                c[key] = ann[CAPI_CAPACITY + key]
        if isinstance(ann.get(CAPI_PROVISION_TIME), str):
            c["maxNodeProvisionTime"] = ann[CAPI_PROVISION_TIME]
        if isinstance(tspec.get("failureDomain"), str):
            c["failureDomain"] = tspec["failureDomain"]
        accel = labels.get("cluster-api/accelerator")
        if accel and accel != gpu.key.lower():
            c["accelerator"] = accel
        if read_kct is not None:
            _kubeadm(pool, c, kn, kct, read_kct)
        pool["capi"], pool["_knotes"] = c, kn
        pool["sharing"] = pool.pop("sharing")
        out.pools.append(pool)
        if "capi" not in out.cluster:
            version = tspec.get("version")
            cl = {"clusterName": _get(md.data, "spec", "clusterName") or "todo-cluster",
                  "version": version if isinstance(version, str) and re.match(r"v[0-9]+\.[0-9]+\.[0-9]+\Z", version)
                  else "v1.33.0"}
            if md.namespace and md.namespace != "default":
                cl["namespace"] = md.namespace
            out.cluster["capi"] = (cl, f"from {where} spec.clusterName and spec.template.spec.version",
                                   "autoscalerVersion and gpuTotal: the Cluster Autoscaler's version and flags are "
                                   "not in these objects")


def _topology(pool: dict, fields: Any, o: Obj, path: tuple, where: str, draft: I.Draft | None) -> None:
    """pools[].topology from KubeletConfiguration fields (an AKS kubeletConfig, a Cluster API
    kubelet drop-in), read as Karpenter's kubelet settings are."""
    from gpuplan.importer.karpenter_read import Kubelet, _take

    k = Kubelet()
    _take(fields, k, o, path, where)
    if k.topology and k.topology.get("policy", "restricted") != "none" or len(k.topology) > 1:
        pool["topology"] = dict(k.topology)
        pool["_notes"]["topology"] = I.Note(k.source)
    for what, obj, at in k.todos if draft is not None else ():
        draft.diagnostics.append(I.diag(C.I_TODO, f"pool {pool['name']}: {what}", obj, *at))


def _kubeadm(pool: dict, c: dict, kn: dict, kct: Obj, read_kct: tuple) -> None:
    """Taints, labels and kubelet flags of the pool's KubeadmConfigTemplate, less gpuplan's own
    (its pool label and taint, config selectors, the accelerator label it derives)."""
    _, labels, taints = read_kct
    where = f"KubeadmConfigTemplate {kct.namespace}/{kct.name}"
    mine = ("cluster-api/accelerator", V.DEVICE_PLUGIN_CONFIG_LABEL, V.MIG_CONFIG_LABEL)
    # every other node-label is the pool's own: the kubelet registers the node with it
    own = {k: v for k, v in sorted(labels.items()) if k not in mine and not k.startswith("gpuplan.dev/")
           and I.is_label(k, v)}
    tt = [{k: v for k, v in t.items() if v} for t in taints if isinstance(t.get("key"), str)
          and not t["key"].startswith("gpuplan.dev/")]
    if own:
        pool["labels"] = own
        pool["_notes"]["labels"] = I.Note(f"from {where} node-labels")
    if tt:
        pool["taints"] = tt
        pool["_notes"]["taints"] = I.Note(f"from {where} nodeRegistration.taints")
    reg = _get(kct.data, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs")
    # node-labels and config-dir are gpuplan's (gpuplan.lower.provision_capi.bootstrap_spec)
    args = {a["name"]: a.get("value", "") for a in reg or () if isinstance(a, dict) and isinstance(a.get("name"), str)
            and a["name"] not in ("node-labels", "config-dir")} if isinstance(reg, list) else {}
    for i, f in enumerate(_get(kct.data, "spec", "template", "spec", "files") or ()):
        if isinstance(f, dict) and str(f.get("path", "")).startswith(KUBELET_CONFIG_DIR + "/"):
            try:
                dropin = json.loads(f.get("content") or "")
            except ValueError:
                continue
            if isinstance(dropin, dict) and dropin.get("kind") == "KubeletConfiguration":
                fields = {k: v for k, v in dropin.items() if k not in ("apiVersion", "kind")}
                _topology(pool, fields, kct, ("spec", "template", "spec", "files", i, "content"),
                          f"{where} kubelet drop-in {f.get('path')}", None)
    if args:
        c["kubeletExtraArgs"] = args
        kn["kubeletExtraArgs"] = I.Note(f"from {where} kubeletExtraArgs")


def _advertised_gpus(count: int | None, sharing: dict) -> int | None:
    """Physical GPUs of a node whose scale-from-zero ``gpu-count`` is ``count`` (gpuplan writes the
    nvidia.com/gpu a node advertises, gpuplan.lower.provision_capi): shares under that name divide it."""
    mode = sharing.get("mode")
    if not count or mode == "mig":
        return None
    if mode in ("time-slicing", "mps"):
        return count // sharing["replicas"] if not sharing.get("renameByDefault") and count % sharing["replicas"] == 0 \
            else None
    return count


def _capacity_labels(ann: dict) -> dict[str, str]:
    """The labels of the autoscaler's scale-from-zero annotation (``k=v,k=v``)."""
    out = {}
    for part in str(ann.get(CAPI_CAPACITY + "labels") or "").split(","):
        k, _, v = part.partition("=")
        if k and I.is_label(k.strip(), v.strip()):
            out[k.strip()] = v.strip()
    return out


def read(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, sharing: Any, node_gpus: Any) -> Platforms:
    """The platform pools of the input; ``nodes``: every Node, GFD labels or not; ``sharing`` and
    ``node_gpus``: infer's readers of the operator's configs and the GFD labels."""
    out = Platforms(sharing=sharing, node_gpus=node_gpus)
    gke_pools(objs, nodes, cfg, draft, out)
    aks_pools(objs, [n for n in nodes if n.name not in out.claimed], cfg, draft, out)
    capi_pools(objs, [n for n in nodes if n.name not in out.claimed], cfg, draft, out)
    return out


def operator_settings(plat: Platforms, cfg: Any, op: dict[str, Any], draft: I.Draft) -> None:
    """AKS installs the driver on its GPU nodes; gpuplan then keeps the operator's off them with
    ``nvidia.com/gpu.deploy.driver=false`` unless the operator's driver is off everywhere
    (``gpuOperator.driver: preinstalled``). Agent pools on AKS's driver whose node labels lack that
    label, with no ClusterPolicy to say, are read as the latter."""
    aks = [p for p in plat.pools if "aks" in p and p["aks"].get("driver", "aks") == "aks" and p["_provisioned"]]
    if not aks or cfg.policy is not None or "driver" in op or "driverVersion" in op or any(
            (_get(p["_provisioned"][0].data, "spec", "nodeLabels") or {}).get(V.DEPLOY_DRIVER_LABEL) == "false"
            for p in aks):
        return
    op["driver"] = "preinstalled"
    draft.note(("spec", "cluster", "gpuOperator", "driver"), f"the agent pools on AKS's driver ({aks[0]['name']}, ...) "
               f"do not label their nodes {V.DEPLOY_DRIVER_LABEL}=false: the operator's driver is off")
