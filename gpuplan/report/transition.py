"""What every GPU node of the fleet carries and needs after each step of the GitOps
engine's sync, going from one generated tree to the next (docs/transitions.md).

The node classes of a pool, from the two trees:

- **static nodes** (a pool's ``NodeFeatureRule`` lists them by name): nfd-master
  relabels every node whenever a NodeFeatureRule is added, changed or deleted
  (kubernetes-sigs/node-feature-discovery@v0.19.0
  pkg/nfd-master/nfd-api-controller.go:280-296 queue ``updateAllNodes``;
  pkg/nfd-master/nfd-master.go:378-399,604 relabel each node), so they carry
  the old rule's labels until the step that applies the new rule, and none of
  the pool's labels once the rule is pruned;
- **Karpenter nodes**: Karpenter copies the NodeClaim's labels onto the node
  once, at registration (kubernetes-sigs/karpenter@v1.14.1
  pkg/controllers/nodeclaim/lifecycle/registration.go:207-221), and never
  relabels it: a changed template only marks the NodeClaims drifted
  (pkg/controllers/nodeclaim/disruption/drift.go:154-167). Drift replaces a node
  only while a budget allows it for the ``Drifted`` reason — the smallest of the
  budgets whose ``reasons`` are unset or name it
  (pkg/apis/v1/nodepool.go:364-378; pkg/controllers/disruption/drift.go:80) —
  so with ``nodes: "0"`` for ``Drifted`` the old nodes stay, with their old
  labels, until ``expireAfter`` deletes them
  (pkg/controllers/nodeclaim/expiration/controller.go:71-81; default 720h,
  pkg/apis/v1/nodepool.go:263). A NodePool that leaves the tree takes its
  NodeClaims with it. The old nodes ("old") and the nodes launched from the new
  template ("new") are two classes; a pool whose template does not change has one.

The steps, in order:

- **Argo CD**: the root Application's out-of-sync objects in sync-wave order
  (``argocd.argoproj.io/sync-wave``, 0 when absent; gitops-engine, as vendored
  in argoproj/argo-cd@v3.5.1, gitops-engine/pkg/sync/sync_task.go:59-64 and
  sync_context.go:660-664), prunes in the reverse order of their waves
  (sync_context.go:1097-1125). The operator's own Application syncs on its own:
  its values (the cluster's MIG strategy) count from its wave on.
- **Flux**: the operator's Kustomization first (the root ``dependsOn`` it;
  fluxcd/kustomize-controller@v1.9.4
  internal/controller/kustomization_controller.go:246,551-630), then the root's
  apply as one step (kustomization_controller.go:473,960), then its prunes
  (kustomization_controller.go:504).

What a node class needs at each step: the config its
``nvidia.com/device-plugin.config`` names in the device-plugin ConfigMap
applied by then, where the operator's device plugin runs (not with
``nvidia.com/gpu.deploy.operands`` or ``…device-plugin: "false"``); a device
plugin that starts with a name the ConfigMap lacks fails ("specified config
... does not exist", NVIDIA/k8s-device-plugin@v0.20.0
cmd/config-manager/main.go:356-358) and the node's GPUs are not allocatable;
the mig-parted config its ``nvidia.com/mig.config`` names, where mig-manager
runs (NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577); and
the resources the pool's tiers request among those its config advertises
(``flags.migStrategy``, overridden by the cluster's ``mig.strategy``,
k8s-device-plugin api/config/v1/flags.go:32-33; ``renameByDefault``: the
suffix ``.shared``, api/config/v1/replicas.go:38-60).

A need that is unmet after the last step is *stranded* (it stays so until the
node is replaced, expires or is relabelled); one met again by a later step of
the same sync is a *window*. A root sync the engine refuses or holds
(``gpuplan.report.delivery``) applies no step.

Limits: the live cluster is not read (the old tree is taken as what runs); the
number of Karpenter nodes is not known; scheduled budgets are taken as allowing
drift outside their windows; Bottlerocket and DRA nodes are not checked for
resources (their own plugins advertise them).

Stage: report (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gpuplan.identity import (
    DEVICE_PLUGIN_CONFIG_LABEL as PLUGIN_LABEL,
    MIG_CONFIG_LABEL as MIG_LABEL,
    POOL_LABEL,
    ROOT_KUSTOMIZATION,
)

from gpuplan.placement.steps import prune_waves, sync_wave

Parsed = Mapping[Any, tuple[str, Any]]  # gpuplan.output.objdiff.tree_objects

BEFORE = "before"
OPERANDS = "nvidia.com/gpu.deploy.operands"
DEPLOY_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
DEPLOY_MIG_MANAGER = "nvidia.com/gpu.deploy.mig-manager"
CARRIED = (POOL_LABEL, PLUGIN_LABEL, MIG_LABEL)
FLUX_OPERATOR_DIR = "delivery/gpu-operator/"


@dataclass(frozen=True, order=True)
class NodeClass:
    pool: str
    kind: str  # "static" or "karpenter"
    generation: str = ""  # Karpenter: "old" / "new" when the template changes, else ""
    nodes: tuple[str, ...] = ()  # static: the nodes by name; Karpenter: not known

    @property
    def label(self) -> str:
        if self.kind == "static":
            return f"{len(self.nodes)} static node{'s' if len(self.nodes) != 1 else ''}"
        return f"{self.generation + ' ' if self.generation else ''}Karpenter nodes"


@dataclass(frozen=True)
class State:
    """One node class after one step."""

    present: bool  # the class exists and carries the pool's labels
    carries: Mapping[str, str]  # pool identity, device-plugin and mig-parted labels it has
    needs: Mapping[str, str]  # "device-plugin config" / "mig-parted config" -> name
    missing: tuple[str, ...] = ()  # the needs the ConfigMaps applied by then lack
    advertises: tuple[str, ...] = ()  # resources its device plugin advertises (() when not told)
    requested: tuple[str, ...] = ()  # resources the pool's tiers request that it does not advertise
    fate: str = ""  # what happens to the class in this step


@dataclass(frozen=True)
class Finding:
    kind: str  # "stranded", "window", "idle", "blocked"
    pool: str
    nodes: NodeClass | None
    steps: tuple[str, ...]
    message: str


@dataclass
class Transition:
    engine: str
    steps: list[str]  # BEFORE, then "wave N" (Argo CD) or "gpu-operator", "apply", "prune" (Flux)
    classes: list[NodeClass] = field(default_factory=list)
    states: dict[tuple[NodeClass, str], State] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    blocked: bool = False

    def at(self, pool: str, step: str, generation: str = "", node: str | None = None) -> State:
        """The state of pool ``pool``'s class (``generation`` for Karpenter; ``node``: the static
        class that holds that node, while a rollout splits the pool) after ``step``."""
        for c in self.classes:
            if c.pool == pool and c.generation == generation and (node is None or not c.nodes or node in c.nodes):
                return self.states[(c, step)]
        raise KeyError(f"{pool}/{generation}")

    def pool_classes(self, pool: str) -> list[NodeClass]:
        return [c for c in self.classes if c.pool == pool]


# --- reading the trees -------------------------------------------------------------------


def _meta(o: Any, *keys: str) -> Any:
    cur = o.get("metadata") if isinstance(o, dict) else None
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    return cur




def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _static_rules(objs: Mapping[Any, Any]) -> dict[str, tuple[Any, dict[str, dict[str, str]]]]:
    """pool -> (NodeFeatureRule key, node -> the labels its rule gives it) from the pools'
    NodeFeatureRules: one rule per pool, or while a change rolls through the pool
    (gpuplan.provisioning.rollout) one more per group of nodes held at old labels."""
    from gpuplan.provisioning.rollout import read_rules

    out: dict[str, tuple[Any, dict[str, dict[str, str]]]] = {}
    for key, obj in objs.items():
        if key[1] != "NodeFeatureRule":
            continue
        for rule in read_rules([obj]):
            nodes = out.setdefault(rule.labels[POOL_LABEL], (key, {}))[1]
            for n in rule.nodes:
                nodes.setdefault(n, dict(rule.labels))
    return out


def _frozen(labels: dict[str, str] | None) -> tuple | None:
    return None if labels is None else tuple(sorted(labels.items()))


def _nodepools(objs: Mapping[Any, Any]) -> dict[str, tuple[Any, Any]]:
    """pool -> (NodePool key, NodePool) of the tree."""
    out = {}
    for key, obj in objs.items():
        if key[1] == "NodePool" and key[0] == "karpenter.sh":
            labels = _dict(_dict(_dict(_dict(obj.get("spec")).get("template")).get("metadata")).get("labels"))
            out[str(labels.get(POOL_LABEL) or key[3])] = (key, obj)
    return out


def _template_labels(nodepool: Any) -> dict[str, str]:
    labels = _dict(_dict(_dict(_dict(nodepool.get("spec")).get("template")).get("metadata")).get("labels"))
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def drift_allowed(nodepool: Any) -> bool:
    """Whether Karpenter may replace the pool's drifted nodes: no budget that applies to
    ``Drifted`` (``reasons`` unset or naming it) and is always active (no ``schedule``)
    allows 0 nodes (karpenter@v1.14.1 pkg/apis/v1/nodepool.go:364-378, 382-402)."""
    budgets = _dict(_dict(nodepool.get("spec")).get("disruption")).get("budgets")
    if budgets is None:
        return True  # the default budget is nodes: 10% (pkg/apis/v1/nodepool.go:107-109)
    for b in budgets or ():
        b = _dict(b)
        reasons = b.get("reasons")
        if b.get("schedule") or (reasons is not None and "Drifted" not in reasons):
            continue
        if str(b.get("nodes", "")).strip() in ("0", "0%"):
            return False
    return True


def _expire_after(nodepool: Any) -> str:
    v = _dict(_dict(_dict(nodepool.get("spec")).get("template")).get("spec")).get("expireAfter")
    return str(v) if v is not None else "720h"


def _node_class_ref(nodepool: Any) -> tuple[Any, Any]:
    """(kind, name) of the NodePool's node class (EC2NodeClass, AKSNodeClass)."""
    ref = _dict(_dict(_dict(_dict(nodepool.get("spec")).get("template")).get("spec")).get("nodeClassRef"))
    return ref.get("kind"), ref.get("name")


