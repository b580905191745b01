"""What a Karpenter NodePool and its EC2NodeClass say beyond instance types and
limits: the disruption settings (as a tier workload gpuplan derives them from)
and the kubelet Topology / CPU / Memory Manager settings (``pools[].topology``).

Disruption: gpuplan writes one of three ``spec.disruption`` blocks, chosen by the
workloads of the pool's tiers (gpuplan/lower/karpenter.py ``_disruption``); a
cluster block equal to one of them names that workload, any other is a TODO.

Kubelet settings, wherever the input holds them: the AL2023 NodeConfig
(``application/node.eks.aws`` part of ``userData``, ``spec.kubelet.config``), the
Bottlerocket TOML ``[settings.kubernetes]`` (both as gpuplan/lower/karpenter_aws.py
writes them), the EC2NodeClass ``spec.kubelet`` and a v1beta1 NodePool's
``spec.template.spec.kubelet``. What ``topology`` cannot say is a TODO at its line.

Instance types: every requirement form Karpenter accepts (an instance-type list, or family,
size, category, generation, GPU name/manufacturer/count/memory with In, NotIn, Exists,
DoesNotExist, Gt, Lt and ``minValues``) is evaluated against gpuplan's AWS instance table
(``gpuplan.cloud.karpenter_requirements``); a set of several GPU models keeps one model per pool
(the model the NodePool's nodes run, else the one with most instance types) with a TODO.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import email
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig as _get
from gpuplan.importer.conventions import INSTANCE_TYPE_LABEL as INSTANCE_TYPE
from gpuplan.importer.read import Obj, yaml_payload

# gpuplan/lower/karpenter.py _disruption and CONSOLIDATE_AFTER: (policy, budgets) -> (workload, default after)
JOBS_BUDGETS = [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "10%"}]
ONE_NODE = [{"nodes": "1"}]
DISRUPTIONS = (("WhenEmpty", JOBS_BUDGETS, "training", "10m"), ("WhenEmpty", ONE_NODE, "interactive", "10m"),
               ("WhenEmptyOrUnderutilized", ONE_NODE, None, "5m"))

# KubeletConfiguration field -> (pools[].topology key, allowed values or None: any string);
# gpuplan.identity.kubelet_topology_fields writes these
KUBELET_TOPOLOGY = {
    "topologyManagerPolicy": ("policy", ("none", "best-effort", "restricted", "single-numa-node")),
    "topologyManagerScope": ("scope", ("container", "pod")),
    "cpuManagerPolicy": ("cpuManagerPolicy", ("none", "static")),
    "memoryManagerPolicy": ("memoryManagerPolicy", ("None", "Static")),
    "reservedSystemCPUs": ("reservedSystemCPUs", None),
}
# Bottlerocket [settings.kubernetes] keys (gpuplan.identity.bottlerocket_settings)
BOTTLEROCKET_KEYS = {"cpu-manager-policy": "cpuManagerPolicy", "topology-manager-policy": "topologyManagerPolicy",
                     "topology-manager-scope": "topologyManagerScope"}
NODECONFIG_TYPE = "application/node.eks.aws"  # awslabs/amazon-eks-ami nodeadm: the MIME part it reads
KUBELET_WORDS = re.compile(r"topology-?manager|cpu-?manager|memory-?manager|reserved-?system-?cpus", re.I)


@dataclass
class Disruption:
    workload: str | None = None  # the tier workload whose settings the cluster's are
    consolidate_after: str | None = None  # when not that workload's default
    todo: str | None = None  # the cluster's settings are none gpuplan writes


def read_disruption(spec: dict) -> Disruption:
    d = spec.get("disruption")
    if not isinstance(d, dict):
        return Disruption(todo="the NodePool has no spec.disruption: gpuplan writes its own")
    after = d.get("consolidateAfter")
    for policy, budgets, workload, default in DISRUPTIONS:
        if d.get("consolidationPolicy") == policy and d.get("budgets") == budgets and isinstance(after, str):
            return Disruption(workload, None if after == default else after)
    return Disruption(consolidate_after=after if isinstance(after, str) else None,
                      todo=f"consolidationPolicy {d.get('consolidationPolicy')!r} with these budgets is none gpuplan "
                      "writes (it chooses from the tiers' workload: training/batch, interactive, other); the round "
                      "trip shows the difference (GP967)")


@dataclass
class InstanceChoice:
    types: list[str]  # the draft's karpenter.instanceTypes
    model: str | None  # catalog key of their GPU (None: no GPU gpuplan knows)
    selector: bool  # the NodePool selects by anything but an instance-type list
    todos: list[str] = field(default_factory=list)
    others: dict[str, list[str]] = field(default_factory=dict)  # other GPU models -> their instance types


def lists_instance_types(reqs: Any) -> list[str] | None:
    """The values of ``node.kubernetes.io/instance-type In [...]`` (the form gpuplan writes)."""
    from gpuplan.cloud.karpenter_requirements import NORMALIZED

    for r in reqs if isinstance(reqs, list) else ():
        if isinstance(r, dict) and NORMALIZED.get(r.get("key"), r.get("key")) == INSTANCE_TYPE and \
                r.get("operator") == "In" and isinstance(r.get("values"), list):
            return [v for v in r["values"] if isinstance(v, str)]
    return None


# what says a NodePool is meant for GPUs, whatever gpuplan's table makes of its instance types:
# the AWS provider's GPU labels (aws/karpenter-provider-aws@v1.14.1 pkg/apis/v1/labels.go:150-153),
# the GPU instance categories (p, g: accelerated computing with NVIDIA GPUs), a GPU limit or taint
_GPU_KEYS = ("karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-name",
             "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-memory",
             # Azure/karpenter-provider-azure@v1.14.2 pkg/apis/v1beta1/labels.go:146-148
             "karpenter.azure.com/sku-gpu-name", "karpenter.azure.com/sku-gpu-manufacturer",
             "karpenter.azure.com/sku-gpu-count")
_GPU_NAMED = {"karpenter.k8s.aws/instance-category": re.compile(r"[pg]\Z"),
              "karpenter.k8s.aws/instance-family": re.compile(r"[pg][0-9]"),
              # Azure's GPU sizes are the N family (Standard_NC..., Standard_ND..., Standard_NV...)
              "karpenter.azure.com/sku-family": re.compile(r"N\Z"),
              INSTANCE_TYPE: re.compile(r"[pg][0-9]|Standard_N"),
              "karpenter.azure.com/sku-name": re.compile(r"Standard_N")}


def gpu_intent(spec: Any) -> bool:
    """Whether a NodePool ``spec`` asks for GPU instances: a requirement on a GPU key that is not
    ``DoesNotExist``/``NotIn``, a category, family or type of the GPU families, an
    ``nvidia.com/gpu`` limit, or an ``nvidia.com/gpu`` taint. A NodePool without any of these
    (``instance-category In [c, m, r]``) is not a GPU pool: gpuplan leaves it as it is."""
    from gpuplan.cloud.karpenter_requirements import NORMALIZED

    tspec = _get(spec, "template", "spec") or {}
    for r in tspec.get("requirements") or () if isinstance(tspec, dict) else ():
        if not isinstance(r, dict):
            continue
        key, op, vals = NORMALIZED.get(r.get("key"), r.get("key")), r.get("operator"), r.get("values") or []
        if key in _GPU_KEYS and op in ("In", "Exists", "Gt", "Lt"):
            if not (op == "In" and all(str(v) == "0" for v in vals)):
                return True
        named = _GPU_NAMED.get(key)
        if named is not None and op == "In" and any(isinstance(v, str) and named.match(v) for v in vals):
            return True
    limits = _get(spec, "limits")
    if isinstance(limits, dict) and any(str(k).startswith("nvidia.com/") for k in limits):
        return True
    taints = tspec.get("taints") if isinstance(tspec, dict) else None
    return any(isinstance(t, dict) and str(t.get("key", "")).startswith("nvidia.com/") for t in taints or ())


def _table_names(cloud: str) -> Any:
    if cloud == "azure":
        from gpuplan.cloud.aks import machine_types

        return machine_types()
    from gpuplan.cloud.aws import instance_types

    return instance_types()


def instance_kind(name: str, cloud: str = "aws") -> tuple[str, int] | None:
    """(GPU model key, GPUs) of an instance type of ``cloud``'s table, or None (not in it, no GPU)."""
    if cloud == "azure":
        from gpuplan.catalog.gpus import resolve_gpu
        from gpuplan.cloud.aks import machine_type

        m = machine_type(name)
        g = resolve_gpu(m.gpu) if m is not None and m.gpu_count else None
        return (g.key, m.gpu_count) if g is not None else None
    from gpuplan.cloud.aws import instance_gpu_model, instance_type

    it = instance_type(name)
    g = instance_gpu_model(it) if it is not None else None
    return (g.key, it.gpu_count) if g is not None else None


