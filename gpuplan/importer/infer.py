"""Infer a draft fleet spec from cluster objects.

Pure: objects in, a ``Draft`` out (plain data plus, for every value, where it
came from, and the diagnostics of what the cluster itself gets wrong). The
emitter turns it into commented YAML; nothing here formats text for people
except the provenance notes and messages.

The export is partly tenants' writing: anyone who may create objects in a
namespace can give them any name and label. So what configures the draft is
read only from where a tenant cannot write it:

* the GPU Operator's ConfigMaps (device-plugin and mig-parted configs) only
  from the operator's namespace: its ClusterPolicy's ``status.namespace``
  (cluster-scoped, written by the operator), else the namespace of its
  Deployment ``gpu-operator`` when exactly one namespace has one, else (no
  evidence, or several candidates none of which is the default) the default,
  ``gpu-operator``, which is also what the draft then says. Reading nothing
  rather than a guess is the safe choice: a missing config leaves a pool's
  sharing exclusive with a finding, a tenant's would configure the fleet. A
  ConfigMap elsewhere with the name the importer looks for is a GP965;
* gpuplan's ResourceClaimTemplates (``gpuplan-<tier>[-x<N>]``, maxGPUsPerPod)
  only with gpuplan's labels, in a Namespace gpuplan manages (its managed-by
  label: Namespaces are cluster-scoped) that is granted the tier, and by the
  majority of those namespaces (``claim_template_counts``);
* the fleet's name only from gpuplan's labels on cluster-scoped objects.

Objects reach this module type-checked (``gpuplan.importer.shapes``).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import show
from gpuplan.importer import codes as C
from gpuplan.importer import conventions as V
from gpuplan.importer import delivery as D
from gpuplan.importer import gfd as F
from gpuplan.importer import karpenter_read as KR
from gpuplan.importer import nap_read as NR
from gpuplan.importer import platforms as P
from gpuplan.importer import sharing_read as SR
from gpuplan.importer import standalone as S
from gpuplan.importer.draft import Draft, Note, is_dp_config as _is_dp_config, is_label
from gpuplan.importer.draft import is_mig_config as _is_mig_config, majority as _majority, diag as _diag
from gpuplan.importer.draft import add_todo as _add_todo, own_labels as _own_labels, taints_of as _taints
from gpuplan.importer.read import Obj, yaml_payload
from gpuplan.k8snames import is_dns_label, is_dns_subdomain

_KUBELET_VERSION = re.compile(r"v?1\.([0-9]{2})\.")
_INT = re.compile(r"[0-9]+\Z")



# ----------------------------------------------------------------- GPU Operator configs


@dataclass
class Configs:
    dp_cm: Obj | None = None
    dp: dict[str, dict] = field(default_factory=dict)  # config name -> parsed config
    dp_default: str | None = None
    mig_cm: Obj | None = None
    mig_key: str | None = None
    mig: dict[str, list] = field(default_factory=dict)  # config name -> mig-parted entries
    mig_default: str | None = None
    policy: Obj | None = None
    strategy: str | None = None  # ClusterPolicy spec.mig.strategy
    namespace: str = V.OPERATOR_NAMESPACE  # the GPU Operator's: its ConfigMaps are read only there
    namespace_source: str | None = None  # where the namespace came from (None: the default)


_get = dig  # a value deep in an object the cluster returned


def operator_namespace(objs: list[Obj], policy: Obj | None, draft: Draft) -> tuple[str, str | None]:
    """(the GPU Operator's namespace, where it came from): the ClusterPolicy's
    status.namespace (cluster-scoped, written by the operator), else the one
    namespace holding a Deployment gpu-operator, else gpu-operator (several
    such Deployments and none in gpu-operator: a GP965, and the default)."""
    if policy is not None:
        ns = _get(policy.data, "status", "namespace")
        if is_dns_label(ns):
            return ns, f"from ClusterPolicy {policy.name} status.namespace"
    deps = sorted((o for o in objs if o.kind == "Deployment" and o.api_group == "apps"
                   and o.name == V.OPERATOR_DEPLOYMENT and is_dns_label(o.namespace)), key=lambda o: o.namespace)
    spaces = sorted({o.namespace for o in deps})
    if len(spaces) == 1:
        return spaces[0], f"from Deployment {spaces[0]}/{V.OPERATOR_DEPLOYMENT}"
    if len(spaces) > 1 and V.OPERATOR_NAMESPACE not in spaces:
        draft.diagnostics.append(_diag(
            C.W_NOT_TRUSTED, f"Deployments {', '.join(show(n + '/' + V.OPERATOR_DEPLOYMENT) for n in spaces[:5])} "
            f"each could be the GPU Operator's; not trusted to tell its namespace: only {V.OPERATOR_NAMESPACE} is "
            "read", deps[0], "metadata", "namespace",
            hint="add the ClusterPolicy to the export (kubectl get clusterpolicies -o json): its status.namespace "
                 "names the operator's namespace"))
    return V.OPERATOR_NAMESPACE, None


def find_configs(objs: list[Obj], draft: Draft) -> Configs:
    """The device-plugin and mig-parted ConfigMaps, from the GPU Operator's
    namespace only (``operator_namespace``): the ones the ClusterPolicy names,
    else gpuplan's (or the operator's default mig-parted one), else any whose
    values have their shape. A ConfigMap elsewhere with one of those names (or
    the one taken), or with the shape when the namespace has none, is a GP965:
    tenants create ConfigMaps in their own namespaces."""
    cfg = Configs()
    policies = sorted((o for o in objs if o.kind == "ClusterPolicy" and o.api_group == "nvidia.com"),
                      key=lambda o: o.name)
    dp_name = mig_name = None
    if policies:
        cfg.policy = p = policies[0]
        spec = p.data.get("spec") if isinstance(p.data.get("spec"), dict) else {}
        cfg.strategy = _get(spec, "mig", "strategy") if isinstance(_get(spec, "mig", "strategy"), str) else None
        dp_name, cfg.dp_default = _get(spec, "devicePlugin", "config", "name"), _get(spec, "devicePlugin", "config", "default")
        mig_name, cfg.mig_default = _get(spec, "migManager", "config", "name"), _get(spec, "migManager", "config", "default")
        cfg.dp_default = cfg.dp_default if isinstance(cfg.dp_default, str) else None
        cfg.mig_default = cfg.mig_default if isinstance(cfg.mig_default, str) else None
    cfg.namespace, cfg.namespace_source = operator_namespace(objs, cfg.policy, draft)
    every = sorted((o for o in objs if o.kind == "ConfigMap" and not o.api_group), key=lambda o: (o.namespace, o.name))
    cms = [o for o in every if o.namespace == cfg.namespace]
    elsewhere = [o for o in every if o.namespace != cfg.namespace]

    def shaped(o: Obj, test) -> bool:
        data = o.data.get("data")
        return isinstance(data, dict) and bool(data) and all(test(yaml_payload(v)) for v in data.values())

    def pick(names: tuple, test) -> Obj | None:
        for want in names:
            for o in cms:
                if isinstance(want, str) and o.name == want:
                    return o
        return next((o for o in cms if shaped(o, test)), None)

    cfg.dp_cm = pick((dp_name, V.DEVICE_PLUGIN_CONFIGMAP), _is_dp_config)
    cfg.mig_cm = pick((mig_name, V.MIG_PARTED_CONFIGMAP, V.OPERATOR_MIG_CONFIGMAP), _is_mig_config)
    names = {n for n in (dp_name, mig_name, V.DEVICE_PLUGIN_CONFIGMAP, V.MIG_PARTED_CONFIGMAP, V.OPERATOR_MIG_CONFIGMAP,
                         cfg.dp_cm.name if cfg.dp_cm else None, cfg.mig_cm.name if cfg.mig_cm else None)
             if isinstance(n, str)}
    for o in elsewhere:
        if o.name in names or (cfg.dp_cm is None and shaped(o, _is_dp_config)) or \
                (cfg.mig_cm is None and shaped(o, _is_mig_config)):
            draft.diagnostics.append(_diag(
                C.W_NOT_TRUSTED, f"ConfigMap {show(o.namespace)}/{show(o.name)} holds GPU Operator configs but is not "
                f"configuration: only the operator's namespace ({cfg.namespace}) is read", o, "metadata", "namespace",
                hint=f"kubectl get configmap -n {show(o.namespace)} {show(o.name)} --show-managed-fields -o yaml "
                     "(who wrote it); the operator reads only its own namespace" + (
                         "" if cfg.namespace_source else ": if it runs elsewhere, add `kubectl get clusterpolicies "
                                                         "-o json` to the export")))
    if cfg.dp_cm is not None:
        for k, v in sorted((cfg.dp_cm.data.get("data") or {}).items()):
            parsed = yaml_payload(v)
            if _is_dp_config(parsed):
                cfg.dp[k] = parsed
            else:
                draft.diagnostics.append(_diag(C.W_UNREAD, f"device-plugin config {show(k)} is not a v1 config; "
                                               "left out", cfg.dp_cm, "data", k))
        if cfg.dp_default is None and V.DEVICE_PLUGIN_DEFAULT_CONFIG in cfg.dp:
            cfg.dp_default = V.DEVICE_PLUGIN_DEFAULT_CONFIG
    if cfg.mig_cm is not None:
        for k, v in sorted((cfg.mig_cm.data.get("data") or {}).items()):
            parsed = yaml_payload(v)
            if _is_mig_config(parsed):
                cfg.mig_key = k
                for name, entries in parsed["mig-configs"].items():
                    if isinstance(name, str) and isinstance(entries, list):
                        cfg.mig[name] = entries
                break
        if cfg.mig_default is None and V.MIG_ALL_DISABLED in cfg.mig:
            cfg.mig_default = V.MIG_ALL_DISABLED
    return cfg


# --------------------------------------------------------------------------- sharing


def _model_filters(model: Any) -> set[str]:
    return {f.lower() for f in model.device_filters}


def mig_layouts(entries: list, model: Any) -> tuple[dict | None, list | None, str | None]:
    """(layout, devices, problem) of a mig-parted config for ``model``: one
    layout for every GPU, or per-GPU groups, or neither when MIG is off."""
    mine = []
    for e in entries:
        if not isinstance(e, dict):
            return None, None, "an entry is not a mapping"
        filt = e.get("device-filter")
        if filt is not None:
            filters = [filt] if isinstance(filt, str) else filt if isinstance(filt, list) else []
            if not {str(f).lower() for f in filters} & _model_filters(model):
                continue
        mine.append(e)
    groups: list[tuple[Any, dict | None]] = []
    for e in mine:
        enabled = e.get("mig-enabled") is True
        devs = e.get("mig-devices") if enabled else None
        if enabled and not isinstance(devs, dict):
            devs = {}
        if devs is not None and not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                        for k, v in devs.items()):
            return None, None, "mig-devices is not a map of profile to count"
        groups.append((e.get("devices"), {k: v for k, v in devs.items()} if devs is not None else None))
    if not groups or all(lay is None for _, lay in groups):
        return None, None, None
    if len(groups) == 1 and groups[0][0] == "all":
        return groups[0][1], None, None
    out = []
    for devs, lay in groups:
        if not (isinstance(devs, list) and devs and all(isinstance(i, int) and not isinstance(i, bool) for i in devs)):
            return None, None, "devices must be `all` or a list of GPU indexes"
        g: dict[str, Any] = {"devices": list(devs)}
        if lay is not None:
            g["layout"] = lay
        out.append(g)
    return None, out, None


def sharing_from(dp: dict | None, mig: tuple[dict | None, list | None], strategy: str | None) -> dict:
    layout, devices = mig
    if layout is not None or devices is not None:
        s: dict[str, Any] = {"mode": "mig", "strategy": strategy or "single"}
        if layout is not None:
            s["layout"] = layout
        else:
            s["devices"] = devices
        return s
    sharing = dp.get("sharing") if isinstance(dp, dict) else None
    if isinstance(sharing, dict):
        for key, mode in (("timeSlicing", "time-slicing"), ("mps", "mps")):
            ts = sharing.get(key)
            if isinstance(ts, dict) and isinstance(ts.get("resources"), list):
                for r in ts["resources"]:
                    if isinstance(r, dict) and r.get("name") == V.GPU and isinstance(r.get("replicas"), int):
                        # upstream defaults are false for both (k8s-device-plugin api/config/v1); gpuplan's
                        # are true, so both are always written
                        out = {"mode": mode, "replicas": r["replicas"],
                               "renameByDefault": ts.get("renameByDefault") is True}
                        if mode == "time-slicing":
                            out["failRequestsGreaterThanOne"] = ts.get("failRequestsGreaterThanOne") is True
                        return out
    return {"mode": "exclusive"}


def pool_resources(pool: dict) -> dict[str, int]:
    """Extended resource -> units one node advertises (0 when GPUs per node is unknown)."""
    from gpuplan.catalog import mig_resource_name

    if "_resources" in pool:  # a platform's own GPU stack (gpuplan.importer.platforms)
        return dict(pool["_resources"])
    n = pool.get("gpusPerNode") or pool.get("_gpus") or 0
    s = pool.get("sharing") or {"mode": "exclusive"}
    mode = s.get("mode")
    if mode in ("time-slicing", "mps"):
        return {V.GPU + V.SHARED_SUFFIX if s.get("renameByDefault", True) else V.GPU: n * s["replicas"]}
    if mode != "mig":
        return {V.GPU: n}
    out: dict[str, int] = {}
    strat = s.get("strategy", "mixed")
    groups = [{"devices": list(range(n)), "layout": s["layout"]}] if "layout" in s else s.get("devices") or []
    for g in groups:
        k = len(g["devices"])
        if g.get("layout") is None:
            out[V.GPU] = out.get(V.GPU, 0) + k
            continue
        for prof, cnt in g["layout"].items():
            try:
                res = mig_resource_name(prof, strat)
            except ValueError:
                res = None
            if res:
                out[res] = out.get(res, 0) + cnt * k
    return out


def _profile_of(pool: dict, resource: str) -> str | None:
    s = pool.get("sharing") or {}
    if "_resources" in pool and s.get("mode") == "mig" and resource in pool["_resources"]:
        return next(iter(s["layout"]))  # GKE's partitions are nvidia.com/gpu: the tier names the one size
    if s.get("mode") != "mig" or not resource.startswith("nvidia.com/mig-"):
        return None
    profiles = set((s.get("layout") or {}).keys())
    for g in s.get("devices") or ():
        profiles.update((g.get("layout") or {}).keys())
    for p in sorted(profiles):
        if "nvidia.com/mig-" + p.replace("+", ".") == resource:
            return p
    return None


# ------------------------------------------------------------------------------ pools


def _gpu_model(product: Any) -> Any:
    from gpuplan.catalog import resolve_gpu

    return resolve_gpu(product) if isinstance(product, str) else None


def _mig_per_gpu(n: Obj, model: Any, cfg: Configs) -> int | None:
    """MIG devices per GPU of the one profile the node's selected mig-parted config lays out."""
    entries = cfg.mig.get(n.labels.get(V.MIG_CONFIG_LABEL) or cfg.mig_default or "")
    lay = mig_layouts(entries, model)[0] if isinstance(entries, list) and model.mig_capable else None
    return next(iter(lay.values())) if isinstance(lay, dict) and len(lay) == 1 else None


