"""Cluster API MachineDeployments as ``capi:`` pools, with the KubeadmConfigTemplate each names
and the Nodes of its MachineSets (gpuplan.importer.platforms says how).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import conventions as V
from gpuplan.importer import draft as I
from gpuplan.importer import nodegroups as N
from gpuplan.importer.read import Obj

_get = dig

CAPI_GROUP = "cluster.x-k8s.io"
# Cluster API's autoscaler annotations and the Node annotation naming the Machine's owner
# (cluster-api@v1.14.0 core/reconcilers/machine/machine_controller_noderef.go:49-56)
CAPI_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
CAPI_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPI_OWNER = "cluster.x-k8s.io/owner-name"
CAPI_CAPACITY = "capacity.cluster-autoscaler.kubernetes.io/"
CAPI_PROVISION_TIME = "cluster.x-k8s.io/autoscaling-options-maxnodeprovisiontime"
KUBELET_CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"  # gpuplan.lower.provision_capi: the kubelet drop-in's dir


def capi_pools(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, out: N.Platforms) -> None:
    for md in N.objects_of(objs, "MachineDeployment", CAPI_GROUP):
        tspec = _get(md.data, "spec", "template", "spec")
        tspec = tspec if isinstance(tspec, dict) else {}
        ann = md.meta.get("annotations") if isinstance(md.meta.get("annotations"), dict) else {}
        name = md.labels.get(V.POOL_LABEL) or md.name
        if N.bad_name(draft, name, f"MachineDeployment {show(md.name)}", md):
            continue
        members = sorted((n for n in nodes if n.labels.get(V.POOL_LABEL) == name or str(
            (n.meta.get("annotations") or {}).get(CAPI_OWNER, "")).startswith(md.name + "-")), key=lambda n: n.name)
        from gpuplan.provisioning.capi import read_template

        # the node labels: the KubeadmConfigTemplate's kubelet node-labels, else the autoscaler's
        # scale-from-zero copy of them
        ref = _get(tspec, "bootstrap", "configRef", "name")
        kct = next((o for o in N.objects_of(objs, "KubeadmConfigTemplate", "bootstrap.cluster.x-k8s.io")
                    if o.namespace == md.namespace and o.name == ref), None)
        read_kct = read_template(kct.data) if kct is not None else None
        labels = {**_capacity_labels(ann), **(read_kct[1] if read_kct else {})}
        from gpuplan.catalog.gpus import resolve_gpu

        gpu = resolve_gpu(N.majority_label(members, V.GFD_PRODUCT) or labels.get("cluster-api/accelerator"))
        where = f"MachineDeployment {md.namespace}/{md.name}"
        gpu_labels = ("cluster-api/accelerator", V.POOL_LABEL, V.DEVICE_PLUGIN_CONFIG_LABEL, V.MIG_CONFIG_LABEL)
        if gpu is None and not any(k in labels for k in gpu_labels) and not any(V.GFD_PRODUCT in n.labels
                                                                                for n in members):
            continue  # machines without GPUs
        if gpu is None:
            N.left_out(draft, where, "no GFD label on a Node of it in the input and no cluster-api/accelerator "
                      "node label names a GPU gpuplan knows", md, "metadata", "name")
            continue
        out.claimed |= {n.name for n in members}
        pool = N.base_pool(out, name, members, gpu, [md] + ([kct] if kct is not None else []), where, cfg, draft, labels)
        counts = [out.node_gpus(n, gpu, cfg).gpus for n in members]
        per = I.majority(counts) if counts and None not in counts else None
        pool["_notes"]["gpu"] = I.Note("from its Nodes' GFD labels" if members else
                                       "from its node labels' cluster-api/accelerator")
        advertised = _advertised_gpus(N.as_int(ann.get(CAPI_CAPACITY + "gpu-count")), pool["sharing"])
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
        maxn, minn = N.as_int(ann.get(CAPI_MAX)), N.as_int(ann.get(CAPI_MIN))
        if maxn is None:  # a fixed-size pool: replicas, no autoscaler annotations
            maxn = minn = N.as_int(_get(md.data, "spec", "replicas")) or len(members) or 1
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
                N.topology_from(pool, fields, kct, ("spec", "template", "spec", "files", i, "content"),
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