# --- what a node advertises ---------------------------------------------------------------


def advertised(plugin_config: Any, mig_entries: Any, strategy: str) -> tuple[str, ...]:
    """Resources the device plugin advertises on a node with this config: ``nvidia.com/gpu``,
    or under ``mixed`` one ``nvidia.com/mig-<profile>`` per MIG profile of its mig-parted
    config (and ``nvidia.com/gpu`` for GPUs left MIG-disabled); a sharing entry with
    ``renameByDefault`` advertises its resource with the ``.shared`` suffix, and the plugin
    overrides any other ``rename`` either way (NVIDIA/k8s-device-plugin@v0.20.0
    api/config/v1/replicas.go:38-60)."""
    from gpuplan.resolve import GPU, SHARED_SUFFIX, mig_resource

    names: set[str] = set()
    entries = mig_entries if isinstance(mig_entries, list) else []
    if strategy == "mixed" and entries:
        for e in entries:
            e = _dict(e)
            devices = _dict(e.get("mig-devices"))
            if e.get("mig-enabled") and devices:
                names.update(n for p in devices if (n := mig_resource(str(p), "mixed")) is not None)
            else:
                names.add(GPU)
    else:
        names.add(GPU)
    sharing = _dict(_dict(plugin_config).get("sharing"))
    for mode in ("timeSlicing", "mps"):
        block = _dict(sharing.get(mode))
        resources = block.get("resources")  # a ConfigMap payload of the old tree: any shape
        for r in resources if isinstance(resources, list) else ():
            name = _dict(r).get("name")
            if isinstance(name, str) and name in names:
                names.discard(name)
                names.add(f"{name}{SHARED_SUFFIX}" if block.get("renameByDefault") else str(name))
    return tuple(sorted(names))