def _node_gpus(n: Obj, model: Any, cfg: Configs) -> F.NodeGpus:
    return F.read_node(n.labels, model, _mig_per_gpu(n, model, cfg))


def gpu_faults(nodes: list[Obj], cfg: Configs, draft: Draft) -> tuple[set[str], set[str]]:
    """Nodes in a faulty state (GP940, at the label that says so): not capacity. Returns their
    names and the configs they select (still in use; a MIG layout they select is checked, GP953:
    an impossible one is why mig-manager failed)."""
    out, selected = set(), set()
    for n in nodes:
        model = _gpu_model(n.labels.get(V.GFD_PRODUCT))
        ng = F.read_node(n.labels, model)
        if ng.fault is None:
            continue
        label = F.MIG_STATE if n.labels.get(F.MIG_STATE) == "failed" else V.GFD_PRODUCT
        draft.diagnostics.append(_diag(C.W_GPU_FAULT, f"node {show(n.name)}: {ng.fault}; not counted as "
                                       "capacity, left out of the draft", n, "metadata", "labels", label))
        out.add(n.name)
        sel = [n.labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL), n.labels.get(V.MIG_CONFIG_LABEL)]
        selected |= {v for v in sel if isinstance(v, str)}
        entries = cfg.mig.get(sel[1]) if isinstance(sel[1], str) else None
        if model is not None and model.mig_capable and isinstance(entries, list):
            layout, devices, problem = mig_layouts(entries, model)
            if problem is None:
                _check_mig(f"node {n.name}", model, ng.gpus, layout, devices, sel[1], cfg, draft)
    return out, selected


def static_pools(nodes: list[Obj], karpenter: set[str], cfg: Configs, draft: Draft,
                 faulty: frozenset[str] | set[str] = frozenset()) -> list[dict]:
    groups: dict[str, list[Obj]] = {}
    derived: dict[str, str] = {}
    for n in nodes:
        lb = n.labels
        if lb.get(V.KARPENTER_NODEPOOL_LABEL) in karpenter:
            continue  # launched by an imported NodePool: that pool's node
        if n.name in faulty:
            continue  # its GP940 says why: not capacity
        if not is_dns_subdomain(n.name):
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"node name {show(n.name)} is not a DNS-1123 subdomain; "
                                           "node left out", n, "metadata", "name"))
            continue
        model = _gpu_model(lb.get(V.GFD_PRODUCT))
        if model is None:
            draft.diagnostics.append(_diag(
                C.W_UNKNOWN_GPU, f"node {show(n.name)}: GPU {show(lb.get(V.GFD_PRODUCT))} is not in gpuplan's "
                "catalog; node left out", n, "metadata", "labels", V.GFD_PRODUCT,
                hint="`gpuplan schema --markdown` lists the GPU models"))
            continue
        pool = lb.get(V.POOL_LABEL)
        if pool is not None and not is_dns_label(pool):
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"node {show(n.name)}: pool label {show(pool)} is not a "
                                           "DNS-1123 label; grouped by GPU instead", n, "metadata", "labels", V.POOL_LABEL))
            pool = None
        if pool is None:
            import json

            seen = _node_gpus(n, model, cfg)
            key = json.dumps([model.key, seen.gpus, _observed_sharing(seen), lb.get(V.DEVICE_PLUGIN_CONFIG_LABEL),
                              lb.get(V.MIG_CONFIG_LABEL),
                              sorted(map(str, _taints(n, _get(n.data, "spec", "taints"), None)))])
            if key not in derived:
                base = re.sub(r"[^a-z0-9]+", "-", model.key.lower()).strip("-")[:50]
                name, i = base, 1
                while name in groups or name in derived.values():
                    i += 1
                    name = f"{base}-{i}"
                derived[key] = name
            pool = derived[key]
        groups.setdefault(pool, []).append(n)
    pools = []
    for name in sorted(groups):
        members = sorted(groups[name], key=lambda o: o.name)
        pools.append(_static_pool(name, members, name in derived.values(), cfg, draft))
    return pools


def _observed_sharing(ng: F.NodeGpus) -> list:
    """What GFD's labels say the node's device plugin does: its MIG strategy and per-GPU layout, or
    its sharing and replicas. Nodes that differ in it run different device-plugin configs (a `mixed`
    node beside `single` ones), so they are not one pool."""
    return [ng.strategy, F.layout(ng) or sorted(ng.mig), ng.sharing, ng.replicas]


def _static_pool(name: str, members: list[Obj], derived: bool, cfg: Configs, draft: Draft) -> dict:
    first = members[0]
    notes: dict[str, Note] = {}

    def agree(what: str, values: list, sub: tuple) -> Any:
        val = _majority(values)
        odd = [m.name for m, v in zip(members, values) if v != val]
        if odd:
            draft.diagnostics.append(_diag(
                C.W_POOL_DISAGREES, f"pool {name}: {what} differs on {', '.join(show(o) for o in odd[:5])}"
                f"{' and more' if len(odd) > 5 else ''}; the draft takes {show(val)}", 
                members[[m.name for m in members].index(odd[0])], *sub))
        return val

    model = _gpu_model(agree("GPU model", [_gpu_model(m.labels.get(V.GFD_PRODUCT)).key for m in members],
                             ("metadata", "labels", V.GFD_PRODUCT)))
    seen = [_node_gpus(m, model, cfg) for m in members]
    count = agree("GPU count", [g.gpus for g in seen], ("metadata", "labels", V.GFD_COUNT))
    agree("the MIG strategy, layout or sharing GFD labels", [_observed_sharing(g) for g in seen],
          ("metadata", "labels", V.GFD_PRODUCT))
    observed = next((g for g in seen if g.gpus == count), seen[0])
    dp_sel = agree("device-plugin config", [m.labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL) for m in members],
                   ("metadata", "labels", V.DEVICE_PLUGIN_CONFIG_LABEL))
    mig_sel = agree("MIG config", [m.labels.get(V.MIG_CONFIG_LABEL) for m in members],
                    ("metadata", "labels", V.MIG_CONFIG_LABEL))
    taints = agree("taints", [_taints(m, _get(m.data, "spec", "taints"), name) for m in members], ("spec", "taints"))
    own = [_own_labels(m.labels) for m in members]
    common = {k: v for k, v in own[0].items() if all(o.get(k) == v for o in own)}
    pool: dict[str, Any] = {"name": name, "gpu": model.key}
    src = f"Node {first.name} label {V.GFD_PRODUCT}"
    notes["gpu"] = Note(f"from {src}={show(first.labels.get(V.GFD_PRODUCT))}")
    notes["name"] = Note(f"from Node label {V.POOL_LABEL}" if not derived else None,
                         "named by gpuplan import (the nodes have no gpuplan.dev/pool label); rename freely"
                         if derived else None)
    if count is not None:
        pool["gpusPerNode"] = count
        notes["gpusPerNode"] = Note(f"from Node {observed.source}" if observed.source.startswith("label") else
                                    f"from {observed.source} (Node label {V.GFD_COUNT} counts MIG devices)",
                                    observed.todo)
    else:
        pool["gpusPerNode"] = 1
        notes["gpusPerNode"] = Note(None, f"no {V.GFD_COUNT} label on the nodes: set the GPUs per node")
    pool["nodes"] = [m.name for m in members]
    notes["nodes"] = Note(f"Nodes with {'GPU ' + model.key if derived else V.POOL_LABEL + '=' + name}")
    pool["sharing"], notes["sharing"] = _pool_sharing(name, model, count, dp_sel, mig_sel, cfg, draft,
                                                      members[0], ("metadata", "labels"), observed)
    if taints:
        pool["taints"] = taints
        notes["taints"] = Note("from the Nodes' spec.taints (gpuplan's own binding taint left out)")
    if common:
        pool["labels"] = dict(sorted(common.items()))
        notes["labels"] = Note("labels every node of the pool has (Kubernetes, NFD, GFD and cloud labels left out)")
    dra = [m.labels.get(V.DEVICE_PLUGIN_DEPLOY_LABEL) == "false" for m in members]
    if any(dra) and not all(dra):
        draft.diagnostics.append(_diag(
            C.W_DRA_UNREAD, f"pool {name}: only some nodes have {V.DEVICE_PLUGIN_DEPLOY_LABEL}=false (DRA); the "
            "draft keeps the device plugin", members[dra.index(True)], "metadata", "labels", V.DEVICE_PLUGIN_DEPLOY_LABEL))
    pool["_dra"] = all(dra) and (f"the Nodes' label {V.DEVICE_PLUGIN_DEPLOY_LABEL}=false")
    pool["_notes"] = notes
    pool["_nodes"] = members
    pool["_selected"] = (dp_sel, mig_sel)
    return pool