def read_instance_types(reqs: Any, running: dict[str, int], cloud: str = "aws") -> InstanceChoice:
    """The instance types (and GPU model) of a NodePool with requirements ``reqs`` on ``cloud``
    (``aws``; ``azure`` for Node Auto Provisioning); ``running``: GPU model -> nodes of this
    NodePool in the input that run it."""
    from gpuplan.cloud.karpenter_requirements import select

    sel = select(reqs, cloud)
    listed = lists_instance_types(reqs)
    fits = set(sel.types)
    known = set(_table_names(cloud))
    # an instance-type list keeps its order, and names gpuplan's table lacks (validate reports them)
    cands = [n for n in listed if n in fits or n not in known] if listed is not None else sel.types
    # one gpuplan pool has one GPU model and one GPU count per node (GP612): a NodePool whose
    # requirements select several keeps one kind, the one its nodes run, else the one with most types
    by_kind: dict[tuple[str, int], list[str]] = {}
    for n in cands:
        kind = instance_kind(n, cloud)
        if kind is not None:
            by_kind.setdefault(kind, []).append(n)
    out = InstanceChoice([], None, listed is None)
    if not by_kind:
        return out
    kind = sorted(by_kind, key=lambda k: (-running.get(k[0], 0), -len(by_kind[k]), k))[0]
    out.model = kind[0]
    models = sorted({m for m, _ in by_kind})
    if len(models) > 1:
        why = "the model its nodes run" if running.get(out.model) else "the model with most instance types"
        out.todos.append(f"the NodePool launches {len(models)} GPU models ({', '.join(models)}); a "
                         f"gpuplan pool has one: the draft keeps {out.model} ({why}); write a pool for each other "
                         "model (the round trip shows the instance types this one no longer launches, GP966)")
    counts = sorted({c for m, c in by_kind if m == out.model})
    if len(counts) > 1:
        out.todos.append(f"the NodePool launches {out.model} instance types with {', '.join(map(str, counts))} GPUs; "
                         f"a gpuplan pool has one count per node: the draft keeps the {kind[1]}-GPU types "
                         f"({', '.join(by_kind[kind])}); write a pool for each other count")
    out.others = {f"{m} x{c}": ts for (m, c), ts in sorted(by_kind.items()) if (m, c) != kind}
    out.types = [n for n in cands if n in by_kind[kind] or n not in known]
    if sel.unread:
        out.todos.append(f"requirements on {', '.join(sel.unread)} are not in gpuplan's instance table: check "
                         "the instance types")
    for k, vals in sorted(sel.unknown_values.items()):
        out.todos.append(f"{k} In {vals} names instance types gpuplan's GPU table does not hold (not GPU "
                         "instance types, or unknown): they are not in the pool")
    for k, (want, have) in sorted(sel.unmet_min_values.items()):
        out.todos.append(f"{k} minValues {want} is met by {have} values among these instance types: Karpenter "
                         "launches no node (pkg/cloudprovider/types.go:399-432)")
    if sel.invalid:
        out.todos.append(f"{len(sel.invalid)} requirement(s) Karpenter does not accept were left out")
    return out


