"""GP870-GP879: does the cluster look like the plan? (`gpuplan verify-cluster`)

Reads what ``kubectl get nodes,resourcequotas -A -o json`` prints (a ``List``,
or a ``NodeList``/``ResourceQuotaList``) and compares it with the resolved
spec, per pool:

- the nodes a static pool lists exist; every node of a pool (static: listed;
  Karpenter: labelled ``gpuplan.dev/pool`` or ``karpenter.sh/nodepool``)
  carries the labels and taints gpuplan plans for it;
- ``status.capacity`` and ``status.allocatable`` of each GPU resource equal
  what one node of the pool advertises under its sharing mode;
- on MIG pools, ``nvidia.com/mig.config.state`` is ``success`` (mig-manager
  writes ``pending``, ``rebooting``, ``success`` or ``failed``: NVIDIA/mig-parted
  v0.15.0 ``deployments/container/reconfigure-mig.sh`` lines 222-240, 484-487, 570-573);
- every ResourceQuota gpuplan emits exists with the same ``hard`` and scope.

Findings are diagnostics located at the line of fleet.yaml that planned the
thing that differs. Pure: no cluster access, no printing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.lower.mig_parted import config_name as mig_config_name
from gpuplan.resolve import PoolView, ResolvedFleet

KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"

E_LIVE_INPUT = Code(
    "GP870", "cluster objects unreadable", Severity.ERROR,
    "`gpuplan verify-cluster` reads the JSON that `kubectl get nodes,resourcequotas -A -o json` "
    "prints: a List (or NodeList / ResourceQuotaList) with `items`. Anything else cannot be compared.",
    bad="kubectl get nodes -o yaml > live.json",
    good="kubectl get nodes,resourcequotas -A -o json > live.json",
)
E_NODE_MISSING = Code(
    "GP871", "planned node not in the cluster", Severity.ERROR,
    "A static pool lists a node that the cluster does not have (not joined yet, renamed, or removed).",
    bad="pools:\n  - {name: train, nodes: [gpu-01, gpu-02]}   # cluster has only gpu-01",
    good="pools:\n  - {name: train, nodes: [gpu-01]}",
)
E_NODE_LABEL = Code(
    "GP872", "node lacks a planned label", Severity.ERROR,
    "gpuplan labels each pool's nodes (`gpuplan.dev/pool`, `nvidia.com/device-plugin.config`, "
    "`nvidia.com/mig.config`, the pool's own labels) through NFD rules or the Karpenter NodePool. "
    "A missing or different label means the node gets the wrong sharing config or MIG layout.",
    bad="# node gpu-01: nvidia.com/device-plugin.config=default",
    good="# node gpu-01: nvidia.com/device-plugin.config=train",
)
E_NODE_TAINT = Code(
    "GP873", "node lacks a planned taint", Severity.ERROR,
    "The pool's taints keep non-GPU pods off its nodes. kubelet applies `--register-with-taints` only "
    "when the node first registers, so a node registered before the taint was planned lacks it.",
    bad="# node gpu-01: no taints; pool taints [nvidia.com/gpu=present:NoSchedule]",
    good="kubectl taint node gpu-01 nvidia.com/gpu=present:NoSchedule",
)
E_CAPACITY = Code(
    "GP874", "node advertises other GPU resources than planned", Severity.ERROR,
    "The node's capacity or allocatable for one of the pool's resources differs from what the spec "
    "says each node advertises (GPUs per node, sharing replicas, MIG layout): quotas and the capacity "
    "report assume the planned number.",
    bad="# pool: 4 GPUs, MIG {3g.40gb: 2}; node capacity nvidia.com/mig-3g.40gb: 4 (one GPU not split)",
    good="# node capacity nvidia.com/mig-3g.40gb: 8",
)
E_MIG_STATE = Code(
    "GP875", "MIG layout not applied on a node", Severity.ERROR,
    "mig-manager reports its progress in the node label `nvidia.com/mig.config.state`: `failed` "
    "(error) means the planned layout is not on the node; `pending`, `rebooting` or no label "
    "(warning) means it is not there yet.",
    bad="# node gpu-05: nvidia.com/mig.config.state=failed",
    good="# node gpu-05: nvidia.com/mig.config.state=success",
)
E_QUOTA_MISSING = Code(
    "GP876", "planned ResourceQuota not in the cluster", Severity.ERROR,
    "A ResourceQuota gpuplan emits is not in the cluster: the namespace's GPU use is not limited as "
    "the spec says (not synced yet, or deleted by hand).",
    bad="# vision-train has no ResourceQuota gpuplan-gpus",
    good="# argocd app sync (or flux reconcile) the generated tree",
)
E_QUOTA_DIFFERS = Code(
    "GP877", "ResourceQuota differs from the plan", Severity.ERROR,
    "The live ResourceQuota's `hard` limits or scope differ from the generated one: edited by hand, "
    "or the tree is not synced.",
    bad="# live gpuplan-gpus: requests.nvidia.com/gpu: '32'; planned '24'",
    good="# live and planned agree",
)
W_UNPLANNED_NODE = Code(
    "GP878", "node claims a pool that does not plan it", Severity.WARNING,
    "A node is labelled `gpuplan.dev/pool` (or `karpenter.sh/nodepool`) with a pool that does not "
    "exist, or with a static pool that does not list it: it gets no or stale config.",
    bad="# node gpu-09: gpuplan.dev/pool=train; pool train lists gpu-01..gpu-04",
    good="pools:\n  - {name: train, nodes: [gpu-01, gpu-02, gpu-03, gpu-04, gpu-09]}",
)
W_UNPLANNED_RESOURCE = Code(
    "GP879", "node advertises a GPU resource its pool does not plan", Severity.WARNING,
    "The node advertises an `nvidia.com/` resource (non-zero) that its pool's sharing mode does not "
    "produce, e.g. whole GPUs on a MIG node or `nvidia.com/gpu` next to `nvidia.com/gpu.shared`: "
    "the device plugin runs another config than planned.",
    bad="# pool time-sliced (nvidia.com/gpu.shared); node also advertises nvidia.com/gpu: 4",
    good="# node advertises only nvidia.com/gpu.shared: 16",
)

CODES = (E_LIVE_INPUT, E_NODE_MISSING, E_NODE_LABEL, E_NODE_TAINT, E_CAPACITY, E_MIG_STATE,
         E_QUOTA_MISSING, E_QUOTA_DIFFERS, W_UNPLANNED_NODE, W_UNPLANNED_RESOURCE)


class LiveInputError(Exception):
    def __init__(self, diag: Diagnostic):
        super().__init__(diag.message)
        self.diag = diag


@dataclass
class Live:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    quotas: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    saw_nodes: bool = False
    saw_quotas: bool = False


def parse_live(texts: Iterable[tuple[str, str]]) -> Live:
    """(display name, JSON text) of each input -> the objects verify-cluster compares."""
    live = Live()
    for name, text in texts:
        def bad(msg: str) -> LiveInputError:
            return LiveInputError(E_LIVE_INPUT.diag(msg, file=name,
                                                    hint="use `kubectl get nodes,resourcequotas -A -o json`"))
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LiveInputError(E_LIVE_INPUT.diag(f"not JSON: {exc.msg}", file=name, line=exc.lineno,
                                                   col=exc.colno, hint="use `kubectl ... -o json`")) from None
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise bad("expected a Kubernetes List with `items`")
        for i, item in enumerate(data["items"]):
            if not isinstance(item, dict) or not isinstance(item.get("metadata"), dict) \
                    or not isinstance(item["metadata"].get("name"), str):
                raise bad(f"items[{i}] is not a Kubernetes object with metadata.name")
            kind = item.get("kind") or str(data.get("kind", "")).removesuffix("List")
            if kind == "Node":
                live.saw_nodes = True
                live.nodes[item["metadata"]["name"]] = item
            elif kind == "ResourceQuota":
                live.saw_quotas = True
                live.quotas[(item["metadata"].get("namespace", ""), item["metadata"]["name"])] = item
        if data.get("kind") == "NodeList":
            live.saw_nodes = True
        if data.get("kind") == "ResourceQuotaList":
            live.saw_quotas = True
    return live


def _int(q: Any) -> int | None:
    """An extended-resource quantity (always an integer) as int; None when it is not one."""
    try:
        return int(str(q))
    except ValueError:
        pass
    s = str(q)
    for suffix, mult in (("k", 10**3), ("M", 10**6), ("G", 10**9), ("Ki", 2**10), ("Mi", 2**20)):
        if s.endswith(suffix) and s[: -len(suffix)].isdigit():
            return int(s[: -len(suffix)]) * mult
    return None


@dataclass
class PoolResult:
    pool: str
    planned: int | None  # static: nodes listed; Karpenter: None (autoscaled)
    found: list[str] = field(default_factory=list)
    ok: list[str] = field(default_factory=list)


@dataclass
class Verified:
    diagnostics: list[Diagnostic]
    pools: list[PoolResult]


def _pool_of(node: dict[str, Any]) -> str | None:
    labels = node["metadata"].get("labels") or {}
    from gpuplan.lower.common import POOL_LABEL

    return labels.get(POOL_LABEL) or labels.get(KARPENTER_NODEPOOL_LABEL)


def _planned_taints(pv: PoolView) -> list[dict[str, str]]:
    from gpuplan.lower.common import pool_node_taints

    return pool_node_taints(pv)


def _check_node(rf: ResolvedFleet, pv: PoolView, node: dict[str, Any]) -> list[Diagnostic]:
    from gpuplan.lower.node_labels import pool_node_labels

    name = node["metadata"]["name"]
    path = pv.path
    out: list[Diagnostic] = []
    labels = node["metadata"].get("labels") or {}
    for key, value in pool_node_labels(rf, pv).items():
        if labels.get(key) != value:
            have = f"has {key}={labels[key]}" if key in labels else f"has no {key}"
            out.append(rf.diag(E_NODE_LABEL, f"node {name} (pool {pv.name}) {have}; planned {key}={value}",
                               path, key=True, hint="check the pool's NodeFeatureRule / NodePool is synced "
                               "and nfd-master runs"))
    taints = (node.get("spec") or {}).get("taints") or []
    for t in _planned_taints(pv):
        if not any(x.get("key") == t["key"] and x.get("effect") == t["effect"]
                   and ("value" not in t or x.get("value") == t["value"]) for x in taints):
            text = f"{t['key']}{'=' + t['value'] if 'value' in t else ''}:{t['effect']}"
            out.append(rf.diag(E_NODE_TAINT, f"node {name} (pool {pv.name}) lacks taint {text}", path, key=True,
                               hint=f"kubectl taint node {name} {text}"))
    status = node.get("status") or {}
    planned = pv.node_resources()
    for field_name in ("capacity", "allocatable"):
        have = status.get(field_name) or {}
        for res, count in planned.items():
            got = _int(have.get(res, 0))
            if got != count:
                out.append(rf.diag(E_CAPACITY, f"node {name} (pool {pv.name}) {field_name} {res}: "
                                   f"{have.get(res, 'absent')}, planned {count}", path, key=True,
                                   hint="check the node's device-plugin and MIG labels, and the device plugin pod"))
        if field_name == "capacity":
            for res, q in sorted(have.items()):
                if res.startswith("nvidia.com/") and res not in planned and (_int(q) or 0) > 0:
                    out.append(rf.diag(W_UNPLANNED_RESOURCE, f"node {name} (pool {pv.name}) advertises "
                                       f"{res}: {q}, which the pool does not plan", path, key=True))
    if pv.pool.sharing.mode == "mig":
        state = labels.get(MIG_STATE_LABEL)
        if state != "success":
            sev = Severity.ERROR if state == "failed" else Severity.WARNING
            out.append(rf.diag(E_MIG_STATE, f"node {name} (pool {pv.name}) {MIG_STATE_LABEL}="
                               f"{state if state is not None else '(absent)'}; planned layout "
                               f"{mig_config_name(pv)} is not applied", ("spec", "pools", pv.index, "sharing"),
                               key=True, severity=sev,
                               hint="see the nvidia-mig-manager pod's log on that node"))
    return out


def _check_quotas(rf: ResolvedFleet, live: Live) -> list[Diagnostic]:
    from gpuplan.lower.tenancy import namespace_quotas

    out = []
    for ti, tenant in enumerate(rf.fleet.spec.tenants):
        for ni, ns in enumerate(tenant.namespaces):
            path = (("spec", "tenants", ti, "quotas", ns) if ns in tenant.quotas
                    else ("spec", "tenants", ti, "namespaces", ni))
            for q in namespace_quotas(rf, tenant, ns):
                qname = q["metadata"]["name"]
                got = live.quotas.get((ns, qname))
                if got is None:
                    out.append(rf.diag(E_QUOTA_MISSING, f"ResourceQuota {ns}/{qname} is not in the cluster",
                                       path, key=True, hint="sync the generated tree"))
                    continue
                spec = got.get("spec") or {}
                want_hard = {k: _int(v) for k, v in q["spec"]["hard"].items()}
                have_hard = {k: _int(v) for k, v in (spec.get("hard") or {}).items()}
                if want_hard != have_hard:
                    diff = ", ".join(f"{k}: {(spec.get('hard') or {}).get(k, 'absent')} (planned "
                                     f"{q['spec']['hard'].get(k, 'absent')})"
                                     for k in sorted(set(want_hard) | set(have_hard))
                                     if want_hard.get(k) != have_hard.get(k))
                    out.append(rf.diag(E_QUOTA_DIFFERS, f"ResourceQuota {ns}/{qname} hard differs: {diff}",
                                       path, key=True))
                if (spec.get("scopeSelector") or None) != q["spec"].get("scopeSelector"):
                    out.append(rf.diag(E_QUOTA_DIFFERS, f"ResourceQuota {ns}/{qname} scopeSelector differs "
                                       "from the plan", path, key=True))
    return out


def verify(rf: ResolvedFleet, live: Live) -> Verified:
    diags: list[Diagnostic] = []
    results = []
    claimed: dict[str, list[str]] = {}
    for name, node in live.nodes.items():
        pool = _pool_of(node)
        if pool is not None:
            claimed.setdefault(pool, []).append(name)
    for pv in rf.pools:
        res = PoolResult(pv.name, len(pv.pool.nodes) if pv.pool.nodes is not None else None)
        if pv.pool.nodes is not None:
            names = []
            for j, n in enumerate(pv.pool.nodes):
                if n in live.nodes:
                    names.append(n)
                elif live.saw_nodes:
                    diags.append(rf.diag(E_NODE_MISSING, f"node {n} of pool {pv.name} is not in the cluster",
                                         ("spec", "pools", pv.index, "nodes", j)))
            for n in sorted(set(claimed.get(pv.name, ())) - set(pv.pool.nodes)):
                diags.append(rf.diag(W_UNPLANNED_NODE, f"node {n} is labelled for pool {pv.name}, which does "
                                     "not list it", ("spec", "pools", pv.index, "nodes"), key=True))
        else:
            names = sorted(claimed.get(pv.name, ()))
        for n in names:
            found = _check_node(rf, pv, live.nodes[n])
            diags += found
            res.found.append(n)
            if not any(d.is_error for d in found):
                res.ok.append(n)
        results.append(res)
    for pool in sorted(set(claimed) - set(rf.pool_by_name)):
        for n in sorted(claimed[pool]):
            diags.append(rf.diag(W_UNPLANNED_NODE, f"node {n} is labelled for pool {pool}, which the spec does "
                                 "not have", ("spec", "pools"), key=True))
    if live.saw_quotas:
        diags += _check_quotas(rf, live)
    return Verified(diags, results)