def _pool_sharing(name: str, model: Any, count: int | None, dp_sel: Any, mig_sel: Any, cfg: Configs,
                  draft: Draft, o: Obj | None, label_path: tuple,
                  observed: F.NodeGpus | None = None) -> tuple[dict, Note]:
    """``observed``: what a node's GFD labels say (its MIG strategy, MIG devices, sharing), used
    where no config in the input says."""
    sources, todo = [], None
    dp_name = dp_sel if isinstance(dp_sel, str) else cfg.dp_default
    dp = None
    if dp_name is not None:
        dp = cfg.dp.get(dp_name)
        if dp is None and cfg.dp_cm is not None:
            draft.diagnostics.append(_diag(
                C.W_MISSING_CONFIG, f"pool {name}: device-plugin config {show(dp_name)} is not in ConfigMap "
                f"{show(cfg.dp_cm.namespace)}/{show(cfg.dp_cm.name)}", o, *label_path, V.DEVICE_PLUGIN_CONFIG_LABEL))
            todo = "the selected device-plugin config does not exist: check the pool's sharing"
        elif dp is None and isinstance(dp_sel, str):
            draft.diagnostics.append(_diag(
                C.W_MISSING_CONFIG, f"pool {name}: nodes select device-plugin config {show(dp_sel)} but no "
                f"device-plugin ConfigMap in the operator's namespace ({cfg.namespace}) was in the input", o,
                *label_path, V.DEVICE_PLUGIN_CONFIG_LABEL,
                hint=f"kubectl get configmaps -n {cfg.namespace} -o json (and `kubectl get clusterpolicies -o json`, "
                     "which names the operator's namespace)"))
            todo = "the selected device-plugin config is missing: check the pool's sharing"
        elif dp is not None:
            sources.append(f"device-plugin config {dp_name} (ConfigMap {cfg.dp_cm.name})")
    mig = (None, None)
    mig_name = mig_sel if isinstance(mig_sel, str) else cfg.mig_default
    if mig_name is not None and model.mig_capable:
        entries = cfg.mig.get(mig_name)
        if entries is None:
            if cfg.mig_cm is not None or isinstance(mig_sel, str):
                draft.diagnostics.append(_diag(
                    C.W_MISSING_CONFIG, f"pool {name}: mig-parted config {show(mig_name)} is not in the "
                    "mig-parted ConfigMap" if cfg.mig_cm is not None else
                    f"pool {name}: nodes select mig-parted config {show(mig_name)} but no mig-parted ConfigMap "
                    "was in the input", o, *label_path, V.MIG_CONFIG_LABEL))
                todo = "the selected MIG config is missing: check the pool's sharing"
        else:
            layout, devices, problem = mig_layouts(entries, model)
            if problem:
                draft.diagnostics.append(_diag(C.W_UNREAD, f"mig-parted config {show(mig_name)}: {problem}; "
                                               "left out", cfg.mig_cm, "data", cfg.mig_key or ""))
            else:
                mig = (layout, devices)
                if layout is not None or devices is not None:
                    sources.append(f"mig-parted config {mig_name} (ConfigMap {cfg.mig_cm.name})")
                    _check_mig(f"pool {name}", model, count, layout, devices, mig_name, cfg, draft)
    strategy = None
    if isinstance(dp, dict) and isinstance(_get(dp, "flags", "migStrategy"), str):
        strategy = dp["flags"]["migStrategy"]
    strategy_src = None
    if strategy not in ("single", "mixed") and observed is not None and observed.strategy is not None:
        strategy = observed.strategy  # what GFD runs with (nvidia.com/mig.strategy), over the ClusterPolicy
        strategy_src = f"Node label {F.STRATEGY}={strategy}"
    strategy = strategy if strategy in ("single", "mixed") else cfg.strategy if cfg.strategy in ("single", "mixed") else None
    if mig == (None, None) and mig_name is None and observed is not None and model.mig_capable:
        lay = F.layout(observed)
        if lay is not None:
            mig = (lay, None)
            sources.append("the Node's GFD MIG labels (no mig-parted config selected)")
    sharing = sharing_from(dp, mig, strategy)
    if sharing["mode"] == "mig" and strategy_src is not None:
        sources.append(strategy_src)
    if sharing["mode"] == "exclusive" and dp is None and observed is not None and observed.sharing is not None:
        sharing = {"mode": observed.sharing, "replicas": observed.replicas, "renameByDefault": observed.renamed}
        if observed.sharing == "time-slicing":
            sharing["failRequestsGreaterThanOne"] = False
        sources.append(f"Node labels {F.SHARING_STRATEGY} and {F.REPLICAS} (no device-plugin config in the input)")
        todo = "no device-plugin config in the input: failRequestsGreaterThanOne is not on the node, check it"
    if sharing["mode"] == "mig" and strategy is None:
        todo = "no MIG strategy in the device-plugin config or ClusterPolicy: the operator's default, single, is assumed"
    if sharing["mode"] == "mig" and isinstance(_get(dp, "sharing"), dict):
        todo = "the device-plugin config also shares MIG devices; gpuplan does not: left out"
    if not sources:
        sources.append("no sharing config selected: whole GPUs")
    return sharing, Note("from " + " and ".join(sources), todo)


def _check_mig(name: str, model: Any, count: int | None, layout: dict | None, devices: list | None, mig_name: str,
               cfg: Configs, draft: Draft) -> None:
    from gpuplan.mig import check_layout

    for lay in ([layout] if layout is not None else [g.get("layout") for g in devices or ()]):
        if not lay:
            continue
        try:
            res = check_layout(model, lay)
        except (KeyError, ValueError) as exc:
            draft.diagnostics.append(_diag(C.E_MIG_IMPOSSIBLE, f"mig-parted config {show(mig_name)} on "
                                           f"{model.key}: {show(str(exc))}", cfg.mig_cm, "data", cfg.mig_key or ""))
            continue
        if not res.ok:
            why = res.failure.message if res.failure is not None else "not creatable"
            draft.diagnostics.append(_diag(
                C.E_MIG_IMPOSSIBLE, f"mig-parted config {show(mig_name)} ({name}) cannot be created on "
                f"{model.key}: {show(why)}", cfg.mig_cm, "data", cfg.mig_key or "",
                hint="`gpuplan mig layouts " + model.key + "` lists the creatable layouts"))


def _req(reqs: Any, key: str) -> list[str] | None:
    for r in reqs if isinstance(reqs, list) else ():
        if isinstance(r, dict) and r.get("key") == key and r.get("operator") == "In" and isinstance(r.get("values"), list):
            return [v for v in r["values"] if isinstance(v, str)]
    return None


def overlaid_nodepools(objs: list[Obj]) -> dict[str, SR.PoolOverlays]:
    """NodePool name -> what the NodeOverlays give its instance types (whatever requirements select
    them: gpuplan writes ``karpenter.sh/nodepool In [...]``, others any label; gpuplan.importer.sharing_read)."""
    return SR.read_overlays(objs)


def _nap_nodeclass(np_: Obj, k: dict, kn: dict, nc: Obj | None, draft: Draft) -> None:
    """A NAP pool's fields from its AKSNodeClass (gpuplan.importer.nap_read): ``imageFamily``, and
    the GPU Operator path where ``gpu.mode`` is ``None``; each field gpuplan writes otherwise (another
    OS disk size) or not at all is a TODO (GP958) at its line, and a difference of the round trip."""
    if nc is None:
        _add_todo(kn["instanceTypes"], "no AKSNodeClass in the input: check imageFamily")
        return
    got = NR.read_node_class(nc)
    for key, val in got.fields.items():
        k[key] = val
        kn[key] = Note(got.sources[key])
    for what, at in got.todos:
        _add_todo(kn["instanceTypes"], what)
        draft.diagnostics.append(_diag(C.I_TODO, f"NodePool {np_.name}: {what}", nc, *at))


