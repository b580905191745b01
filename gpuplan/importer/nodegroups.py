"""What the importer's node-group readers (GKE, AKS, Cluster API: gpuplan.importer.platforms)
share: the pools found so far, a pool's common fields and sharing, sizing from a pool object's
limits or the nodes seen, and the findings for a group left out.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer import draft as I
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_dns_label

@dataclass
class Platforms:
    # infer's readers of a pool's sharing and a node's GPUs (``_pool_sharing``, ``_node_gpus``)
    sharing: Any = None
    node_gpus: Any = None
    pools: list[dict] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)  # nodes drafted into these pools
    cluster: dict[str, tuple[dict, str | None, str | None]] = field(default_factory=dict)  # key -> (settings, source, todo)


def as_int(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.isdigit() else None


def objects_of(objs: list[Obj], kind: str, group: str) -> list[Obj]:
    return sorted((o for o in objs if o.kind == kind and o.api_group == group), key=lambda o: (o.namespace, o.name))


def majority_label(members: list[Obj], key: str) -> str | None:
    vals = [m.labels[key] for m in members if isinstance(m.labels.get(key), str)]
    return I.majority(vals) if vals else None


def base_pool(out: Platforms, name: str, members: list[Obj], gpu: Any, provisioned: list[Obj], where: str, cfg: Any,
          draft: I.Draft, labels: dict[str, str]) -> dict:
    """The fields every platform pool has; sharing from the operator's configs the nodes (or the
    pool object's node labels) select, or the nodes' GFD labels."""
    notes = {"name": I.Note(f"from {where}"), "gpu": I.Note(None)}
    dp_sel = labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL) or majority_label(members, V.DEVICE_PLUGIN_CONFIG_LABEL)
    mig_sel = labels.get(V.MIG_CONFIG_LABEL) or majority_label(members, V.MIG_CONFIG_LABEL)
    observed = out.node_gpus(members[0], gpu, cfg) if members and V.GFD_PRODUCT in members[0].labels else None
    sharing, note = out.sharing(name, gpu, None, dp_sel, mig_sel, cfg, draft, members[0] if members else
                                    (provisioned[0] if provisioned else None),
                                    ("metadata", "labels") if members else ("metadata",), observed)
    notes["sharing"] = note
    return {"name": name, "gpu": gpu.key, "sharing": sharing, "_notes": notes, "_nodes": members,
            "_selected": (dp_sel, mig_sel), "_dra": False, "_provisioned": provisioned}


def bad_name(draft: I.Draft, name: Any, what: str, o: Obj) -> bool:
    if is_dns_label(name):
        return False
    draft.diagnostics.append(I.diag(C.W_BAD_NAME, f"{what}: pool name {show(name)} is not a DNS-1123 label; left out",
                                    o, "metadata", "name"))
    return True


def machine_of(lookup: Any, declared: Any, members: list[Obj]) -> tuple[Any, Any]:
    """(machine type or VM size, its table entry): the pool object's, else the nodes' instance type."""
    name = declared if isinstance(declared, str) else majority_label(members, V.INSTANCE_TYPE_LABEL)
    return name, lookup(name) if isinstance(name, str) else None


def size_pool(group: dict, kn: dict, maxn: int | None, minn: int | None, per: int, members: list[Obj], source: str,
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


def left_out(draft: I.Draft, what: str, why: str, o: Obj, *sub: Any) -> None:
    draft.diagnostics.append(I.diag(C.W_UNKNOWN_GPU, f"{what}: {why}; left out", o, *sub,
                                     hint="`gpuplan schema --markdown` lists the machine types gpuplan knows"))


def topology_from(pool: dict, fields: Any, o: Obj, path: tuple, where: str, draft: I.Draft | None) -> None:
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


# labels a platform or gpuplan's template writes on a node group besides the system prefixes:
# AKS's reserved domain (gpuplan.provisioning.aks RESERVED_LABEL_DOMAINS) and the label that keeps
# GKE's device plugin off (gpuplan.provisioning.gke NO_GKE_DEVICE_PLUGIN_LABEL)
PLATFORM_LABEL_PREFIXES = ("kubernetes.azure.com/", "gke-no-default-nvidia-gpu-device-plugin")


def labels_and_taints(pool: dict, declared: tuple[dict, list] | None, members: list[Obj], where: str,
                      platform_taint_keys: tuple[str, ...]) -> None:
    """``pools[].labels`` and ``taints`` of a node group: from the pool object's template
    (``declared``: its node labels and taints as Kubernetes writes them) less what gpuplan writes
    itself (its pool label and config labels, its ``gpuplan.dev/`` taints), else what every Node of
    the group carries less what the platform puts on its nodes (``platform_taint_keys``: GKE's GPU
    taint, AKS's spot taint). The build writes them back into the template, so the round trip
    compares like with like."""
    if declared is not None:
        labels, taints, src = declared[0], declared[1], f"from {where}"
    elif members:
        first = members[0]
        labels = {k: v for k, v in first.labels.items() if all(m.labels.get(k) == v for m in members)}
        raw = [I.taints_of(m, (m.data.get("spec") or {}).get("taints"), None) for m in members]
        taints = [t for t in raw[0] if all(t in r for r in raw) and not t["key"].startswith(platform_taint_keys)]
        src = f"what every Node of {where} carries"
    else:
        return
    own = {k: v for k, v in I.own_labels(labels).items() if not k.startswith(PLATFORM_LABEL_PREFIXES)}
    kept = [t for t in I.taints_of(members[0] if members else None, taints, None)
            if not t["key"].startswith("gpuplan.dev/")] if declared is not None else taints
    if kept:
        pool["taints"] = kept
        pool["_notes"]["taints"] = I.Note(f"{src} (gpuplan's own taints left out)")
    if own:
        pool["labels"] = dict(sorted(own.items()))
        pool["_notes"]["labels"] = I.Note(src)


def declared(read_template: Any, o: Obj | None) -> tuple[dict, list] | None:
    """A pool object's template labels and taints through its platform's reader
    (``gpuplan.provisioning.<platform>.read_template``); None without the object, or where it
    is not of the shape the platform writes (the round trip shows that object as it is)."""
    if o is None:
        return None
    try:
        got = read_template(o.data)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if got is None or not isinstance(got[1], dict) or not all(isinstance(v, str) for v in got[1].values()):
        return None
    return got[1], got[2]