@dataclass
class Kubelet:
    topology: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    todos: list[tuple[str, Obj, tuple]] = field(default_factory=list)  # (what, object, path in it)


def _take(fields: Any, out: Kubelet, o: Obj, path: tuple, where: str) -> None:
    if not isinstance(fields, dict):
        return
    for k, v in fields.items():
        if k == "topologyManagerPolicyOptions" and v == {"prefer-closest-numa-nodes": "true"}:
            out.topology["preferClosestNUMANodes"] = True
        elif k in KUBELET_TOPOLOGY and isinstance(v, str) and (KUBELET_TOPOLOGY[k][1] is None
                                                                or v in KUBELET_TOPOLOGY[k][1]):
            out.topology[KUBELET_TOPOLOGY[k][0]] = v
        else:
            out.todos.append((f"kubelet {k} ({where}) is not a setting pools[].topology can say", o, path + (k,)))
            continue
        out.source = f"from {where}"


def _userdata(text: str, nc: Obj, out: Kubelet) -> None:
    at = ("spec", "userData")
    if text.lstrip().startswith("MIME-Version") or "Content-Type: multipart" in text[:400]:
        msg = email.message_from_string(text)
        for part in msg.walk() if msg.is_multipart() else ():
            body = part.get_payload()
            if not isinstance(body, str):
                continue
            if part.get_content_type() == NODECONFIG_TYPE:
                doc = yaml_payload(body)
                if isinstance(doc, dict) and doc.get("kind") == "NodeConfig":
                    _take(_get(doc, "spec", "kubelet", "config"), out, nc, at,
                          f"EC2NodeClass {nc.name} userData NodeConfig spec.kubelet.config")
                    continue
            if KUBELET_WORDS.search(body):
                out.todos.append((f"EC2NodeClass {nc.name} userData ({part.get_content_type()} part) sets kubelet "
                                  "settings gpuplan does not read there", nc, at))
        return
    try:
        toml = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        toml = None
    kube = _get(toml, "settings", "kubernetes") if isinstance(toml, dict) else None
    if isinstance(kube, dict):
        fields = {BOTTLEROCKET_KEYS[k]: v for k, v in kube.items() if k in BOTTLEROCKET_KEYS}
        opts = kube.get("topology-manager-policy-options")
        if opts == ["prefer-closest-numa-nodes"] or opts == {"prefer-closest-numa-nodes": True}:
            fields["topologyManagerPolicyOptions"] = {"prefer-closest-numa-nodes": "true"}
        _take(fields, out, nc, at, f"EC2NodeClass {nc.name} userData [settings.kubernetes]")
        return
    doc = yaml_payload(text)
    if isinstance(doc, dict) and doc.get("kind") == "NodeConfig":
        _take(_get(doc, "spec", "kubelet", "config"), out, nc, at, f"EC2NodeClass {nc.name} userData NodeConfig")
    elif KUBELET_WORDS.search(text):
        out.todos.append((f"EC2NodeClass {nc.name} userData sets kubelet settings gpuplan does not read there", nc, at))


def read_kubelet(np_: Obj, nc: Obj | None) -> Kubelet:
    out = Kubelet()
    if nc is not None:
        ud = _get(nc.data, "spec", "userData")
        if isinstance(ud, str):
            _userdata(ud, nc, out)
        _take(_get(nc.data, "spec", "kubelet"), out, nc, ("spec", "kubelet"), f"EC2NodeClass {nc.name} spec.kubelet")
    _take(_get(np_.data, "spec", "template", "spec", "kubelet"), out, np_, ("spec", "template", "spec", "kubelet"),
          f"NodePool {np_.name} spec.template.spec.kubelet")
    return out