def karpenter_pools(nodepools: list[Obj], classes: dict[tuple[str, str], Obj], cfg: Configs, draft: Draft,
                    overlays: dict[str, SR.PoolOverlays] | None = None,
                    launched: dict[str, dict[str, int]] | None = None) -> list[dict]:
    """``launched``: NodePool name -> GPU model -> nodes of the input it launched."""
    from gpuplan.identity import GUARANTEED_TAINT_KEY, POOL_LABEL, guaranteed_nodepool_name

    # a pool's on-demand floor: gpuplan's second NodePool of the pool (karpenter.guaranteedGPUs)
    names = {o.name for o in nodepools}
    floors = {o.labels.get(POOL_LABEL): o for o in nodepools
              if o.labels.get(POOL_LABEL) in names and o.name == guaranteed_nodepool_name(o.labels.get(POOL_LABEL, ""))
              and any(isinstance(t, dict) and t.get("key") == GUARANTEED_TAINT_KEY
                      for t in _get(o.data, "spec", "template", "spec", "taints") or ())}
    pools = []
    for np_ in sorted(nodepools, key=lambda o: o.name):
        if np_ in floors.values():
            continue  # read with its pool
        if not is_dns_label(np_.name):
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"NodePool {show(np_.name)} is not a DNS-1123 label; "
                                           "left out", np_, "metadata", "name"))
            continue
        spec = np_.data.get("spec") if isinstance(np_.data.get("spec"), dict) else {}
        tspec = _get(spec, "template", "spec") or {}
        reqs = tspec.get("requirements")
        # Karpenter on Azure (AKS Node Auto Provisioning): its AKSNodeClass, its VM sizes
        cloud = "azure" if NR.is_nap(np_) else "aws"
        choice = KR.read_instance_types(reqs, (launched or {}).get(np_.name, {}), cloud)
        its = choice.types
        counts = {kind[1] for n in its if (kind := KR.instance_kind(n, cloud)) is not None}
        if choice.model is None and not KR.gpu_intent(spec):
            draft.diagnostics.append(_diag(
                C.I_NOT_GPU, f"NodePool {np_.name} launches no GPU instance type: not a GPU pool, left as it is",
                np_, "spec", "template", "spec", "requirements"))
            continue
        if choice.model is None:
            listed = KR.lists_instance_types(reqs)
            draft.diagnostics.append(_diag(
                C.W_UNKNOWN_GPU, f"NodePool {np_.name}: its requirements select no instance type with a GPU gpuplan "
                f"knows ({'instance types ' + show(listed) if listed is not None else 'evaluated over gpuplan ' + ('AKS' if cloud == 'azure' else 'AWS') + ' table'});"
                " left out", np_, "spec", "template", "spec", "requirements"))
            continue
        model = _gpu_model(choice.model)
        notes: dict[str, Note] = {}
        pool: dict[str, Any] = {"name": np_.name, "gpu": model.key}
        notes["name"] = Note(f"from NodePool {np_.name}")
        notes["gpu"] = Note(f"from NodePool {np_.name} instance types")
        k: dict[str, Any] = {"instanceTypes": its}
        kn: dict[str, Note] = {"instanceTypes": Note(
            f"{'the instance types the requirements select, ' if choice.selector else ''}from "
            f"{np_.where('spec', 'template', 'spec', 'requirements')}", "; ".join(choice.todos) or None)}
        for todo in choice.todos:
            draft.diagnostics.append(_diag(C.I_TODO, f"NodePool {np_.name}: {todo}", np_, "spec", "template", "spec",
                                           "requirements"))
        caps = _req(reqs, V.KARPENTER_CAPACITY_TYPE)
        if caps:
            k["capacityTypes"] = [c for c in caps if c in ("spot", "on-demand", "reserved")]
        per = min(counts) if counts else 1
        limit = _get(spec, "limits", "nodes")
        gpus_limit = _get(spec, "limits", V.GPU)
        if isinstance(limit, (str, int)) and _INT.match(str(limit)):
            k["maxGPUs"] = int(limit) * per
            kn["maxGPUs"] = Note(f"from NodePool {np_.name} spec.limits.nodes x {per} GPUs per instance")
        elif isinstance(gpus_limit, (str, int)) and _INT.match(str(gpus_limit)):
            k["maxGPUs"] = int(gpus_limit)
            kn["maxGPUs"] = Note(f"from NodePool {np_.name} spec.limits[nvidia.com/gpu]")
        else:
            k["maxGPUs"] = per
            kn["maxGPUs"] = Note(None, "the NodePool has no node or GPU limit: set the most GPUs the pool may have")
        floor = floors.get(np_.name)
        floor_limit = _get(floor.data, "spec", "limits", "nodes") if floor is not None else None
        if isinstance(floor_limit, (str, int)) and _INT.match(str(floor_limit)):
            k["maxGPUs"] += int(floor_limit) * per
            k["guaranteedGPUs"] = int(floor_limit) * per
            kn["maxGPUs"] = Note(f"from NodePools {np_.name} and {floor.name} spec.limits.nodes x {per} GPUs per "
                                 "instance")
            kn["guaranteedGPUs"] = Note(f"from NodePool {floor.name} (the pool's on-demand floor) spec.limits.nodes")
        nc = classes.get((cloud, _get(tspec, "nodeClassRef", "name") or ""))
        if cloud == "azure":
            _nap_nodeclass(np_, k, kn, nc, draft)
        elif nc is not None:
            family, version = SR.ami_family(nc)
            if version is not None:
                k["amiFamily"], k["amiVersion"] = family, version
                kn["amiFamily"] = kn["amiVersion"] = Note(f"from EC2NodeClass {nc.name} amiSelectorTerms alias")
            elif family is not None:
                k["amiFamily"] = family
                kn["amiFamily"] = Note(f"from EC2NodeClass {nc.name} spec.amiFamily")
                _add_todo(kn["amiFamily"], "the EC2NodeClass selects AMIs without an alias: set amiVersion")
            else:
                _add_todo(kn["instanceTypes"], "the EC2NodeClass selects AMIs without an alias: set amiFamily/amiVersion")
        else:
            _add_todo(kn["instanceTypes"], "no EC2NodeClass in the input: check amiFamily and amiVersion")
        zones = _req(reqs, V.ZONE_LABEL)
        if zones:
            k["zones"] = zones
        if isinstance(tspec.get("expireAfter"), str) and tspec["expireAfter"] != V.DEFAULT_EXPIRE_AFTER:
            k["expireAfter"] = tspec["expireAfter"]
        if isinstance(tspec.get("terminationGracePeriod"), str):
            k["terminationGracePeriod"] = tspec["terminationGracePeriod"]
            kn["terminationGracePeriod"] = Note("from the NodePool template's terminationGracePeriod")
        dis = KR.read_disruption(spec)
        if dis.consolidate_after is not None:
            k["consolidateAfter"] = dis.consolidate_after
            kn["consolidateAfter"] = Note("from the NodePool's spec.disruption")
        if dis.todo is not None:
            kn["consolidateAfter"] = Note(None, dis.todo)
            draft.diagnostics.append(_diag(C.I_TODO, f"NodePool {np_.name}: {dis.todo}", np_, "spec", "disruption"))
        kub = KR.read_kubelet(np_, nc)
        if kub.topology:
            pool["topology"] = kub.topology
            notes["topology"] = Note(kub.source)
        for what, o, at in kub.todos:
            n = notes.setdefault("topology", Note())
            n.todo = what if n.todo is None else f"{n.todo}; {what}"
            draft.diagnostics.append(_diag(C.I_TODO, f"pool {np_.name}: {what}; set it on the nodes another way or "
                                           "drop it", o, *at))
        if isinstance(spec.get("weight"), int) and not isinstance(spec.get("weight"), bool):
            k["weight"] = spec["weight"]
            kn["weight"] = Note("from the NodePool's spec.weight")
        ov = (overlays or {}).get(np_.name)
        if ov is not None and ov.applied:
            k["nodeOverlay"] = True  # a MIG pool without one never gets a node (GP615)
            kn["nodeOverlay"] = Note(f"from NodeOverlay {', '.join(ov.names)}")
        pool["karpenter"] = k
        labels = {kk: v for kk, v in (_get(spec, "template", "metadata", "labels") or {}).items()
                  if isinstance(kk, str) and isinstance(v, str)}
        pool["sharing"], notes["sharing"] = _pool_sharing(
            np_.name, model, per, labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL), labels.get(V.MIG_CONFIG_LABEL), cfg, draft,
            np_, ("spec", "template", "metadata", "labels"))
        _outside_sharing(pool, notes, k, kn, np_, nc, ov, (labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL) or cfg.dp_default)
                         in cfg.dp, per, draft)
        s = pool["sharing"]
        if (s.get("mode") == "mig" and s.get("strategy") != "single" or s.get("mode") in ("time-slicing", "mps")
                and s.get("renameByDefault")) and "nodeOverlay" not in k:
            # without one Karpenter never launches for nvidia.com/mig-* or nvidia.com/gpu.shared (GP615, an
            # error): the cluster either has an overlay the input left out, or its pool never got a node
            k["nodeOverlay"] = True
            kn["nodeOverlay"] = Note(None, f"no NodeOverlay for this {s['mode']} NodePool in the input (kubectl get "
                                           "nodeoverlays.karpenter.sh): gpuplan writes one; Karpenter needs "
                                           "its nodeOverlay feature gate")
        taints = _taints(np_, tspec.get("taints"), np_.name)
        if taints != [V.DEFAULT_KARPENTER_TAINT]:
            pool["taints"] = taints
            notes["taints"] = Note("from the NodePool template's taints (gpuplan's binding taint left out)")
        own = _own_labels(labels)
        if own:
            pool["labels"] = dict(sorted(own.items()))
            notes["labels"] = Note("from the NodePool template's labels")
        pool["_notes"] = notes
        pool["_knotes"] = kn
        pool["_gpus"] = per
        pool["_nodepool"] = np_
        pool["_disruption"] = (dis, np_)
        if floor is not None:
            pool["_floor"] = floor
        pool["_nodeclass"] = nc
        pool["_cloud"] = cloud
        pool["_dra"] = labels.get(V.DEVICE_PLUGIN_DEPLOY_LABEL) == "false" and (
            f"NodePool {np_.name} template label {V.DEVICE_PLUGIN_DEPLOY_LABEL}=false")
        pool["_selected"] = (labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL), labels.get(V.MIG_CONFIG_LABEL))
        pools.append(pool)
    return pools


def _outside_sharing(pool: dict, notes: dict, k: dict, kn: dict, np_: Obj, nc: Obj | None, ov: Any,
                     configured: bool, per: int, draft: Draft) -> None:
    """Sharing from Bottlerocket's settings and NodeOverlays, and a GPU limit in nodes of it."""
    its = k["instanceTypes"]
    got = SR.pool_sharing(np_.name, pool["sharing"], configured, np_, nc, its, ov, draft.diagnostics)
    if got.sources:
        pool["sharing"] = got.sharing
        notes["sharing"] = Note("from " + " and ".join(got.sources), "; ".join(got.todos) or None)
    for what, o in (ov.todos if ov is not None else ()):
        draft.diagnostics.append(_diag(C.I_TODO, f"NodePool {np_.name}: {what}", o, "spec", "requirements"))
    limits = _get(np_.data, "spec", "limits")
    if isinstance(limits, dict) and "nodes" not in limits and "guaranteedGPUs" not in k:
        read = SR.limit_nodes(limits, pool["sharing"], per, got.counted)
        if read is not None:
            k["maxGPUs"] = max(read[0], 1) * per
            kn["maxGPUs"] = Note(f"from NodePool {np_.name} {read[1]}", read[2] if read[0] else
                                 f"{read[2] + '; ' if read[2] else ''}the limit holds no whole node")
    if ov is not None:  # compared by the round trip
        pool["_overlays"] = ov.applied + [o for o in ov.price_only if o not in ov.applied]


# ------------------------------------------------------------------------------ tiers


def _quota_hard(q: Obj, draft: Draft) -> dict[str, int]:
    """GPU resource -> units of a ResourceQuota's spec.hard (``requests.`` keys)."""
    out = {}
    hard = _get(q.data, "spec", "hard")
    for key, v in (hard.items() if isinstance(hard, dict) else ()):
        if not isinstance(key, str):
            continue
        res = key[len("requests."):] if key.startswith("requests.") else key
        if not (res == V.GPU or res.startswith((V.GPU + ".", "nvidia.com/mig-"))):
            continue
        text = str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else ""
        if not _INT.match(text) or len(text) > 9:
            draft.diagnostics.append(_diag(C.W_UNREAD, f"ResourceQuota {show(q.namespace)}/{show(q.name)}: "
                                           f"{show(key)}={show(v)} is not a whole number; left out",
                                           q, "spec", "hard", key))
            continue
        out[res] = out.get(res, 0) + int(text)
    return out


def _scope(q: Obj) -> tuple[str, list[str]] | None:
    """("In"|"NotIn", PriorityClass names) of a quota scoped by PriorityClass; None unscoped;
    ("other", []) for any other scope."""
    spec = q.data.get("spec") if isinstance(q.data.get("spec"), dict) else {}
    if spec.get("scopes"):
        return ("other", [])
    exprs = _get(spec, "scopeSelector", "matchExpressions")
    if not exprs:
        return None
    if isinstance(exprs, list) and len(exprs) == 1 and isinstance(exprs[0], dict) \
            and exprs[0].get("scopeName") == "PriorityClass" and exprs[0].get("operator") in ("In", "NotIn") \
            and isinstance(exprs[0].get("values"), list):
        return (exprs[0]["operator"], [v for v in exprs[0]["values"] if isinstance(v, str)])
    return ("other", [])


def _synthetic_tier_name(pool: str, profile: str | None) -> str:
    base = pool if profile is None else f"{pool}-{re.sub(r'[^a-z0-9]+', '-', profile.lower()).strip('-')}"
    return base[:63].rstrip("-")


def tenant_name(ns: str, o: Obj | None) -> str:
    """A namespace's tenant: its gpuplan.dev/tenant label, else the namespace."""
    label = o.labels.get(V.TENANT_LABEL) if o else None
    return label if label and is_dns_label(label) else ns


def dra_classes(objs: list[Obj]) -> dict[str, str]:
    """DeviceClass name -> the tier it serves (its gpuplan.dev/tier label, else gpuplan-<tier>)."""
    out = {}
    for o in objs:
        if o.kind == "DeviceClass" and o.api_group == "resource.k8s.io":
            tier = o.labels.get(V.TIER_LABEL) or (o.name[len(V.PRIORITY_CLASS_PREFIX):]
                                                  if o.name.startswith(V.PRIORITY_CLASS_PREFIX) else None)
            if is_dns_label(tier):
                out[o.name] = tier
    return out


