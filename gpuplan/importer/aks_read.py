"""AKS agent pools as ``aks:`` pools: the Azure Service Operator ManagedClustersAgentPools and
the Nodes grouped by ``kubernetes.azure.com/agentpool`` (gpuplan.importer.platforms says how).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import conventions as V
from gpuplan.importer import draft as I
from gpuplan.importer import nodegroups as N
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_dns_label

_get = dig

ASO_GROUP = "containerservice.azure.com"
AKS_SPOT_LABEL = "kubernetes.azure.com/scalesetpriority"  # AKS labels spot nodes (gpuplan.provisioning.aks)


def aks_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: N.Platforms) -> None:
    from gpuplan.catalog.gpus import resolve_gpu
    from gpuplan.cloud.aks import instance_profile, machine_type
    from gpuplan.provisioning import aks as A

    agentpools = {}
    for o in N.objects_of(objs, "ManagedClustersAgentPool", ASO_GROUP):
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
        if N.bad_name(draft, name, f"AKS agent pool {show(az)}", first):
            continue
        size, m = N.machine_of(machine_type, spec.get("vmSize"), members)
        if m is None and not any(n.labels.get(A.ACCELERATOR_LABEL) == A.ACCELERATOR_VALUE or V.GFD_PRODUCT in n.labels
                                 for n in members):
            continue  # an agent pool without GPUs (the system pool)
        if m is None:
            N.left_out(draft, f"AKS agent pool {az}", f"VM size {show(size)} is not in gpuplan's AKS table", first,
                      *(("spec", "vmSize") if o is not None else ("metadata", "labels", V.INSTANCE_TYPE_LABEL)))
            continue
        out.claimed |= {n.name for n in members}
        gpu = resolve_gpu(m.gpu)
        where = f"ManagedClustersAgentPool {o.namespace}/{o.name}" if o is not None else \
            f"Nodes labelled {A.AGENTPOOL_LABEL}={az}"
        pool = N.base_pool(out, name, members, gpu, [o] if o is not None else [], where, cfg, draft, node_labels)
        N.labels_and_taints(pool, N.declared(A.read_template, o), members, where, (A.SPOT_TAINT["key"],))
        pool["_notes"]["gpu"] = I.Note(f"from VM size {m.name} (gpuplan's AKS table)")
        a: dict[str, Any] = {"vmSize": m.name}
        kn: dict[str, I.Note] = {"vmSize": I.Note(f"from {where}" if o is not None else
                                                  f"from the Nodes' label {V.INSTANCE_TYPE_LABEL}")}
        if az != name:
            a["name"] = az
        auto = spec.get("enableAutoScaling") is True
        maxn = N.as_int(spec.get("maxCount")) if auto else N.as_int(spec.get("count"))
        minn = N.as_int(spec.get("minCount")) if auto else maxn
        N.size_pool(a, kn, maxn, minn, m.gpu_count, members, f"from {where} {'maxCount' if auto else 'count'}",
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
            N.topology_from(pool, spec.get("kubeletConfig"), o, ("spec", "kubeletConfig"), f"{where} kubeletConfig", draft)
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


def operator_settings(plat: N.Platforms, cfg: Any, op: dict[str, Any], draft: I.Draft) -> None:
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