def tier_needs(rf: Any) -> dict[str, tuple[str, ...]]:
    """pool -> the resources its tiers' pods request (the resolved fleet's view)."""
    out: dict[str, set[str]] = {}
    for t in rf.fleet.spec.tiers:
        r = rf.tier_resource(t)
        if r is not None and t.pool:
            out.setdefault(t.pool, set()).add(r)
    return {p: tuple(sorted(v)) for p, v in out.items()}


def tier_resources(rf: Any) -> dict[str, str]:
    """tier -> the resource its pods request (the resolved fleet's view)."""
    return {t.name: r for t in rf.fleet.spec.tiers if (r := rf.tier_resource(t)) is not None}


# --- the configs of a tree ------------------------------------------------------------------


VALUES_PATH = "gpu-operator/values.yaml"


def tree_values(parsed: Parsed, objs: dict) -> dict[str, Any]:
    for key, (_, value) in parsed.items():
        if not key.kind and key.path == VALUES_PATH and isinstance(value, dict):
            return value
    for obj in objs.values():  # Flux: the values live in the HelmRelease
        if obj.get("kind") == "HelmRelease":
            return obj.get("spec", {}).get("values") or {}
    return {}


def tree_configs(objs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
    """(device-plugin configs by key, mig-parted configs by name) of a tree.
    The payloads go through the bounded reader: the old tree may be a pull
    request's (an alias bomb in a ConfigMap must not hang the report)."""
    from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP as PLUGIN_CM
    from gpuplan.identity import MIG_PARTED_CONFIG_KEY as CONFIG_KEY
    from gpuplan.identity import MIG_PARTED_CONFIGMAP as MIG_CM

    plugin: dict[str, Any] = {}
    mig: dict[str, Any] = {}
    for (kind, _, name), obj in objs.items():
        if kind != "ConfigMap":
            continue
        data = obj.get("data") or {}
        if not isinstance(data, dict):
            continue
        if name == PLUGIN_CM:
            loaded = {k: _payload(v, f"{name}/{k}") for k, v in data.items()}
            if all(v is not _UNREADABLE for v in loaded.values()):
                plugin = loaded
        elif name == MIG_CM and CONFIG_KEY in data:
            doc = _payload(data[CONFIG_KEY], f"{name}/{CONFIG_KEY}")
            if isinstance(doc, dict):  # else a hand-edited tree: compare by name only
                configs = doc.get("mig-configs")
                mig = configs if isinstance(configs, dict) else {}
    return plugin, mig


_UNREADABLE: Any = object()


def _payload(text: Any, file: str) -> Any:
    """One YAML document embedded in a ConfigMap (None when empty), or
    _UNREADABLE when it is not one the bounded reader accepts."""
    from gpuplan.output.objdiff import yaml_documents

    if not isinstance(text, str):
        return _UNREADABLE
    docs = yaml_documents(text, file)
    if docs is None or len(docs) > 1:
        return _UNREADABLE
    return docs[0] if docs else None


# --- the model ----------------------------------------------------------------------------


@dataclass
class _Tree:
    objs: dict[Any, Any]  # (group, kind, namespace, name) -> object
    root: set[Any]  # keys of the root kustomization's objects
    operator: set[Any]  # keys of the operator's delivery objects (Flux: its Kustomization's path)
    plugin: dict[str, Any]
    mig: dict[str, Any]
    strategy: str
    values: Any = None


def _tree(parsed: Parsed) -> _Tree:
    objs: dict[Any, Any] = {}
    root_files: set[str] = set()
    for key, (path, value) in parsed.items():
        if path == ROOT_KUSTOMIZATION and isinstance(value, dict) and value.get("kind") == "Kustomization":
            res = value.get("resources")
            root_files = {r for r in res if isinstance(r, str)} if isinstance(res, list) else set()
    root, operator = set(), set()
    for key, (path, value) in parsed.items():
        if not key.kind or not isinstance(value, dict):
            continue
        k = (key.group, key.kind, key.namespace, key.name)
        objs[k] = value
        if path in root_files:
            root.add(k)
        if path.startswith(FLUX_OPERATOR_DIR):
            operator.add(k)
    by_kind = {(k[1], k[2], k[3]): v for k, v in objs.items()}
    plugin, mig = tree_configs(by_kind)
    values = tree_values(parsed, by_kind)
    strategy = _dict(values.get("mig")).get("strategy")
    return _Tree(objs, root, operator, plugin, mig, strategy if isinstance(strategy, str) else "", values)


def _schedule(engine: str, a: _Tree, b: _Tree) -> tuple[list[str], dict[Any, str], dict[Any, str]]:
    """(steps, the step of each applied object, the step of each pruned object)."""
    applied, pruned = {}, {}
    changed = sorted(k for k in b.root if a.objs.get(k) != b.objs[k])
    gone = sorted(k for k in a.root if k not in b.objs)
    if engine == "flux":
        op = sorted(k for k in b.operator if a.objs.get(k) != b.objs[k])
        for k in op:
            applied[k] = "gpu-operator"
        for k in changed:
            applied[k] = "apply"
        for k in gone:
            pruned[k] = "prune"
        steps = [s for s in ("gpu-operator", "apply", "prune") if s in set(applied.values()) | set(pruned.values())]
        return [BEFORE, *steps], applied, pruned
    for k in changed:
        applied[k] = sync_wave(b.objs[k])
    # prunes in the reverse order of their waves
    swap = prune_waves(sync_wave(a.objs[k]) for k in gone)
    for k in gone:
        pruned[k] = swap[sync_wave(a.objs[k])]
    # the operator's Application syncs its chart and values (gpu-operator/values.yaml) on its own;
    # a values change counts from the wave of that Application on
    if a.values != b.values:
        for k in b.root:
            if k[1] == "Application" and k[3].endswith("-gpu-operator"):
                applied[k] = sync_wave(b.objs[k])
    order = sorted(set(applied.values()) | set(pruned.values()))
    name = {w: f"wave {w}" for w in order}
    return [BEFORE, *name.values()], {k: name[w] for k, w in applied.items()}, {k: name[w] for k, w in pruned.items()}


def _relabel(old_rule: Any, new_rule: Any) -> str:
    """What a static class goes through when nfd-master applies its new rule: mig-manager
    repartitions a node whose ``nvidia.com/mig.config`` changes, draining its GPU pods first
    (NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577); config-manager restarts
    the device plugin on a changed ``nvidia.com/device-plugin.config``
    (NVIDIA/k8s-device-plugin@v0.20.0 cmd/config-manager/main.go:272-278)."""
    if new_rule is None:
        return "released: nfd-master removes the pool's labels"
    was = old_rule[1] if old_rule else {}
    if was.get(MIG_LABEL) != new_rule[1].get(MIG_LABEL) and was:
        return "relabelled by nfd-master; mig-manager drains and repartitions"
    if was.get(PLUGIN_LABEL) != new_rule[1].get(PLUGIN_LABEL) and was:
        return "relabelled by nfd-master; the device plugin restarts"
    return "relabelled by nfd-master"


def _at(steps: list[str], when: str | None, step: str) -> bool:
    """Whether an event at step ``when`` has happened by the end of ``step``."""
    return when is not None and steps.index(when) <= steps.index(step)


def transition(old: Parsed, new: Parsed, needs: Mapping[str, Iterable[str]] | None = None) -> Transition:
    """The wave-by-wave model of going from tree ``old`` (live) to tree ``new``.
    ``needs``: pool -> the resources its tiers request (:func:`tier_needs`), when known."""
    from gpuplan.report.delivery import outcome

    d = outcome(old, new)
    engine = d.engine or "argocd"
    a, b = _tree(old), _tree(new)
    steps, applied, pruned = _schedule(engine, a, b)
    t = Transition(engine, steps)
    if d.blocked:  # the root sync fails or holds before anything applies
        t.blocked = True
        t.steps = steps = [BEFORE]
        applied, pruned = {}, {}
        t.findings.append(Finding(
            "blocked", "", None, (BEFORE,),
            "the root sync applies nothing of this change until the hand step is done, so no node gets it"))

    # the ConfigMaps and the cluster's MIG strategy in force after each step
    def _cm_step(tree_key_pred) -> str | None:
        for k, s in list(applied.items()) + list(pruned.items()):
            if tree_key_pred(k):
                return s
        return None

    from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP, MIG_PARTED_CONFIGMAP

    plugin_at = _cm_step(lambda k: k[1] == "ConfigMap" and k[3] == DEVICE_PLUGIN_CONFIGMAP)
    mig_at = _cm_step(lambda k: k[1] == "ConfigMap" and k[3] == MIG_PARTED_CONFIGMAP)
    operator_at = _cm_step(lambda k: (k[1] == "Application" and k[3].endswith("-gpu-operator"))
                           or k in b.operator or k in a.operator)

    def configs(step: str) -> tuple[dict, dict, str]:
        return (b.plugin if _at(steps, plugin_at, step) else a.plugin,
                b.mig if _at(steps, mig_at, step) else a.mig,
                b.strategy if _at(steps, operator_at, step) else a.strategy)

    wants = {p: tuple(sorted(set(v))) for p, v in (needs or {}).items()}
    classes: list[tuple[NodeClass, Any]] = []  # (class, labels-at(step) function)

    sa, sb = _static_rules(a.objs), _static_rules(b.objs)
    for pool in sorted(set(sa) | set(sb)):
        key_a, na = sa.get(pool, (None, {}))
        key_b, nb = sb.get(pool, (None, {}))
        # one class per group of nodes with the same labels before and after (a rollout holds some)
        groups: dict[tuple, list[str]] = {}
        for n in sorted(set(na) | set(nb)):
            groups.setdefault((_frozen(na.get(n)), _frozen(nb.get(n))), []).append(n)
        for (fa, fb), members in groups.items():
            old_rule = (key_a, dict(fa), tuple(members)) if fa is not None else None
            new_rule = (key_b, dict(fb), tuple(members)) if fb is not None else None
            when = applied.get(key_b) if new_rule else pruned.get(key_a)

            def labels(step, old_rule=old_rule, new_rule=new_rule, when=when):
                if old_rule and new_rule and old_rule[1] == new_rule[1]:
                    return new_rule[1], ""
                if _at(steps, when, step):
                    return (new_rule[1] if new_rule else None), (_relabel(old_rule, new_rule) if step == when else "")
                return (old_rule[1] if old_rule else None), ""
            classes.append((NodeClass(pool, "static", "", tuple(members)), labels))

    ka, kb = _nodepools(a.objs), _nodepools(b.objs)
    for pool in sorted(set(ka) | set(kb)):
        old_np, new_np = ka.get(pool), kb.get(pool)
        la = _template_labels(old_np[1]) if old_np else None
        lb = _template_labels(new_np[1]) if new_np else None
        if old_np and new_np:
            ref_a, ref_b = _node_class_ref(old_np[1]), _node_class_ref(new_np[1])
            nc_a = next((v for k, v in a.objs.items() if (k[1], k[3]) == ref_a), None)
            nc_b = next((v for k, v in b.objs.items() if (k[1], k[3]) == ref_b), None)
            drift = (_dict(old_np[1].get("spec")).get("template") != _dict(new_np[1].get("spec")).get("template")
                     or _dict(nc_a).get("spec") != _dict(nc_b).get("spec"))
        else:
            drift = False
        np_at = applied.get(new_np[0]) if new_np else None
        if old_np and new_np and not drift:
            classes.append((NodeClass(pool, "karpenter"), lambda step, lb=lb: (lb, "")))
            continue
        if old_np:
            gone_at = pruned.get(old_np[0]) if not new_np else None
            if new_np:
                fate = ("replaced by drift (within the pool's disruption budgets)" if drift_allowed(new_np[1]) else
                        f"kept, drift blocked (budget 0 for Drifted), until expireAfter {_expire_after(old_np[1])}")
            else:
                fate = "terminated with its NodePool"

            def old_labels(step, la=la, np_at=np_at, gone_at=gone_at, fate=fate):
                if gone_at is not None and _at(steps, gone_at, step):
                    return None, fate if step == gone_at else ""
                return la, fate if step == np_at else ""
            classes.append((NodeClass(pool, "karpenter", "old" if new_np else ""), old_labels))
        if new_np:
            def new_labels(step, lb=lb, np_at=np_at):
                return (lb, "launched on demand" if step == np_at else "") if _at(steps, np_at, step) else (None, "")
            classes.append((NodeClass(pool, "karpenter", "new" if old_np else ""), new_labels))

    for cls, labels_at in classes:
        t.classes.append(cls)
        for step in steps:
            labels, fate = labels_at(step)
            plugin, mig, strategy = configs(step)
            t.states[(cls, step)] = _state(labels, fate, plugin, mig, strategy, wants.get(cls.pool))
    t.findings += _findings(t)
    return t


def _state(labels: dict[str, str] | None, fate: str, plugin: dict, mig: dict, strategy: str,
           wants: tuple[str, ...] | None) -> State:
    if not labels:
        return State(False, {}, {}, fate=fate)
    carries = {k: labels[k] for k in CARRIED if k in labels}
    operands = labels.get(OPERANDS) != "false"
    needs, missing = {}, []
    p, m = labels.get(PLUGIN_LABEL), labels.get(MIG_LABEL)
    runs_plugin = operands and labels.get(DEPLOY_PLUGIN) != "false"
    if p is not None and runs_plugin:
        needs["device-plugin config"] = p
        if p not in plugin:
            missing.append(f"device-plugin config {p}")
    if m is not None and operands and labels.get(DEPLOY_MIG_MANAGER) != "false":
        needs["mig-parted config"] = m
        if m not in mig:
            missing.append(f"mig-parted config {m}")
    ads: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()
    # a MIG node's resources come from its layout: unknown when its mig-parted config is not in the tree
    if runs_plugin and p is not None and p in plugin and (m is None or m in mig):
        strat = strategy or str(_dict(_dict(plugin[p]).get("flags")).get("migStrategy") or "none")
        ads = advertised(plugin[p], mig.get(m) if m else None, strat)
        if wants:
            requested = tuple(r for r in wants if r not in ads)
    return State(True, carries, needs, tuple(missing), ads, requested, fate)


def _until(t: Transition, cls: NodeClass) -> str:
    """Until when a class keeps what it carries: relabelled (static), or its fate (Karpenter)."""
    if cls.kind == "static":
        return "relabelled"
    fates = [t.states[(cls, s)].fate for s in t.steps if t.states[(cls, s)].fate]
    if fates and fates[0].startswith("kept"):
        return f"they expire (expireAfter {fates[0].rsplit('expireAfter ', 1)[-1]}; the pool's budget blocks drift)"
    return "replaced"


def _findings(t: Transition) -> list[Finding]:
    out = []
    last = t.steps[-1]
    for cls in t.classes:
        bad = [s for s in t.steps if t.states[(cls, s)].present and t.states[(cls, s)].missing]
        final = t.states[(cls, last)]
        if final.present and final.missing:
            out.append(Finding(
                "stranded", cls.pool, cls, tuple(bad),
                f"{cls.label} need {', '.join(final.missing)}, which the new tree no longer has: their device "
                "plugin or mig-manager, on its next start (a DaemonSet roll, a reboot), finds no config of that "
                f"name and their GPUs are not allocatable until {_until(t, cls)}"))
        elif bad:
            out.append(Finding(
                "window", cls.pool, cls, tuple(bad),
                f"{cls.label} need {', '.join(t.states[(cls, bad[0])].missing)} during {', '.join(bad)}: a device "
                "plugin or mig-manager that starts then finds no config of that name until the next step relabels "
                "them"))
        if final.present and final.requested:
            out.append(Finding(
                "idle", cls.pool, cls, (last,),
                f"{cls.label} advertise {', '.join(final.advertises) or 'nothing'}, but the pool's tiers request "
                f"{', '.join(final.requested)}: no pod of the pool lands there, their GPUs sit idle until "
                f"{_until(t, cls)}"))
    return out