def tiers_and_tenants(objs: list[Obj], pools: list[dict], draft: Draft, kq: Any = None) -> tuple[list[dict], list[dict]]:
    pcs = {o.name: o for o in objs if o.kind == "PriorityClass" and o.api_group == "scheduling.k8s.io"}
    nss = {o.name: o for o in objs if o.kind == "Namespace" and not o.api_group}
    classes = dra_classes(objs)
    quotas: dict[str, list[tuple[Obj, dict[str, int], Any]]] = {}
    for q in sorted((o for o in objs if o.kind == "ResourceQuota" and not o.api_group),
                    key=lambda o: (o.namespace, o.name)):
        hard = _quota_hard(q, draft)
        if hard:
            quotas.setdefault(q.namespace, []).append((q, hard, _scope(q)))
    res_pools: dict[str, list[str]] = {}
    for p in pools:
        for r in pool_resources(p):
            res_pools.setdefault(r, []).append(p["name"])

    tiers: dict[str, dict] = {}  # name -> tier (with _ keys: _pc, _res, _notes)
    by_pc: dict[str, str] = {}
    wanted = {n for n, o in pcs.items() if o.labels.get(V.TIER_LABEL)}
    for ns_q in quotas.values():
        for _, _, sc in ns_q:
            if sc and sc[0] == "In" and len(sc[1]) == 1:
                wanted.add(sc[1][0])
    # the input's order (gpuplan writes its PriorityClasses in tier order), then quota-named ones
    order = [n for n in pcs if n in wanted] + sorted(wanted - set(pcs))
    for pc_name in order:
        pc = pcs.get(pc_name)
        label = pc.labels.get(V.TIER_LABEL) if pc is not None else None
        name = label or (pc_name[len(V.PRIORITY_CLASS_PREFIX):] if pc_name.startswith(V.PRIORITY_CLASS_PREFIX)
                         and is_dns_label(pc_name[len(V.PRIORITY_CLASS_PREFIX):]) else pc_name)
        if not is_dns_label(name) or name in tiers:
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"PriorityClass {show(pc_name)} cannot name a tier "
                                           f"({show(name)} is not a DNS-1123 label or is taken); left out",
                                           pc, "metadata", "name"))
            continue
        t: dict[str, Any] = {"name": name}
        notes = {"name": Note(f"from PriorityClass {pc_name}" + (f" label {V.TIER_LABEL}" if label else ""))}
        if V.PRIORITY_CLASS_PREFIX + name != pc_name:
            t["priorityClassName"] = pc_name
        if pc is None:
            notes["name"].todo = f"PriorityClass {pc_name} is named by a quota but not in the input: set its priority"
        else:
            v = pc.data.get("value")
            if isinstance(v, int) and not isinstance(v, bool):
                t["priority"] = v
                notes["priority"] = Note(f"from PriorityClass {pc_name} value")
            pre = pc.data.get("preemptionPolicy")
            if pre == "Never":
                t["preemption"] = "Never"
                notes["preemption"] = Note(f"from PriorityClass {pc_name} preemptionPolicy")
            desc = pc.data.get("description")
            m = V.DEFAULT_TIER_DESCRIPTION.match(desc) if isinstance(desc, str) else None
            if m and m["tier"] == name:
                t["_res"], t["_pool_hint"] = m["resource"], m["pool"]
            elif isinstance(desc, str) and desc:
                t["description"] = desc
        t["_pc"], t["_notes"] = pc, notes
        tiers[name] = t
        by_pc[pc_name] = name

    # a tier's resource from the quotas scoped to its PriorityClass
    for ns, qs in quotas.items():
        for q, hard, sc in qs:
            if sc and sc[0] == "In" and len(sc[1]) == 1 and sc[1][0] in by_pc:
                t = tiers[by_pc[sc[1][0]]]
                t["enforcePriority"] = True
                t["_notes"]["enforcePriority"] = Note(f"ResourceQuota {ns}/{q.name} is scoped to its PriorityClass")
                pos = [r for r, n in hard.items() if n > 0] or list(hard)
                if "_res" not in t and len(pos) == 1:
                    t["_res"] = pos[0]

    def ns_tiers(ns: str) -> list[str]:
        o = nss.get(ns)
        return sorted(k[len(V.TIER_NS_LABEL_PREFIX):] for k, v in (o.labels if o else {}).items()
                      if k.startswith(V.TIER_NS_LABEL_PREFIX) and v == "true" and k[len(V.TIER_NS_LABEL_PREFIX):] in tiers)

    # the rest by elimination: in a namespace, one tier left and one resource left
    changed = True
    while changed:
        changed = False
        for ns, qs in quotas.items():
            names = ns_tiers(ns)
            open_ = [n for n in names if "_res" not in tiers[n]]
            if len(open_) != 1:
                continue
            known = {tiers[n]["_res"] for n in names if "_res" in tiers[n]}
            left = sorted({r for _, hard, sc in qs if sc is None for r, n in hard.items() if n > 0} - known)
            if len(left) == 1:
                tiers[open_[0]]["_res"] = left[0]
                changed = True

    # pools of the tiers
    pool_by_name = {p["name"]: p for p in pools}
    for name in list(tiers):
        t = tiers[name]
        res = t.get("_res")
        cands = res_pools.get(res, []) if res else []
        hint = t.pop("_pool_hint", None)
        if hint in cands:
            t["pool"] = hint
            t["_notes"]["pool"] = Note(f"from PriorityClass {t['_pc'].name} description (gpuplan's own)")
        elif cands:
            t["pool"] = cands[0]
            t["_notes"]["pool"] = Note(f"the pool that advertises {res}",
                                       f"{res} is advertised by pools {', '.join(cands)}: choose the tier's pool"
                                       if len(cands) > 1 else None)
            if len(cands) > 1:
                draft.diagnostics.append(_diag(C.I_TODO, f"tier {name}: {show(res)} is advertised by pools "
                                               f"{', '.join(cands)}; the draft names {cands[0]}", t["_pc"]))
        else:
            draft.diagnostics.append(_diag(
                C.I_TODO, f"PriorityClass {show(t['_pc'].name if t['_pc'] else name)}: no quota or pool tells which "
                "GPUs it is for; not imported as a tier", t["_pc"]))
            draft.header.append(f"TODO: PriorityClass {show(name)} was not imported as a tier (no GPU resource "
                                "or pool found for it)")
            del tiers[name]
            by_pc = {k: v for k, v in by_pc.items() if v != name}
            continue
        prof = _profile_of(pool_by_name[t["pool"]], res)
        if prof:
            t["profile"] = prof

    queued: set[str] = set()
    if kq is not None:
        from gpuplan.importer.kueue import assign

        # a queued pool and resource no tier hands out (Kueue's own setups have no gpuplan tiers):
        # a tier of its own, as for a quota without a PriorityClass scope, so its quota is not lost
        for pool, res in kq.pairs:
            if pool in pool_by_name and not any(t.get("pool") == pool and t.get("_res") == res for t in tiers.values()):
                tn = _synthetic_tier_name(pool, _profile_of(pool_by_name[pool], res))
                if tn in tiers:
                    continue
                tiers[tn] = {"name": tn, "pool": pool, "_res": res, "_pc": None, "_notes": {"name": Note(
                    f"the ClusterQueues' quota of {res} on pool {pool}",
                    f"named by gpuplan import; gpuplan creates PriorityClass gpuplan-{tn} with priority 0: set the "
                    "tier's priority")}}
                if (prof := _profile_of(pool_by_name[pool], res)):
                    tiers[tn]["profile"] = prof

        assign(kq, tiers, ns_tiers, draft)
        if kq.engine == "volcano":
            from gpuplan.importer.volcano_read import ceilings

            ceilings(kq)  # the leaves' capabilities, as the build writes them into the quotas
        queued = set(kq.queued_tiers)

    # tenants and their grants
    grants: dict[str, dict[str, int]] = {}
    for ns in sorted(set(quotas) | (set(kq.grants) if kq is not None else set())):
        # queued tiers: the ClusterQueue's grant; the quotas hold Kueue's ceilings, taken out here
        g: dict[str, int] = dict(kq.grants.get(ns, {})) if kq is not None else {}
        queue = kq.tenant_of(ns) if kq is not None else None
        ceiling: dict[str, int] = {}
        for (_, res), units in (kq.ceilings.get(queue.tenant, {}) if queue is not None else {}).items():
            ceiling[res] = ceiling.get(res, 0) + units
        for q, hard, sc in quotas.get(ns, ()):
            if sc and sc[0] == "In" and len(sc[1]) == 1 and sc[1][0] in by_pc:
                tn = by_pc[sc[1][0]]
                if tn not in queued:
                    g[tn] = g.get(tn, 0) + hard.get(tiers[tn]["_res"], 0)
            elif sc is None:
                # DRA: <class>.deviceclass.resource.k8s.io/devices is the tier's grant
                for key, v in sorted((_get(q.data, "spec", "hard") or {}).items()):
                    m = V.DRA_QUOTA_KEY.match(key) if isinstance(key, str) else None
                    if m is None or m["cls"] in V.DRA_CHART_CLASSES:
                        continue
                    tn = classes.get(m["cls"])
                    units = int(str(v)) if _INT.match(str(v)) and len(str(v)) <= 9 else None
                    if tn not in tiers or units is None:
                        draft.diagnostics.append(_diag(C.W_DRA_UNREAD, f"ResourceQuota {show(ns)}/{show(q.name)}: "
                                                       f"{show(key)} names no imported tier's DeviceClass; left out",
                                                       q, "spec", "hard", key))
                        continue
                    if units:
                        g[tn] = g.get(tn, 0) + units
        for q, hard, sc in quotas.get(ns, ()):
            if sc is None and ceiling:
                hard = dict(hard)
                for res in list(hard):
                    take = min(hard[res], ceiling.get(res, 0))
                    hard[res] -= take
                    ceiling[res] = ceiling.get(res, 0) - take
            if sc is not None:
                if sc[0] == "other" or (sc[0] == "In" and not all(v in by_pc for v in sc[1])):
                    draft.diagnostics.append(_diag(C.I_TODO, f"ResourceQuota {show(ns)}/{show(q.name)} has a scope "
                                                   "gpuplan does not write; not imported", q, "spec"))
                continue  # NotIn: gpuplan's other-priorities quota, rebuilt from enforcePriority
            labelled = ns_tiers(ns)
            for res, units in sorted(hard.items()):
                rest = units - sum(n for tn, n in g.items() if tiers[tn].get("_res") == res)
                if rest <= 0:
                    continue
                cands = [tn for tn in labelled if tiers[tn].get("_res") == res and tn not in g
                         and tn not in queued] or \
                        [tn for tn in sorted(tiers) if tiers[tn].get("_res") == res and not tiers[tn].get("enforcePriority")
                         and not tiers[tn].get("_pc") and tn not in queued]
                if not cands:
                    pools_ = res_pools.get(res, [])
                    if not pools_:
                        draft.diagnostics.append(_diag(C.I_TODO, f"ResourceQuota {show(ns)}/{show(q.name)}: no pool "
                                                       f"advertises {show(res)}; not imported", q, "spec", "hard"))
                        continue
                    tn = _synthetic_tier_name(pools_[0], _profile_of(pool_by_name[pools_[0]], res))
                    if tn not in tiers:
                        t = {"name": tn, "pool": pools_[0], "_res": res, "_pc": None,
                             "_notes": {"name": Note(f"the quota of {res} without a PriorityClass scope",
                                                     "named by gpuplan import; gpuplan creates PriorityClass "
                                                     f"gpuplan-{tn} with priority 0: set the tier's priority")}}
                        prof = _profile_of(pool_by_name[pools_[0]], res)
                        if prof:
                            t["profile"] = prof
                        if len(pools_) > 1:
                            t["_notes"]["pool"] = Note(None, f"{res} is advertised by pools {', '.join(pools_)}")
                        tiers[tn] = t
                    cands = [tn]
                if len(cands) > 1:
                    draft.diagnostics.append(_diag(C.I_TODO, f"ResourceQuota {show(ns)}/{show(q.name)}: {rest} "
                                                   f"{show(res)} are shared by tiers {', '.join(cands)}; the draft "
                                                   f"grants them to {cands[0]}", q, "spec", "hard"))
                g[cands[0]] = g.get(cands[0], 0) + rest
        if g:
            grants[ns] = g

    tenants: dict[str, dict] = {}
    for ns in sorted(set(grants) | {n for n, o in nss.items() if o.labels.get(V.TENANT_LABEL)}):
        if not is_dns_label(ns):
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"namespace {show(ns)} is not a DNS-1123 label; left out",
                                           nss.get(ns)))
            continue
        o = nss.get(ns)
        label = o.labels.get(V.TENANT_LABEL) if o else None
        tname = tenant_name(ns, o)
        t = tenants.setdefault(tname, {"name": tname, "namespaces": [], "quotas": {}, "_ns": [],
                                       "_notes": {"name": Note(f"from Namespace label {V.TENANT_LABEL}") if label else
                                                  Note(None, "one tenant per namespace: group the namespaces of "
                                                       "one team into one tenant")}})
        t["namespaces"].append(ns)
        t["_ns"].append(o)
        if ns in grants:
            order = list(tiers)
            t["quotas"][ns] = {tn: grants[ns][tn] for tn in sorted(grants[ns], key=order.index)}
    for t in tenants.values():
        own = [{k: v for k, v in (o.labels if o else {}).items() if k not in V.SYSTEM_NAMESPACE_LABELS
                and not k.startswith(V.TIER_NS_LABEL_PREFIX) and is_label(k, v)} for o in t["_ns"]]
        common = {k: v for k, v in own[0].items() if all(x.get(k) == v for x in own)}
        if common:
            t["labels"] = dict(sorted(common.items()))
        if not t["quotas"]:
            del t["quotas"]
        if kq is not None:
            from gpuplan.importer.kueue import tenant_queueing

            tq, src = tenant_queueing(kq, t["name"])
            if tq is not None:
                t["queueing"] = tq
                t["_notes"]["queueing"] = Note(src)
    used = {tn for t in tenants.values() for q in t.get("quotas", {}).values() for tn in q}
    for name, t in tiers.items():
        if name not in used and t.get("_pc") is None:
            continue
    return list(tiers.values()), [tenants[k] for k in sorted(tenants)]


# --------------------------------------------------------------------------- findings


def check_capacity(pools: list[dict], tenants: list[dict], tiers: list[dict], objs: list[Obj], draft: Draft) -> None:
    cap: dict[str, int] = {}
    for p in pools:
        group = next(p[k] for k in ("karpenter", "gke", "aks", "capi") if k in p) if "nodes" not in p else None
        nodes = len(p["nodes"]) if group is None else group["maxGPUs"] // max(1, p.get("gpusPerNode") or p.get("_gpus") or 1)
        for r, n in pool_resources(p).items():
            cap[r] = cap.get(r, 0) + n * nodes
    res_of = {t["name"]: t.get("_res") for t in tiers}
    used: dict[str, int] = {}
    for t in tenants:
        for q in t.get("quotas", {}).values():
            for tn, n in q.items():
                if res_of.get(tn):
                    used[res_of[tn]] = used.get(res_of[tn], 0) + n
    quota_objs = sorted((o for o in objs if o.kind == "ResourceQuota" and not o.api_group),
                        key=lambda o: (o.namespace, o.name))
    for r in sorted(used):
        if used[r] > cap.get(r, 0):
            first = next((o for o in quota_objs if any(k in (r, "requests." + r) for k in (_get(o.data, "spec", "hard") or {}))), None)
            draft.diagnostics.append(_diag(
                C.W_QUOTA_OVER, f"ResourceQuotas grant {used[r]} {r} in all; the pools advertise {cap.get(r, 0)}",
                first, "spec", "hard", "requests." + r if first is not None and "requests." + r in
                (_get(first.data, "spec", "hard") or {}) else r))


def check_unused(cfg: Configs, selected: set, draft: Draft) -> None:
    for name in sorted(cfg.dp):
        if name not in selected and name != cfg.dp_default:
            draft.diagnostics.append(_diag(C.W_UNUSED_CONFIG, f"device-plugin config {show(name)} is selected by no "
                                           "node and is not the default; not carried over", cfg.dp_cm, "data", name))
    for name in sorted(cfg.mig):
        if name not in selected and name != cfg.mig_default:
            draft.diagnostics.append(_diag(C.W_UNUSED_CONFIG, f"mig-parted config {show(name)} is selected by no "
                                           "node and is not the default; not carried over", cfg.mig_cm, "data",
                                           cfg.mig_key or ""))


# ------------------------------------------------------------------------------ fleet


def _majority_str(values: list[str]) -> str | None:
    return sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if values else None


def infer(objs: list[Obj], *, name: str | None = None) -> Draft:
    draft = Draft(spec={})
    cfg = find_configs(objs, draft)
    alone = S.find(objs, cfg, draft)  # device plugins / mig-managers without the operator (GP943)
    every_node = [o for o in objs if o.kind == "Node" and not o.api_group]
    nodes = [o for o in every_node if V.GFD_PRODUCT in o.labels or V.GFD_COUNT in o.labels]
    nodepools = [o for o in objs if o.kind == "NodePool" and o.api_group == "karpenter.sh"]
    classes = {("aws", o.name): o for o in objs if o.kind == "EC2NodeClass" and o.api_group == "karpenter.k8s.aws"}
    classes |= {("azure", o.name): o for o in objs if o.kind == "AKSNodeClass" and o.api_group == NR.GROUP}
    launched: dict[str, dict[str, int]] = {}
    for n in nodes:
        g = _gpu_model(n.labels.get(V.GFD_PRODUCT))
        if g is not None and isinstance(n.labels.get(V.KARPENTER_NODEPOOL_LABEL), str):
            c = launched.setdefault(n.labels[V.KARPENTER_NODEPOOL_LABEL], {})
            c[g.key] = c.get(g.key, 0) + 1
    kpools = karpenter_pools(nodepools, classes, cfg, draft, overlaid_nodepools(objs), launched)
    # a node a NodePool of the input launched is that NodePool's, never a static pool's (also when
    # the NodePool itself is left out: its finding says why)
    faulty, fault_selected = gpu_faults(nodes, cfg, draft)
    # GKE, AKS and Cluster API node groups (their nodes may lack GFD labels): not static pools
    plat = P.read(objs, [n for n in every_node if n.name not in faulty], cfg, draft, _pool_sharing, _node_gpus)
    spools = static_pools([n for n in nodes if n.name not in plat.claimed], {o.name for o in nodepools}, cfg, draft,
                          faulty)
    pools = sorted(spools + kpools + plat.pools, key=lambda p: p["name"])
    seen: set[str] = set()
    for p in list(pools):
        if p["name"] in seen:
            draft.diagnostics.append(_diag(C.W_BAD_NAME, f"pool {p['name']}: both static nodes and a NodePool use "
                                           "this name; the NodePool is left out", p.get("_nodepool")))
            pools.remove(p)
        seen.add(p["name"])
    if not pools:
        draft.diagnostics.append(C.E_NOTHING.diag(
            "no GPU node (nvidia.com/gpu.product label) and no Karpenter NodePool in the input",
            hint="kubectl get nodes,configmaps,priorityclasses,resourcequotas,namespaces -A -o json"))
        return draft
    selected = {v for p in pools for v in p["_selected"] if isinstance(v, str)} | fault_selected
    check_unused(cfg, selected, draft)
    from gpuplan.importer import kueue as K

    nss = {o.name: o for o in objs if o.kind == "Namespace" and not o.api_group}
    kq = K.scan(objs, pools, nss, lambda ns: tenant_name(ns, nss.get(ns)),
                lambda res: [p["name"] for p in pools if res in pool_resources(p)])
    from gpuplan.importer import volcano_read as VR
    from gpuplan.queueing.volcano.names import NODE_GROUP_LABEL

    vq = VR.scan(objs, pools, nss, lambda ns: tenant_name(ns, nss.get(ns)),
                 lambda res: [p["name"] for p in pools if res in pool_resources(p)])
    if vq is not None and kq is not None:
        # one fleet, one queueing engine (docs/volcano.md): Kueue's ClusterQueues are read
        first = next(o for o in objs if o.api_group == V.VOLCANO_GROUP and o.kind == "Queue"
                     and o.name not in V.VOLCANO_OWN_QUEUES)
        draft.diagnostics.append(_diag(C.W_VOLCANO_UNREAD, "the input holds Kueue ClusterQueues and Volcano Queues: "
                                       "a fleet has one queueing engine; the draft reads Kueue's, the Volcano Queues "
                                       "are not imported", first, "spec"))
    elif vq is not None:
        kq = vq
        for p in pools:  # the pool's node group is gpuplan's own label under engine volcano (identity.pool_node_labels)
            if (p.get("labels") or {}).get(NODE_GROUP_LABEL) == p["name"]:
                del p["labels"][NODE_GROUP_LABEL]
                if not p["labels"]:
                    del p["labels"]
                    p["_notes"].pop("labels", None)
    if kq is not None:
        draft.diagnostics += kq.diagnostics
    tiers, tenants = tiers_and_tenants(objs, pools, draft, kq)
    _disruption_workloads(pools, tiers, draft)
    _tier_limits(tiers, objs)
    check_capacity(pools, tenants, tiers, objs, draft)

    # the fleet's name: what gpuplan labelled its cluster-scoped objects with (a tenant can label
    # anything in its namespace), else --name
    part_of = [o.labels[V.PART_OF_LABEL] for o in objs if o.labels.get(V.MANAGED_BY_LABEL) == V.MANAGED_BY_VALUE
               and not o.namespace and is_dns_label(o.labels.get(V.PART_OF_LABEL))]
    fleet_name = name or _majority_str(part_of) or "imported"
    notes = draft.notes
    spec: dict[str, Any] = {"apiVersion": "gpuplan.dev/v1alpha1", "kind": "Fleet", "metadata": {"name": fleet_name}}
    draft.note(("metadata", "name"), "from --name" if name else
               f"from the {V.PART_OF_LABEL} label of gpuplan's objects" if part_of else None,
               None if (name or part_of) else "name the fleet")
    versions = []
    for n in nodes or every_node:
        m = _KUBELET_VERSION.match(str(_get(n.data, "status", "nodeInfo", "kubeletVersion") or ""))
        if m:
            versions.append(f"1.{m[1]}")
    k8s = _majority_str(versions)
    cluster: dict[str, Any] = {"kubernetesVersion": k8s or "1.33"}
    draft.note(("spec", "cluster", "kubernetesVersion"), "from the Nodes' status.nodeInfo.kubeletVersion" if k8s else None,
               None if k8s else "no Node reports a kubelet version: set the cluster's Kubernetes version")
    dra_chart = K.find_chart(objs, V.DRA_CHART, draft.diagnostics)
    op_chart = K.find_chart(objs, D.OPERATOR_CHART, draft.diagnostics)
    gitops = K.gitops_from([op_chart, kq.chart if kq is not None else None, dra_chart],
                           {"operator": V.GPU_OPERATOR_VALUES_PATH, "kueue": V.KUEUE_VALUES_PATH,
                            "volcano": V.VOLCANO_VALUES_PATH,
                            "driver": V.DRA_VALUES_PATH})
    git = D.git_sources(objs, K.engine_namespace(objs, "Application"))
    if gitops is not None:
        cluster["gitops"] = gitops[0]
        draft.note(("spec", "cluster", "gitops"), gitops[1])
    elif git:
        app, src = git[0]
        cluster["gitops"] = D.gitops_from_source(app, src)
        mine = app.labels.get(V.MANAGED_BY_LABEL) == V.MANAGED_BY_VALUE
        todo = None if mine and len(git) == 1 or mine and all(
            D.gitops_from_source(*g) == cluster["gitops"] for g in git if g[0].labels.get(V.MANAGED_BY_LABEL)
            == V.MANAGED_BY_VALUE) else (
            f"Application {app.namespace}/{app.name} syncs this repository path; check that gpuplan's generated/ "
            f"goes there ({len(git)} Applications sync Git paths)")
        draft.note(("spec", "cluster", "gitops"), f"from Application {app.namespace}/{app.name} spec.source", todo)
        if todo:
            draft.diagnostics.append(_diag(C.I_TODO, todo, app, "spec", "source", "repoURL"))
    else:
        cluster["gitops"] = {"engine": "argocd", "repoURL": "https://git.example.com/TODO/gpu-fleet.git"}
        draft.note(("spec", "cluster", "gitops"), None, "the GitOps engine and repository that will deliver generated/")
    op: dict[str, Any] = {}
    if cfg.namespace != V.OPERATOR_NAMESPACE:
        op["namespace"] = cfg.namespace
        draft.note(("spec", "cluster", "gpuOperator", "namespace"), cfg.namespace_source)
    if cfg.policy is not None:
        ps = cfg.policy.data.get("spec") if isinstance(cfg.policy.data.get("spec"), dict) else {}
        if _get(ps, "driver", "enabled") is False:
            op["driver"] = "preinstalled"
            draft.note(("spec", "cluster", "gpuOperator", "driver"), "from ClusterPolicy spec.driver.enabled")
        elif D.driver_version(ps.get("driver")) is not None:
            op["driverVersion"] = D.driver_version(ps.get("driver"))
            draft.note(("spec", "cluster", "gpuOperator", "driverVersion"), "from ClusterPolicy spec.driver.version")
        if isinstance(_get(ps, "toolkit", "enabled"), bool):
            op["toolkit"] = "managed" if ps["toolkit"]["enabled"] else "preinstalled"
            draft.note(("spec", "cluster", "gpuOperator", "toolkit"), "from ClusterPolicy spec.toolkit.enabled")
        if _get(ps, "dcgmExporter", "enabled") is False:
            op["dcgmExporter"] = {"enabled": False}
            draft.note(("spec", "cluster", "gpuOperator", "dcgmExporter"), "from ClusterPolicy spec.dcgmExporter")
    # (NAP pools: AKS's node bootstrap installs the driver unless the AKSNodeClass has gpu.mode None)
    al2023 = [p["_nodepool"] for p in kpools if p["karpenter"].get("amiFamily") != "Bottlerocket"
              and p["karpenter"].get("driver") != "gpu-operator"]
    if "driver" not in op and "driverVersion" not in op and al2023 and not spools and all(
            V.DEPLOY_DRIVER_LABEL not in (_get(o.data, "spec", "template", "metadata", "labels") or {}) for o in al2023):
        # gpuplan switches a managed driver off EKS NVIDIA AMIs with this label (identity.nodepool_node_labels):
        # NodePools without it run the AMI's driver
        op["driver"] = "preinstalled"
        whose = "AKS's node bootstrap installs the driver (AKSNodeClass gpu.mode Driver)" if all(
            p["_cloud"] == "azure" for p in kpools) else "the EKS AMIs' own driver runs"
        draft.note(("spec", "cluster", "gpuOperator", "driver"), f"from the NodePool templates: no "
                   f"{V.DEPLOY_DRIVER_LABEL}=false, {whose}")
    if "toolkit" not in op and kpools and spools:
        op["toolkit"] = "preinstalled"
        draft.note(("spec", "cluster", "gpuOperator", "toolkit"), None,
                   "no ClusterPolicy says: Karpenter pools on EKS NVIDIA AMIs ship the toolkit; choose for the fleet")
    S.operator_settings(alone, cfg, op, draft)
    P.operator_settings(plat, cfg, op, draft)
    _operator_chart(op, op_chart, objs, cfg, draft, spools)
    cluster["gpuOperator"] = op
    for key, (settings, source, todo) in sorted(plat.cluster.items()):
        cluster[key] = settings
        draft.note(("spec", "cluster", key), source, todo)
    if any(p["_cloud"] == "azure" for p in kpools) and "azure" not in cluster:
        # Node Auto Provisioning: the NodePools and AKSNodeClasses do not name the managed cluster
        cluster["azure"] = {"managedCluster": "todo-managed-cluster"}
        draft.note(("spec", "cluster", "azure"), None, "the AKS managed cluster's name (az aks list)")
    if any(p["_cloud"] == "aws" for p in kpools):
        nc = next((p["_nodeclass"] for p in kpools if p["_nodeclass"] is not None and p["_cloud"] == "aws"), None)
        role = _get(nc.data, "spec", "role") if nc else None
        terms = _get(nc.data, "spec", "subnetSelectorTerms") if nc else None
        tags = terms[0].get("tags") if isinstance(terms, list) and terms and isinstance(terms[0], dict) else None
        sg = _get(nc.data, "spec", "securityGroupSelectorTerms") if nc else None
        sg_tags = sg[0].get("tags") if isinstance(sg, list) and sg and isinstance(sg[0], dict) else None
        cname = tags.get(V.DISCOVERY_TAG) if isinstance(tags, dict) else None
        aws: dict[str, Any] = {"clusterName": cname if isinstance(cname, str) else fleet_name,
                               "nodeRole": role if isinstance(role, str) and role else "TODO"}
        draft.note(("spec", "cluster", "aws", "clusterName"), f"from EC2NodeClass {nc.name} subnet discovery tag"
                   if isinstance(cname, str) else None, None if isinstance(cname, str) else "the EKS cluster name")
        draft.note(("spec", "cluster", "aws", "nodeRole"), f"from EC2NodeClass {nc.name} spec.role"
                   if aws["nodeRole"] != "TODO" else None, None if aws["nodeRole"] != "TODO" else "the nodes' IAM role")
        disc = {V.DISCOVERY_TAG: aws["clusterName"]}
        for key, val in (("subnetTags", tags), ("securityGroupTags", sg_tags)):
            if isinstance(val, dict) and val != disc and all(isinstance(v, str) for v in val.values()):
                aws[key] = dict(sorted(val.items()))
        cluster["aws"] = aws
    if (kq is None or kq.engine != "kueue") and any(o.api_group == V.KUEUE_GROUP for o in objs):
        draft.header.append("TODO: Kueue objects were found but no ClusterQueue: spec.queueing is not imported "
                            "(docs/kueue.md)")
    _allocation(pools, tiers, objs, dra_chart, cluster, draft)
    spec["spec"] = {"cluster": cluster, "pools": [], "tiers": [], "tenants": []}
    for i, p in enumerate(pools):
        clean = {k: v for k, v in p.items() if not k.startswith("_")}
        spec["spec"]["pools"].append(clean)
        for k, n in p["_notes"].items():
            draft.note(("spec", "pools", i, k), n.source, n.todo)
        group = next((k for k in ("karpenter", "gke", "aks", "capi") if k in p), None)
        for k, n in p.get("_knotes", {}).items():
            draft.note(("spec", "pools", i, group, k), n.source, n.todo)
        if "nodes" in p:
            draft.note(("spec", "pools", i, "topology"), None,
                       "kubelet Topology Manager settings are not visible through the API: add `topology` if the "
                       "nodes set a policy")
    spot = {p["name"]: (p.get("karpenter") or {}).get("capacityTypes", ()) for p in pools
            if "spot" in (p.get("karpenter") or {}).get("capacityTypes", ())}
    spot.update({p["name"]: ("spot",) for p in pools if (p.get("gke") or p.get("aks") or {}).get("spot")})
    # a tier whose quota sits on a pool's guaranteed Kueue flavor is pinned there (importer.kueue.assign):
    # not preemptible, the default for a tier whose workload the cluster does not show
    pinned = kq.pinned if kq is not None else set()
    for i, t in enumerate(tiers):
        if t.get("pool") in spot and t["name"] not in pinned:
            # the cluster already runs it where EC2 may reclaim nodes (rules/spot.py, GP413)
            t["preemptible"] = True
            mixed = any(c in spot[t["pool"]] for c in ("on-demand", "reserved"))
            t["_notes"]["preemptible"] = Note(
                f"its pool {t['pool']} allows spot capacity",
                "if its pods must not be interrupted, set false: they then select on-demand capacity, within the "
                "pool's on-demand floor (guaranteedGPUs)" if mixed else
                "if its pods must not be interrupted, set false and give the pool `capacityTypes: [on-demand]`")
        spec["spec"]["tiers"].append({k: v for k, v in t.items() if not k.startswith("_")})
        for k, n in t["_notes"].items():
            draft.note(("spec", "tiers", i, k), n.source, n.todo)
        draft.note(("spec", "tiers", i, "name"), None, "workload (training, inference, ...) is not visible in the "
                   "cluster: set it, it chooses Karpenter disruption settings")
    if kq is not None:
        queueing, qnotes = K.queueing_spec(kq, fleet_name, draft) if kq.engine == "kueue" else \
            VR.queueing_spec(kq, draft)
        spec["spec"]["queueing"] = queueing
        for sub, (source, todo) in qnotes.items():
            draft.note(("spec", "queueing") + sub, source, todo)
    for i, t in enumerate(tenants):
        spec["spec"]["tenants"].append({k: v for k, v in t.items() if not k.startswith("_")})
        draft.note(("spec", "tenants", i, "name"), t["_notes"]["name"].source, t["_notes"]["name"].todo)
        if "queueing" in t:
            draft.note(("spec", "tenants", i, "queueing"), t["_notes"]["queueing"].source)
        if "quotas" in t:
            draft.note(("spec", "tenants", i, "quotas"), "from the namespaces' ResourceQuotas (spec.hard)")
    if not tiers:
        del spec["spec"]["tiers"]
    if not tenants:
        del spec["spec"]["tenants"]
    draft.spec = spec
    draft.scope = {"configs": cfg, "pools": pools, "tiers": tiers, "tenants": tenants, "nodes": nodes, "objects": objs,
                   "kueue": kq, "standalone": alone.objects}
    return draft


def _operator_chart(op: dict, chart: Any, objs: list[Obj], cfg: Configs, draft: Draft,
                    static: list[dict] = ()) -> None:
    """chartVersion from the gpu-operator chart's Application or HelmRelease; driverVersion from
    its Helm values (``driver.version``) or the NVIDIADriver objects, where the ClusterPolicy
    did not say."""
    at = ("spec", "cluster", "gpuOperator")
    if chart is not None and isinstance(chart.version, str) and D.CHART_VERSION.match(chart.version):
        op["chartVersion"] = chart.version
        draft.note(at + ("chartVersion",), f"from {chart.obj.kind} {chart.obj.namespace}/{chart.obj.name}")
    else:
        draft.note(at, None, "chartVersion: the gpu-operator chart you run" + (
            "" if cfg.policy is not None else "; no ClusterPolicy in the input: gpuplan's defaults"))
    values = D.chart_values(chart.obj) if chart is not None and chart.obj.kind == "Application" else {}
    if op.get("driver") != "preinstalled" and "driverVersion" not in op and D.driver_version(values.get("driver")):
        op["driverVersion"] = D.driver_version(values.get("driver"))
        draft.note(at + ("driverVersion",), f"from Application {chart.obj.namespace}/{chart.obj.name} Helm values "
                   "driver.version")
    versions = D.driver_versions(objs)
    if len(versions) == 1 and op.get("driver") != "preinstalled" and "driverVersion" not in op:
        (v, o), = versions.items()
        op["driverVersion"] = D.driver_version({"version": v, "usePrecompiled": _get(o.data, "spec", "usePrecompiled")})
        draft.note(at + ("driverVersion",), f"from NVIDIADriver {o.name} spec.version")
    elif len(versions) > 1:
        # gpuplan writes one NVIDIADriver per static pool, selecting the pool's nodes by its label
        # (gpuplan.lower.operator.nvidia_driver): each version goes to the pool its object selects
        by_name = {p["name"]: p for p in static}
        unmapped = []
        for o in D.nvidia_drivers(objs):
            pool = by_name.get(_get(o.data, "spec", "nodeSelector", V.POOL_LABEL) or "")
            version = D.driver_version({"version": _get(o.data, "spec", "version"),
                                        "usePrecompiled": _get(o.data, "spec", "usePrecompiled")})
            if pool is None or version is None or len(_get(o.data, "spec", "nodeSelector") or {}) != 1:
                unmapped.append(o)
            elif "driverVersion" not in pool:
                pool["driverVersion"] = version
                pool["_notes"]["driverVersion"] = Note(f"from NVIDIADriver {o.name} spec.version (its nodeSelector "
                                                       f"{V.POOL_LABEL}: {pool['name']})")
        if unmapped:
            todo = (f"NVIDIADriver objects state {len(versions)} driver versions ({show(', '.join(sorted(versions)))}), "
                    f"{len(unmapped)} of them for nodes no static pool of the draft names: set "
                    "gpuOperator.driverVersion, or pools[].driverVersion per static pool")
            draft.note(at, None, todo)
            for o in unmapped:
                draft.diagnostics.append(_diag(C.I_TODO, todo, o, "spec", "version"))


def _tier_limits(tiers: list[dict], objs: list[Obj]) -> None:
    """maxGPUsPerPod from gpuplan's admission policies; requiresNVLink is written nowhere in the
    cluster (gpuplan checks it at build time only): a TODO on tiers of multi-GPU pods."""
    limits = D.max_gpus_per_pod(objs)
    for t in tiers:
        if t["name"] in limits and "maxGPUsPerPod" not in t:
            n, o = limits[t["name"]]
            t["maxGPUsPerPod"] = n
            t["_notes"]["maxGPUsPerPod"] = Note(f"from ValidatingAdmissionPolicy {o.name}")
        if t.get("maxGPUsPerPod", 1) > 1 and "requiresNVLink" not in t:
            t["_notes"].setdefault("maxGPUsPerPod", Note()).todo = (
                "requiresNVLink: no cluster object says whether these pods need NVLink; set it if they do")


def _disruption_workloads(pools: list[dict], tiers: list[dict], draft: Draft) -> None:
    """A NodePool's disruption as the workload gpuplan derives it from, on the pool's tiers that
    do not say one (gpuplan/lower/karpenter.py disruption_class)."""
    for p in pools:
        dis, np_ = p.get("_disruption") or (None, None)
        if dis is None or dis.workload is None:
            continue
        mine = [t for t in tiers if t.get("pool") == p["name"]]
        if not mine:
            draft.diagnostics.append(_diag(C.I_TODO, f"NodePool {np_.name}: its spec.disruption is gpuplan's for "
                                           f"{dis.workload} tiers, but no tier uses the pool: gpuplan writes the "
                                           "settings of other pools", np_, "spec", "disruption"))
            continue
        for t in mine:
            if "workload" not in t:
                t["workload"] = dis.workload
                t["_notes"]["workload"] = Note(
                    f"from NodePool {np_.name} spec.disruption (gpuplan's settings for {dis.workload} tiers)",
                    "or batch (the same disruption settings)" if dis.workload == "training" else None)


def _allocation(pools: list[dict], tiers: list[dict], objs: list[Obj], chart: Any, cluster: dict, draft: Draft) -> None:
    """DRA: the pools whose nodes switch the device plugin off (the label gpuplan sets on
    DRA pools, docs/dra.md), the driver chart's version, extendedResources from the tiers'
    DeviceClasses and maxGPUsPerPod from their ResourceClaimTemplates."""
    dra = [p for p in pools if p.get("_dra")]
    if not dra:
        return
    alloc: dict[str, Any] = {}
    if len(dra) == len(pools):
        alloc["backend"] = "dra"
        draft.note(("spec", "cluster", "allocation", "backend"), f"every pool: {dra[0]['_dra']}")
    else:
        for p in dra:
            p["allocation"] = {"backend": "dra"}
            p["_notes"]["allocation"] = Note(f"from {p['_dra']}")
    version = chart.version if chart is not None else None
    if isinstance(version, str) and re.match(r"v?[0-9]+\.[0-9]+\.[0-9]+\Z", version):
        alloc["draDriverVersion"] = "v" + version.lstrip("v")
        draft.note(("spec", "cluster", "allocation", "draDriverVersion"), f"from {chart.obj.kind} {chart.obj.name}")
    else:
        draft.note(("spec", "cluster", "allocation"), None, "no Application or HelmRelease of the dra-driver-nvidia-gpu "
                   "chart in the input: set draDriverVersion")
    names = {p["name"] for p in dra}
    classes = {o.name: o for o in objs if o.kind == "DeviceClass" and o.api_group == "resource.k8s.io"}
    by_tier = {tier: classes[c] for c, tier in dra_classes(objs).items()}
    mine = [by_tier[t["name"]] for t in tiers if t.get("pool") in names and t["name"] in by_tier]
    if mine and not any(isinstance(_get(o.data, "spec", "extendedResourceName"), str) for o in mine):
        alloc["extendedResources"] = False
        draft.note(("spec", "cluster", "allocation", "extendedResources"),
                   "the tiers' DeviceClasses have no extendedResourceName")
    draft.note(("spec", "cluster", "allocation"), None, "featureGates are not visible through the API: add the "
               "DRA gates the cluster sets away from its version's defaults")
    cluster["allocation"] = alloc
    # gpuplan writes gpuplan-<tier>-x<N> for maxGPUsPerPod N > 1 (gpuplan.dra.claims.claim_template_name)
    counts = claim_template_counts(objs, draft)
    for t in tiers:
        if t.get("pool") in names and counts.get(t["name"], (0, ""))[0] > 1 and "maxGPUsPerPod" not in t:
            n, where = counts[t["name"]]
            t["maxGPUsPerPod"] = n
            t["_notes"]["maxGPUsPerPod"] = Note(f"from ResourceClaimTemplate gpuplan-{t['name']}-x{n} ({where})")


_CLAIM_TEMPLATE = re.compile(re.escape(V.CLAIM_TEMPLATE_PREFIX) + r"(?P<tier>[a-z0-9-]+?)(-x(?P<n>[0-9]{1,4}))?\Z")


def managed_namespace(o: Obj | None) -> bool:
    """A Namespace gpuplan wrote (its managed-by label): cluster-scoped, so no tenant made it."""
    return o is not None and o.labels.get(V.MANAGED_BY_LABEL) == V.MANAGED_BY_VALUE


def _claim_count(name: str, tier: str) -> int | None:
    """Devices of gpuplan's claim template ``name`` for ``tier`` (gpuplan.dra.claims.claim_template_name)."""
    if name == f"{V.CLAIM_TEMPLATE_PREFIX}{tier}":
        return 1
    m = re.fullmatch(rf"{re.escape(V.CLAIM_TEMPLATE_PREFIX + tier)}-x([0-9]{{1,4}})", name)
    return int(m[1]) if m else None


def claim_template_counts(objs: list[Obj], draft: Draft) -> dict[str, tuple[int, str]]:
    """tier -> (devices of its largest claim template, where): gpuplan's
    ResourceClaimTemplates gpuplan-<tier> and gpuplan-<tier>-x<N>. A tenant can
    create any object in its namespace, so one is read only with gpuplan's
    labels (managed-by, gpuplan.dev/tier naming the tier its name does) in a
    namespace gpuplan manages that is granted the tier (tier.gpuplan.dev/<tier>);
    any other is a GP965. gpuplan writes the same templates in every granted
    namespace: when the namespaces disagree, the largest count most of them
    have (the smaller on a tie) is taken and the others are a GP965. (With one
    granted namespace there is nothing to compare: its templates are taken.)"""
    nss = {o.name: o for o in objs if o.kind == "Namespace" and not o.api_group}
    per_ns: dict[str, dict[str, tuple[int, Obj]]] = {}  # tier -> namespace -> (largest N, template)
    for o in sorted((o for o in objs if o.kind == "ResourceClaimTemplate" and o.api_group == "resource.k8s.io"),
                    key=lambda o: (o.namespace, o.name)):
        m = _CLAIM_TEMPLATE.match(o.name)
        if m is None:
            continue
        tier = o.labels.get(V.TIER_LABEL)
        n = _claim_count(o.name, tier) if isinstance(tier, str) and is_dns_label(tier) else None
        ns = nss.get(o.namespace)
        why = None
        if o.labels.get(V.MANAGED_BY_LABEL) != V.MANAGED_BY_VALUE or n is None:
            tier = m["tier"] if n is None else tier
            why = f"it lacks gpuplan's labels ({V.MANAGED_BY_LABEL}: {V.MANAGED_BY_VALUE}, {V.TIER_LABEL}: " \
                  f"{show(m['tier'])})"
        elif not managed_namespace(ns):
            why = f"its namespace is not one gpuplan manages (no Namespace {show(o.namespace)} labelled " \
                  f"{V.MANAGED_BY_LABEL}: {V.MANAGED_BY_VALUE} in the input)"
        elif ns.labels.get(V.TIER_NS_LABEL_PREFIX + tier) != "true":
            why = f"its namespace is not granted tier {show(tier)} (no label {V.TIER_NS_LABEL_PREFIX}{show(tier)})"
        if why is not None:
            draft.diagnostics.append(_diag(
                C.W_NOT_TRUSTED, f"ResourceClaimTemplate {show(o.namespace)}/{show(o.name)} is not read as gpuplan's: "
                f"{why}; tier {show(tier)}'s maxGPUsPerPod is not taken from it", o, "metadata",
                hint=f"kubectl get resourceclaimtemplate -n {show(o.namespace)} {show(o.name)} --show-managed-fields "
                     "-o yaml (who wrote it); a tenant can create any object in its namespace"))
            continue
        have = per_ns.setdefault(tier, {}).get(o.namespace)
        if have is None or n > have[0]:
            per_ns[tier][o.namespace] = (n, o)
    out: dict[str, tuple[int, str]] = {}
    for tier, by_ns in sorted(per_ns.items()):
        votes = Counter(n for n, _ in by_ns.values())
        n = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        agree = sorted(ns for ns, (k, _) in by_ns.items() if k == n)
        names = ", ".join(show(ns) for ns in agree[:3]) + (" and more" if len(agree) > 3 else "")
        for ns, (k, o) in sorted(by_ns.items()):
            if k != n:
                draft.diagnostics.append(_diag(
                    C.W_NOT_TRUSTED, f"ResourceClaimTemplate {show(ns)}/{show(o.name)}: tier {tier}'s largest claim "
                    f"template here is x{k}, in {names} x{n}; gpuplan writes the same in every namespace granted the "
                    f"tier: the draft takes x{n}", o, "metadata", "name"))
        out[tier] = (n, f"namespace{'s' if len(agree) > 1 else ''} {names}")
    return out
