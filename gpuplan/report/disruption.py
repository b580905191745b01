"""What a change to the generated tree will do to running workloads, for review.

`gpuplan diff` (the tree on disk against the spec) and `gpuplan plan --base OLD`
(two specs) list these first, before any other change: the objects differ in
many harmless ways, and a reviewer must not have to find the one that deletes a
namespace or repartitions a node among them. Computed from the two trees of
objects — what the controllers will actually see — not from the specs:

- **hand-step**: something a person must do, at a stated moment, or the GitOps
  engine stops applying the tree (``gpuplan.report.delivery`` models what the
  engine applies, refuses, prunes, keeps or holds): a changed
  ``delivery/bootstrap.yaml`` (applied by hand, nothing syncs it), a namespace
  that the person's own AppProject (``gitops.project``) must admit, an object
  Argo CD refuses (argoproj/argo-cd@v3.5.1 controller/sync.go:647-669: one
  refused object fails the whole operation), a prune held for confirmation.
  gpuplan's own AppProject arrives through its own Application, so a new or
  removed namespace is no hand step (#27);

- **destructive**: a Namespace leaves the tree. Deleting it deletes every
  object in it. gpuplan marks Namespaces so that neither Argo CD nor Flux
  deletes one on its own and neither holds a sync for it
  (gpuplan.lower.common.PROTECTED_KINDS), so this is the change a person must
  carry out by hand;
- **stranded**: after the sync, a class of a pool's nodes names a device-plugin or
  mig-parted config the new ConfigMaps lack (its GPUs are not allocatable once its
  device plugin or mig-manager restarts), or advertises none of what the pool's tiers
  now request: the wave-by-wave model (``gpuplan.report.transition``) finds it;
- **revoked**: a namespace keeps a tier's running pods after the change takes their grant
  back (the tier removed, the namespace no longer granted it, or its quota lowered): a
  ResourceQuota is judged only when a pod is created or updated, and the quota controller
  only recounts ``status.used`` (kubernetes/kubernetes@v1.36.3
  staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/admission.go
  ``NewResourceQuota``: ``admission.NewHandler(admission.Create, admission.Update)``); a
  ValidatingAdmissionPolicy judges only the requests it matches, never objects already
  stored. So those pods keep their GPUs, up to the old grant, until someone deletes them:
  GPUs the new plan hands to nobody. Read from the two trees: the namespaces' tier labels
  (``tier.gpuplan.dev/<tier>``), the tiers' PriorityClasses and the quotas that select them;
- **drain**: a node's ``nvidia.com/mig.config`` changes: mig-manager
  repartitions its GPUs (NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/
  main.go:572-577) and cannot while GPU pods use them; a new NoExecute taint
  on static nodes evicts the pods that do not tolerate it;
- **reconfigure**: a node's ``nvidia.com/device-plugin.config`` changes: the
  device plugin restarts with the new sharing config (NVIDIA/k8s-device-plugin@
  v0.20.0 cmd/config-manager/main.go:272-278); running pods keep their devices;
- **replace**: a Karpenter NodePool's template or its EC2NodeClass changes:
  Karpenter marks the pool's nodes drifted and replaces them, draining their
  pods, within the pool's disruption budgets; a PriorityClass whose ``value``
  or ``preemptionPolicy`` changes is deleted and recreated (immutable fields);
- **upgrade**: the managed driver, the toolkit or CDI changes: the GPU Operator
  rolls it onto every node it manages, evicting GPU pods.

Entries are listed by risk (``SEVERITY_ORDER``: hand-step, destructive, stranded,
revoked, replace, drain, upgrade, reconfigure), and the renderers open with one line per pool
(:func:`by_pool`: its nodes replaced, drained or reconfigured, with counts).

Stage: report (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from gpuplan.identity import POOL_LABEL
from gpuplan.provisioning.pools import read_template, template_changes
from gpuplan.report.transition import transition, tree_configs as _configs, tree_values as _values

# By risk (#27 Build 6): what a person must do, then what deletes, then nodes stranded (a
# config they name is gone, or they advertise nothing their tiers request: the wave-by-wave
# model, gpuplan.report.transition), then nodes replaced, then drains, then the rolling
# upgrades, then reconfigurations that keep running pods.
SEVERITY_ORDER = ("hand-step", "destructive", "stranded", "revoked", "replace", "drain", "upgrade", "reconfigure")
# What a change without entries of each kind does not do: the all-clear line says every one
NONE_OF: dict[str, str] = {
    "hand-step": "no hand step", "destructive": "no namespace deleted", "stranded": "no node left without its config",
    "revoked": "no grant taken back from pods that may be running", "replace": "no node or PriorityClass replaced",
    "drain": "no node drained", "upgrade": "no driver or runtime rolled", "reconfigure": "no node reconfigured",
}
# The Karpenter node classes whose change drifts every node of the NodePool of the same name:
# the spec fields that do (None: all of them).
NODE_CLASS_DRIFT: dict[str, tuple[str, ...] | None] = {
    "EC2NodeClass": ("amiSelectorTerms", "userData", "blockDeviceMappings", "role"),
    "AKSNodeClass": None,
}
MIG_LABEL = "nvidia.com/mig.config"
PLUGIN_LABEL = "nvidia.com/device-plugin.config"


@dataclass(frozen=True, order=True)
class Disruption:
    severity: str  # one of SEVERITY_ORDER
    subject: str  # "Namespace vision-train", "node gpu-a100-05", "NodePool mig-a100", ...
    message: str
    # (pool, what the change does to its nodes) for the per-pool lines (:func:`by_pool`): a driver
    # change's node-level effect
    nodes: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # a static pool's rollout: the nodes it holds for later steps (:func:`by_pool`)
    held: int = field(default=0, compare=False)

    @property
    def rank(self) -> int:
        return SEVERITY_ORDER.index(self.severity)


Parsed = Mapping[Any, tuple[str, Any]]  # gpuplan.output.objdiff.tree_objects


def _objects(parsed: Parsed) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(kind, namespace, name) -> object, for the Kubernetes objects of a tree."""
    out = {}
    for key, (_, value) in parsed.items():
        if key.kind and isinstance(value, dict):
            out[(key.kind, key.namespace, key.name)] = value
    return out


def _group_labels(objs: dict, doc: dict[str, Any]) -> dict[str, Any]:
    """The node labels a node-group template gives its nodes: the template read back by its
    back-end, or for a MachineDeployment the KubeadmConfigTemplate its ``bootstrap.configRef``
    names (in ``objs``, the same tree)."""
    read = read_template(doc)
    if read is None and doc.get("kind") == "MachineDeployment":
        ref = (((((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("bootstrap") or {})
               .get("configRef") or {})
        ns = (doc.get("metadata") or {}).get("namespace") or ""
        kct = objs.get(("KubeadmConfigTemplate", ns, ref.get("name")))
        read = read_template(kct) if isinstance(kct, dict) else None
    return read[1] if read else {}


def _static_nodes(objs: dict) -> dict[str, tuple[str, dict[str, str], list[dict]]]:
    """node -> (pool, labels, taints) from the pools' NodeFeatureRules."""
    out = {}
    for (kind, _, name), obj in objs.items():
        if kind != "NodeFeatureRule":
            continue
        for rule in obj.get("spec", {}).get("rules", []):
            pool = rule.get("labels", {}).get("gpuplan.dev/pool", name)
            for feat in rule.get("matchFeatures", []):
                nodes = feat.get("matchExpressions", {}).get("nodename", {}).get("value", [])
                for node in nodes:
                    out[node] = (pool, rule.get("labels", {}), rule.get("taints", []))
    return out


def _rollouts(on: dict, nn: dict, b: dict) -> list[Disruption]:
    """A hand step per static pool whose change rolls (gpuplan.provisioning.rollout): the new
    tree's NodeFeatureRule holds some nodes at their old layout or sharing in rules of their own,
    and ``gpuplan build --advance POOL`` moves the next step."""
    from gpuplan.provisioning.rollout import Step, held_rule_prefix, read_rules, step_text, target_rule_name

    def rolled(labels) -> tuple[tuple[str, str], ...]:
        return tuple((k, v) for k, v in sorted(labels.items()) if k in (MIG_LABEL, PLUGIN_LABEL))

    out = []
    for (kind, _, name), obj in sorted(b.items()):
        if kind != "NodeFeatureRule":
            continue
        pool = ((obj.get("metadata") or {}).get("labels") or {}).get("gpuplan.dev/pool", name)
        rules = read_rules([obj], pool)
        held = [(rolled(r.labels), r.nodes) for r in rules if r.name.startswith(held_rule_prefix(pool))]
        if not held:
            continue
        target_rule = next((r for r in rules if r.name == target_rule_name(pool)), None)
        target = target_rule.nodes if target_rule else ()
        moved = tuple(n for n in target if n in on and n in nn and rolled(on[n][1]) != rolled(nn[n][1]))
        step = Step(target, tuple(held), moved, len(moved), rolled(target_rule.labels) if target_rule else ())
        out.append(Disruption("hand-step", f"pool {pool} rollout", step_text(pool, step, "FLEET"),
                              held=len(step.held_nodes)))
    return out


def _same(old_cfgs: dict, new_cfgs: dict, old_name: str | None, new_name: str | None) -> bool:
    return old_name in old_cfgs and new_name in new_cfgs and old_cfgs[old_name] == new_cfgs[new_name]


def _taint(t: dict) -> str:
    return f"{t['key']}={t['value']}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}"


def _template(nodepool: dict) -> dict:
    return nodepool.get("spec", {}).get("template", {})


def _drift_note(nodepool: dict) -> str:
    budgets = nodepool.get("spec", {}).get("disruption", {}).get("budgets", [])
    if any(b.get("nodes") == "0" and "Drifted" in b.get("reasons", []) for b in budgets):
        return ("drift is blocked for this pool (budget 0 for Drifted): nodes change only as they expire "
                "or their NodeClaims are deleted")
    return "Karpenter drains and replaces them within the pool's disruption budgets"


def disruptions(old: Mapping[str, bytes], new: Mapping[str, bytes],
                needs: Mapping[str, Any] | None = None, *, old_tree: str | None = None,
                tiers: Mapping[str, str] | None = None) -> list[Disruption]:
    """The disruptive effects of going from tree ``old`` to tree ``new``, most severe first.
    ``needs``: pool -> the resources its tiers request (``transition.tier_needs``), when known;
    ``tiers``: tier -> the resource its pods request (``transition.tier_resources``), when known.
    Raises ``gpuplan.report.treeshape.TreeShapeError`` (GP839) when ``old`` has objects of a
    shape no API server admits (``old_tree``: its directory, for the diagnostics)."""
    from gpuplan.output.objdiff import tree_objects

    return disruptions_of(tree_objects(old), tree_objects(new), needs, old_tree=old_tree, tiers=tiers)


def disruptions_of(old: Parsed, new: Parsed, needs: Mapping[str, Any] | None = None, *,
                   old_tree: str | None = None, tiers: Mapping[str, str] | None = None) -> list[Disruption]:
    """:func:`disruptions` of two trees already parsed by ``objdiff.tree_objects``
    (``gpuplan diff`` parses each tree once for both reports)."""
    from gpuplan.report.treeshape import require

    # the old tree is the cluster's present state as a pull request may have edited it: every
    # reader below takes the types gpuplan wrote, so other types stop here, with the file named
    require(old, tree=old_tree)
    a, b = _objects(old), _objects(new)
    out: list[Disruption] = []

    d = _delivery(old, new)
    out += _delivery_steps(d)
    recreated = {(r[1], r[2], r[3]): why for r, why in d.recreated}
    out += _stranded(transition(old, new, needs))
    out += revoked(a, b, tiers)
    held, kept_by_argo = set(), set()
    if d.engine == "argocd":
        held = {r[3] for r in d.held if r[1] == "Namespace"}
        kept_by_argo = {r[3] for r in d.kept if r[1] == "Namespace"}
    for kind, ns, name in sorted(set(a) - set(b)):
        if kind == "Namespace":
            if name in held:
                what = ("the live Namespace still carries Prune=confirm (written by an older gpuplan), so Argo CD "
                        "holds the root sync on its prune: NO later change applies until someone confirms the "
                        "prune in Argo CD (it deletes the namespace) or deletes it by hand (`kubectl delete "
                        "namespace " + name + "`) (gitops-engine sync_context.go:458-475,1616-1624; argo-cd "
                        "controller/appcontroller.go:2336-2338)")
            elif name in kept_by_argo:
                what = ("Argo CD skips its prune (Prune=false) and the sync goes on, nothing is held; it stays "
                        "with everything in it: delete it by hand once it is empty (`kubectl delete namespace "
                        + name + "`), or keep it")
            else:
                what = ("gpuplan keeps the GitOps engine from deleting it on its own (Flux never prunes it): "
                        "delete it by hand once it is empty, or keep it")
            out.append(Disruption(
                "destructive", f"Namespace {name}",
                "leaves the tree: deleting it deletes every object in it (workloads, volumes' claims, secrets). "
                + what))
        elif kind == "PriorityClass":
            out.append(Disruption(
                "replace", f"PriorityClass {name}",
                "leaves the tree: new pods that name it are rejected at admission"))

    (op_, om), (np_, nm) = _configs(a), _configs(b)
    for key in sorted(set(a) & set(b)):
        kind, ns, name = key
        o, n = a[key], b[key]
        if kind == "PriorityClass":
            ov, nv = (o.get("value"), o.get("preemptionPolicy")), (n.get("value"), n.get("preemptionPolicy"))
            why = recreated.get((kind, ns, name))
            if ov != nv or why:
                what = (f"value/preemptionPolicy {ov[0]}/{ov[1]} -> {nv[0]}/{nv[1]} (immutable)" if ov != nv
                        else "metadata only")
                how = (f"recreated: {why}" if why else
                       "no engine recreates it (no Replace=true or force: enabled): the update is refused until "
                       "someone deletes the class")
                out.append(Disruption("replace", f"PriorityClass {name}", f"{what}; {how}. {_CLASS_RECREATED}"))
        elif kind == "NodePool":
            ot, nt = _template(o), _template(n)
            if ot != nt:
                what = []
                ol, nl = ot.get("metadata", {}).get("labels", {}), nt.get("metadata", {}).get("labels", {})
                for label in (MIG_LABEL, PLUGIN_LABEL):
                    if ol.get(label) != nl.get(label):
                        what.append(f"{label} {ol.get(label)} -> {nl.get(label)}")
                if ot.get("spec", {}).get("taints") != nt.get("spec", {}).get("taints"):
                    what.append("taints")
                if not what:
                    what.append("node template")
                note = _drift_note(n)
                # Old nodes keep their old config names until replaced (Karpenter never relabels a
                # node): the build keeps an old device-plugin name in the new ConfigMap
                # (gpuplan.identity.kept_plugin_configs); a name it no longer carries strands them.
                dropped = [x for x, new_cfgs in ((MIG_LABEL, nm), (PLUGIN_LABEL, np_))
                           if ol.get(x) != nl.get(x) and ol.get(x) is not None and ol.get(x) not in new_cfgs]
                kept = [f"{x}={ol.get(x)}" for x, new_cfgs in ((PLUGIN_LABEL, np_), (MIG_LABEL, nm))
                        if ol.get(x) != nl.get(x) and ol.get(x) in new_cfgs]
                if kept:
                    note += (f"; old nodes keep {', '.join(kept)}, which the device-plugin and mig-parted "
                             "ConfigMaps keep for them until `gpuplan build --retire-config NAME` once no node "
                             "carries it")
                if dropped and "blocked" in _drift_note(n):
                    note += ("; until then an old node whose device plugin or mig-manager restarts finds no "
                             f"config of its old name ({', '.join(dropped)}) and stops advertising GPUs: roll the "
                             "pool (delete its NodeClaims) once its jobs are done")
                out.append(Disruption(
                    "replace", f"NodePool {name}",
                    f"{'; '.join(what)}: every node of the pool drifts; {note}"))
        elif kind in NODE_CLASS_DRIFT:
            # EC2NodeClass: the fields gpuplan writes that drift a node; AKSNodeClass: any spec field
            # but tags, hashed whole (karpenter-provider-azure v1.14.2 pkg/apis/v1beta1/aksnodeclass.go:95,697-698;
            # pkg/cloudprovider/drift.go:90-111)
            os_, ns_ = o.get("spec", {}), n.get("spec", {})
            changed = [f for f in (NODE_CLASS_DRIFT[kind] or sorted(set(os_) | set(ns_) - {"tags"}))
                       if os_.get(f) != ns_.get(f)]
            if changed:
                pool = b.get(("NodePool", "", name))
                out.append(Disruption(
                    "replace", f"{kind} {name}",
                    f"{', '.join(changed)} change: the nodes of pool {name} drift; "
                    + (_drift_note(pool) if pool else "Karpenter replaces them")))
        else:  # a node group's template (GKE ContainerNodePool, ...): what its platform does
            read = read_template(n)
            pool_of = read[0] if read else ((n.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
            subject = f"{kind} {name}" + (f" (pool {pool_of})" if pool_of else "")
            changes = template_changes(o, n)
            if changes:
                # the old nodes carry the old template's config names until they are replaced or
                # relabelled; the build keeps them (gpuplan.identity.kept_plugin_configs)
                ol, nl = _group_labels(a, o), _group_labels(b, n)
                kept = [f"{x}={ol.get(x)}" for x, new_cfgs in ((PLUGIN_LABEL, np_), (MIG_LABEL, nm))
                        if ol.get(x) != nl.get(x) and ol.get(x) in new_cfgs]
                if kept:
                    sev, msg = changes[0]
                    changes[0] = (sev, msg + f"; until they are replaced or relabelled, old nodes carry "
                                  f"{', '.join(kept)}, which the device-plugin and mig-parted ConfigMaps keep "
                                  "for them")
            out += [Disruption(sev, subject, msg) for sev, msg in changes]

    on, nn = _static_nodes(a), _static_nodes(b)
    for node in sorted(set(on) & set(nn)):
        (_, ol, ot), (pool, nl, nt) = on[node], nn[node]
        o_mig, n_mig = ol.get(MIG_LABEL), nl.get(MIG_LABEL)
        o_dp, n_dp = ol.get(PLUGIN_LABEL), nl.get(PLUGIN_LABEL)
        if o_mig != n_mig and _same(om, nm, o_mig, n_mig):
            # mig-manager asserts the selected config first and leaves GPUs that
            # already have it alone (mig-parted@v0.15.0 pkg/mig/reconfigure/reconfigure.go:142-146)
            out.append(Disruption(
                "reconfigure", f"node {node} (pool {pool})",
                f"{MIG_LABEL} {o_mig} -> {n_mig}, the same layout under a new name: mig-manager finds it "
                "applied and leaves the GPUs as they are"))
        elif o_mig != n_mig:
            out.append(Disruption(
                "drain", f"node {node} (pool {pool})",
                f"{MIG_LABEL} {o_mig} -> {n_mig}: mig-manager repartitions its GPUs; "
                "drain its GPU pods first (it cannot change GPUs in use)"))
        elif o_dp != n_dp:
            same = _same(op_, np_, o_dp, n_dp)
            out.append(Disruption(
                "reconfigure", f"node {node} (pool {pool})",
                f"{PLUGIN_LABEL} {o_dp} -> {n_dp}" + (
                    ", the same config under a new name: the device plugin restarts once" if same else
                    ": the device plugin restarts with the new sharing config; running GPU pods keep their "
                    "devices, drain them if the advertised resources shrink")))
        added = [t for t in nt if t not in ot and t.get("effect") == "NoExecute"]
        if added:
            out.append(Disruption(
                "drain", f"node {node} (pool {pool})",
                f"new NoExecute taint {', '.join(map(_taint, added))}: pods that do not tolerate it are evicted"))

    out += _rollouts(on, nn, b)

    ov, nv = _values(old, a), _values(new, b)
    od, nd = ov.get("driver", {}), nv.get("driver", {})
    rolled, skipped = _driver_pools(b)
    crd = (nd.get("nvidiaDriverCRD") or {}).get("enabled")
    if od and nd and od.get("enabled") and nd.get("enabled") and not crd and (
            od.get("version"), od.get("usePrecompiled")) != (nd.get("version"), nd.get("usePrecompiled")):
        policy = nd.get("upgradePolicy", {})
        out.append(Disruption(
            "upgrade", "GPU driver",
            f"{od.get('version') or 'chart default'} -> {nd.get('version') or 'chart default'} on the nodes with "
            f"the operator's driver: {_upgrade_how(policy, sorted(rolled), sorted(skipped))}",
            _rolled_nodes(policy, sorted(rolled), sorted(skipped))))
    out += _nvidia_drivers(a, b, recreated, rolled, skipped)
    handled = {"PriorityClass", "NVIDIADriver"}
    for (kind, ns, name), why in sorted(recreated.items()):
        if kind not in handled:
            out.append(Disruption("replace", f"{kind} {f'{ns}/' if ns else ''}{name}", f"recreated: {why}"))
    for part, label in (("toolkit", "container toolkit"), ("cdi", "CDI")):
        if ov and nv and ov.get(part, {}).get("enabled") != nv.get(part, {}).get("enabled"):
            out.append(Disruption(
                "upgrade", label,
                f"enabled {ov.get(part, {}).get('enabled')} -> {nv.get(part, {}).get('enabled')}: the container "
                "runtime configuration of every GPU node changes; GPU pods restart"))
    return sorted(out, key=lambda d: (d.rank, d.subject, d.message))


# A recreated PriorityClass (kubernetes/kubernetes@v1.36.3 plugin/pkg/admission/priority/admission.go):
# while it is gone a pod naming it is refused (168-172); a pod's priority value is set when it is
# created and kept on its updates (156-180), so running pods keep the old value.
_CLASS_RECREATED = ("Until it exists again, new pods that name it are refused; running pods keep the priority value "
                    "they were admitted with until they are recreated")
# An NVIDIADriver deleted and created (or a pool's moved to a new one): the new object's driver
# DaemonSet has a new name (NVIDIA/gpu-operator@v26.7.0 internal/state/driver.go:500-533 hashes the
# object's UID; the old DaemonSet is owned by the old object, internal/state/state_skel.go:106, and
# goes with it), and a new DaemonSet starts its pod on every node it selects together: its
# ``OnDelete`` strategy and the upgrade controller pace only updates of existing pods
# (manifests/state-driver/0500_daemonset.yaml:37-38; controllers/upgrade_controller.go:199-262).
REINSTALL_AT_ONCE = ("the driver is reinstalled on every node of the pool at once: the new object's driver DaemonSet "
                     "starts a driver pod on all of them together, which the upgrade controller does not pace "
                     "(neither maxParallelUpgrades nor the hold on job pools applies), and the pool's GPU pods lose "
                     "their driver meanwhile")


AT_ONCE = "driver reinstalled on every node at once"  # the per-pool line of REINSTALL_AT_ONCE


def _driver_of(obj: dict, name: str) -> str:
    return ((obj.get("spec") or {}).get("nodeSelector") or {}).get(POOL_LABEL, name)


def _driver_shape(spec: dict) -> str:
    return f"{spec.get('version') or 'default'} " + ("precompiled" if spec.get("usePrecompiled") else "compiled")


def _nvidia_drivers(a: dict, b: dict, recreated: Mapping, rolled: set[str], skipped: set[str]) -> list[Disruption]:
    """What a change does to each static pool's NVIDIADriver (matched by the pool it selects):
    updated in place, the upgrade controller rolls the new driver node by node; recreated, or
    moved to an object of another name (compiled <-> precompiled: the name carries the immutable
    ``usePrecompiled``, gpuplan.identity.nvidia_driver_name), every node at once."""
    from gpuplan.report.delivery import immutable_changes

    def by_pool(objs: dict) -> dict[str, tuple[str, dict]]:
        return {_driver_of(o, name): (name, o) for (kind, _, name), o in sorted(objs.items()) if kind == "NVIDIADriver"}

    out = []
    olds, news = by_pool(a), by_pool(b)
    for pool in sorted(set(olds) & set(news)):
        (on, oo), (nn, no) = olds[pool], news[pool]
        os_, ns_ = oo.get("spec") or {}, no.get("spec") or {}
        subject, at_once = f"GPU driver of pool {pool}", ((pool, AT_ONCE),)
        if on != nn:
            # both exist for a moment (Argo CD prunes within the wave, Flux after applying): the operator
            # reports the new one ConflictingNodeSelector while the old is there, deletion or not
            # (internal/validator/validator.go:51-100; controllers/nvidiadriver_controller.go:147-161), and
            # the old one's deletion requeues every NVIDIADriver (nvidiadriver_controller.go:295-310,356-366)
            out.append(Disruption(
                "replace", subject,
                f"{_driver_shape(os_)} -> {_driver_shape(ns_)}: NVIDIADriver {on} -> {nn} (usePrecompiled is "
                f"immutable, so the choice is in the name): the engine creates {nn} and prunes {on}, whose driver "
                f"DaemonSet goes with it; the operator starts {nn} once {on} is gone: {REINSTALL_AT_ONCE}", at_once))
            continue
        if oo == no:
            continue
        why = recreated.get(("NVIDIADriver", "", nn))
        if why:
            keep = ""
            if "live object" in why:
                opts = ((no.get("metadata") or {}).get("annotations") or {}).get("argocd.argoproj.io/sync-options")
                keep = (f". To update it in place instead: turn off auto-sync of the root Application, merge, set the "
                        f"live object's option to the new one (`kubectl annotate nvidiadriver {nn} "
                        f"argocd.argoproj.io/sync-options={opts or ''} --overwrite`), then turn auto-sync back on")
            out.append(Disruption(
                "replace", subject,
                (f"{_driver_shape(os_)} -> {_driver_shape(ns_)}" if _driver_shape(os_) != _driver_shape(ns_) else
                 f"{_driver_shape(ns_)}, unchanged,") + f" (NVIDIADriver {nn}) is recreated: {why}; "
                f"{REINSTALL_AT_ONCE}{keep}", at_once))
        elif fields := immutable_changes("NVIDIADriver", oo, no):
            out.append(Disruption(
                "hand-step", subject,
                f"NVIDIADriver {nn} changes immutable {', '.join(fields)} under the same name: the API server refuses "
                "the update (CEL self == oldSelf) and the sync fails; delete the object by hand to let the engine "
                f"create it again ({REINSTALL_AT_ONCE})", at_once))
        elif (os_.get("version"), os_.get("usePrecompiled")) != (ns_.get("version"), ns_.get("usePrecompiled")):
            mine = ([p for p in (pool,) if p in rolled], [p for p in (pool,) if p in skipped])
            out.append(Disruption(
                "upgrade", subject,
                f"{os_.get('version') or 'default'} -> {ns_.get('version') or 'default'} (NVIDIADriver {nn}, "
                "updated in place): " + _upgrade_how(ns_.get("upgradePolicy", {}), *mine),
                _rolled_nodes(ns_.get("upgradePolicy", {}), *mine)))
    return out


def _rolled_nodes(policy: dict, rolled: list[str], skipped: list[str]) -> tuple[tuple[str, str], ...]:
    """(pool, node-level effect) of a driver change the operator applies in place."""
    if not policy.get("autoUpgrade", True):
        return tuple((p, "driver changes as each node's driver pod is deleted") for p in (*rolled, *skipped))
    n = policy.get("maxParallelUpgrades", 1)
    return (*((p, f"driver upgraded {n} node{'s' if n != 1 else ''} at a time by the upgrade controller")
              for p in rolled),
            *((p, "driver held (roll its nodes by hand)") for p in skipped))


def _driver_pools(objs: dict) -> tuple[set[str], set[str]]:
    """(pools whose nodes the upgrade controller rolls, pools it skips), from the labels the pools'
    nodes get: a static pool's NodeFeatureRule, a node-group pool's template (MachineDeployment,
    ContainerNodePool, agent pool: :func:`gpuplan.provisioning.pools.read_template`). The skip label
    (k8s-operator-libs pkg/upgrade/consts.go:23, as vendored in gpu-operator v26.7.0) holds a pool;
    ``gpu.deploy.driver: "false"`` or ``gpu.deploy.operands: "false"`` runs no operator driver."""
    from gpuplan.identity import DRIVER_DEPLOY_LABEL, DRIVER_UPGRADE_SKIP_LABEL, OPERANDS_LABEL
    from gpuplan.provisioning.pools import read_template

    rolled, skipped = set(), set()

    def add(pool: str, labels: dict) -> None:
        if labels.get(DRIVER_DEPLOY_LABEL) == "false" or labels.get(OPERANDS_LABEL) == "false":
            return
        (skipped if labels.get(DRIVER_UPGRADE_SKIP_LABEL) == "true" else rolled).add(pool)

    for (kind, _, name), obj in objs.items():
        if kind == "NodeFeatureRule":
            for rule in obj.get("spec", {}).get("rules", []):
                labels = rule.get("labels", {})
                add(labels.get("gpuplan.dev/pool", name), labels)
        elif (template := read_template(obj)) is not None:
            add(template[0], template[1])
    return rolled, skipped


def _upgrade_how(policy: dict, rolled: list[str], skipped: list[str]) -> str:
    """Which pools a driver change drains and which it holds, in words."""
    from gpuplan.identity import DRIVER_UPGRADE_SKIP_LABEL

    if not policy.get("autoUpgrade", True):
        return "autoUpgrade is off: each node changes when its driver pod is deleted"
    parts = []
    if rolled:
        parts.append(f"the operator drains and upgrades pools {', '.join(rolled)}, "
                     f"{policy.get('maxParallelUpgrades', 1)} node(s) at a time (its upgrade controller), "
                     "deleting their GPU pods")
    if skipped:
        parts.append(f"pools {', '.join(skipped)} are held (their nodes carry {DRIVER_UPGRADE_SKIP_LABEL}): roll each "
                     "node by hand when its jobs are done (README, \"Driver upgrades\")")
    return "; ".join(parts) or "no pool runs the operator's driver"


def _delivery(old: Parsed, new: Parsed):
    from gpuplan.report.delivery import outcome

    return outcome(old, new)


def _delivery_steps(d) -> list[Disruption]:
    """The hand steps of a change (gpuplan.report.delivery): a changed bootstrap file,
    a namespace the person's own project must admit, a held prune, a refused object."""
    from gpuplan.report.delivery import show

    out = [Disruption("hand-step", "delivery", step) for step in d.hand_steps]
    for ref, why in d.refused:
        out.append(Disruption(
            "hand-step", show(ref),
            f"Argo CD refuses it ({why}) and fails the whole root sync, so no other change of this commit "
            "applies (argo-cd controller/sync.go:647-669): admit it in the AppProject first"))
    return out


def _stranded(t) -> list[Disruption]:
    """The node classes the wave-by-wave model (gpuplan.report.transition) finds stranded
    (a config they name is gone) or idle (they advertise none of what the pool's tiers
    request) once the sync is done; a window a later wave of the same sync closes is not listed."""
    out = []
    for f in t.findings:
        if f.kind in ("stranded", "idle"):
            out.append(Disruption("stranded", f"pool {f.pool} ({f.nodes.label})",
                                  f"{f.message} (steps: {', '.join(f.steps)})"))
    return out


# --- grants taken back from running pods --------------------------------------------------


DRA_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def _labels(obj: Any) -> dict[str, Any]:
    labels = ((obj.get("metadata") or {}).get("labels") if isinstance(obj, dict) else None) or {}
    return labels if isinstance(labels, dict) else {}


def _units(value: Any) -> int | None:
    """A quota's whole units (GPU quantities are counts); None for what is not one."""
    try:
        return int(str(value))
    except ValueError:
        return None


def _gpu_key(key: str) -> bool:
    from gpuplan.resolve import is_gpu_name

    return key.endswith(DRA_QUOTA_SUFFIX) or (key.startswith("requests.") and is_gpu_name(key[len("requests."):]))


def _caps(quotas: list[dict[str, Any]], pc: str, keys: set[str]) -> dict[str, int | None]:
    """key -> the most pods of ``pc`` may hold under ``quotas`` (None: no quota charges it)."""
    from gpuplan.identity import scope_matches

    out: dict[str, int | None] = {}
    for key in sorted(keys):
        caps = []
        for q in quotas:
            spec = q.get("spec") or {}
            scope = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
            hard = _units((spec.get("hard") or {}).get(key))
            if hard is not None and all(isinstance(e, dict) and "scopeName" in e and scope_matches(e, pc)
                                        for e in scope):
                caps.append(hard)
        out[key] = min(caps) if caps else None
    return out


def _by_tier(objs: dict) -> dict[str, list[tuple[tuple[str, str, str], dict]]]:
    """tier -> the objects of ``objs`` its tier label names (one pass over the tree)."""
    from gpuplan.identity import TIER_LABEL

    out: dict[str, list[tuple[tuple[str, str, str], dict]]] = {}
    for k, obj in objs.items():
        t = _labels(obj).get(TIER_LABEL)
        if isinstance(t, str):
            out.setdefault(t, []).append((k, obj))
    return out


def _tier_keys(tiered: Mapping[str, list], ns: str, tier: str, tiers: Mapping[str, str] | None) -> set[str]:
    """The quota keys that charge the tier's pods in ``ns`` (``tiered``: :func:`_by_tier` of the
    tree): its resource (the spec's, when known), its DRA DeviceClass's key, its class-scoped
    quota's keys. Empty when neither the spec nor the tree tells."""
    from gpuplan.identity import quota_key

    keys = {quota_key(tiers[tier])} if tiers and tier in tiers else set()
    for (kind, qns, name), obj in tiered.get(tier, ()):
        if kind == "DeviceClass":
            keys.add(f"{name}{DRA_QUOTA_SUFFIX}")
        elif kind == "ResourceQuota" and qns == ns:
            keys |= {k for k in (obj.get("spec") or {}).get("hard") or {} if _gpu_key(k)}
    return keys


def _quotas_by_namespace(objs: dict) -> dict[str, list[dict[str, Any]]]:
    """namespace -> its ResourceQuotas, in name order (one pass over the tree)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for (kind, qns, _), o in sorted(objs.items()):
        if kind == "ResourceQuota":
            out.setdefault(qns, []).append(o)
    return out


def _tier_classes(objs: dict) -> dict[str, str]:
    """tier -> its PriorityClass, from the PriorityClasses' tier label."""
    from gpuplan.identity import TIER_LABEL

    return {str(_labels(o)[TIER_LABEL]): name for (kind, _, name), o in sorted(objs.items())
            if kind == "PriorityClass" and isinstance(_labels(o).get(TIER_LABEL), str)}


def _granted(ns_obj: Any) -> list[str]:
    from gpuplan.identity import TIER_NS_LABEL_PREFIX

    return sorted(k[len(TIER_NS_LABEL_PREFIX):] for k, v in _labels(ns_obj).items()
                  if isinstance(k, str) and k.startswith(TIER_NS_LABEL_PREFIX) and v == "true")


def find_pods_command(ns: str, pc: str) -> str:
    """The pods of class ``pc`` in ``ns`` that hold what they were admitted with (scheduled or
    still to be): a pod's ``priorityClassName`` is no field selector, so JSONPath filters it."""
    return (f"kubectl get pods -n {ns} --field-selector=status.phase!=Succeeded,status.phase!=Failed -o "
            f"jsonpath='{{range .items[?(@.spec.priorityClassName==\"{pc}\")]}}{{.metadata.name}}{{\"\\n\"}}{{end}}'")


def revoked(a: dict, b: dict, tiers: Mapping[str, str] | None = None) -> list[Disruption]:
    """For each namespace of both trees, each tier the old tree grants it whose grant the new
    tree takes back or lowers (module docstring, **revoked**): what its running pods keep."""
    from gpuplan.k8snames import is_dns_label, is_dns_subdomain

    out = []
    old_classes, new_classes = _tier_classes(a), _tier_classes(b)
    tiered, quotas_a, quotas_b = _by_tier(a), _quotas_by_namespace(a), _quotas_by_namespace(b)
    for (kind, _, ns), ns_obj in sorted(a.items()):
        new_ns = b.get(("Namespace", "", ns))
        if kind != "Namespace" or new_ns is None or not is_dns_label(ns):
            continue  # a namespace leaving the tree is a destructive entry of its own
        still = set(_granted(new_ns))
        for tier in _granted(ns_obj):
            pc = old_classes.get(tier)
            if pc is None or not is_dns_subdomain(pc):
                continue
            keys = _tier_keys(tiered, ns, tier, tiers)
            gone = new_classes.get(tier) != pc or tier not in still
            bound = not keys and gone
            if bound:  # the tier's resource is unknown: what its class could hold, at most
                keys = {k for q in quotas_a.get(ns, ()) for k in (q.get("spec") or {}).get("hard") or {} if _gpu_key(k)}
            held = {k: c for k, c in _caps(quotas_a.get(ns, []), pc, keys).items() if c is None or c > 0}
            if new_classes.get(tier) != pc:
                why, now = f"tier {tier} leaves the tree (PriorityClass {pc} with it)", {k: 0 for k in held}
            elif tier not in still:
                why, now = f"the namespace is no longer granted tier {tier}", {k: 0 for k in held}
            else:
                why, now = "its quota is lowered", _caps(quotas_b.get(ns, []), pc, set(held))
            lost = [(k, c, now.get(k)) for k, c in held.items()
                    if now.get(k) is not None and (c is None or now[k] < c)]  # type: ignore[operator]
            if not lost:
                continue
            was = ("at most one of: " if bound else "") + ", ".join(
                f"{k} {'uncharged' if c is None else c} -> {n}" for k, c, n in lost)
            out.append(Disruption(
                "revoked", f"Namespace {ns} (tier {tier})",
                f"{why} ({was}), and nothing evicts the pods it admitted: ResourceQuota and the admission "
                "policies judge a pod only when it is created or updated, so running pods of PriorityClass "
                f"{pc} here keep their GPUs (up to the old grant) until deleted, GPUs the new plan hands to "
                f"nobody. Their Deployments, StatefulSets and Jobs still scale (the policies re-read a workload "
                f"only when its pod templates change), and a change of their template is refused until it names a "
                f"class granted here. Find them: `{find_pods_command(ns, pc)}`"))
    return out


# --- rendering ---------------------------------------------------------------------------


def all_clear() -> str:
    """What a change with no entry does not do: one phrase per kind of entry."""
    return ", ".join(NONE_OF[s] for s in SEVERITY_ORDER)



_VERB = {"stranded": "stranded", "replace": "replaced", "drain": "drained", "reconfigure": "reconfigured"}


def by_pool(ds: list[Disruption]) -> list[str]:
    """One line per pool, in risk order: how many of its static nodes each entry kind
    touches, and whether its Karpenter nodes are replaced (every node of the pool)."""
    import re

    pools: dict[str, dict[str, set[str]]] = {}
    drivers: dict[str, tuple[int, str]] = {}  # pool -> (rank, what its driver change does to its nodes)
    held: dict[str, int] = {}  # pool -> nodes its rollout holds for a later step
    for d in ds:
        for pool, what in d.nodes:
            if pool not in drivers or d.rank < drivers[pool][0]:
                drivers[pool] = (d.rank, what)
        if d.held and (r := re.fullmatch(r"pool (\S+) rollout", d.subject)):
            held[r.group(1)] = d.held
            continue
        m = re.fullmatch(r"node (\S+) \(pool (\S+)\)", d.subject)
        s = re.fullmatch(r"pool (\S+) \((?:(\d+) static nodes?|(\w+ )?Karpenter nodes)\)", d.subject)
        if m and d.severity in _VERB:
            pools.setdefault(m.group(2), {}).setdefault(d.severity, set()).add(m.group(1))
        elif s and d.severity == "stranded":
            nodes = {f"#{i}" for i in range(int(s.group(2)))} if s.group(2) else {"*"}
            pools.setdefault(s.group(1), {}).setdefault("stranded", set()).update(nodes)
        elif (g := re.fullmatch(r"(\w+) \S+ \(pool (\S+)\)", d.subject)) and g.group(1) != "node":
            if d.severity in ("hand-step", *_VERB):  # a node group's template: every node of the pool
                pools.setdefault(g.group(2), {}).setdefault(d.severity, set()).add(f"*{g.group(1)}")
        elif d.severity == "replace" and d.subject.startswith(("NodePool ", *(f"{k} " for k in NODE_CLASS_DRIFT))):
            blocked = "drift is blocked" in d.message  # _drift_note: they go only as they expire
            pools.setdefault(d.subject.split(" ", 1)[1], {}).setdefault("replace", set()).add(
                "*expiry" if blocked else "*")
    rows = []
    for pool, sev in pools.items():
        parts = []
        for s in ("hand-step", "stranded", "replace", "drain", "reconfigure"):
            nodes = sev.get(s)
            groups = sorted(x[1:] for x in nodes or () if x not in ("*", "*expiry") and x.startswith("*"))
            if groups:  # a node group's template: the platform acts on every node
                parts.append(f"node pool recreated by hand ({', '.join(groups)})" if s == "hand-step" else
                             f"every node {_VERB[s]} ({', '.join(groups)})")
            elif nodes and s in _VERB:
                parts.append((f"nodes {_VERB[s]} (Karpenter)" if s == "stranded" else
                              f"every node {_VERB[s]} as it expires (Karpenter, drift blocked)"
                              if "*expiry" in nodes else f"every node {_VERB[s]} (Karpenter)")
                             if "*" in nodes or "*expiry" in nodes else
                             f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} {_VERB[s]}")
        if pool in held:
            parts.append(f"{held[pool]} held for the next steps (`gpuplan build --advance {pool}`)")
        if pool in drivers:
            parts.append(drivers[pool][1])
        rank = min([*(SEVERITY_ORDER.index(s) for s in sev), *([drivers[pool][0]] if pool in drivers else [])])
        rows.append((rank, pool, f"pool {pool}: " + ", ".join(parts)))
    for pool, (rank, what) in drivers.items():
        if pool not in pools:
            rows.append((rank, pool, f"pool {pool}: {what}"))
    return [r[2] for r in sorted(rows)]


def render_text(ds: list[Disruption]) -> str:
    """Subjects and messages quote the old tree: each on one line, without a control
    character or a workflow command (``gpuplan.diagnostics.escape``), in a terminal or a CI log."""
    from gpuplan.diagnostics import escape

    if not ds:
        return f"No disruptive changes ({all_clear()})\n"
    lines = [f"DISRUPTIVE CHANGES ({len(ds)}): review before merging"]
    lines += [f"  {escape(row)}" for row in by_pool(ds)]
    for d in ds:
        lines.append(f"  [{d.severity.upper()}] {escape(d.subject)}: {escape(d.message)}")
    return "\n".join(lines) + "\n"


def render_markdown(ds: list[Disruption]) -> str:
    """The disruption block of a pull-request comment. Subjects and messages quote the old
    tree (names, label values, config names a pull request can write): every one goes
    through ``gpuplan.report.markdown.md_text``."""
    from gpuplan.report.markdown import md_text

    if not ds:
        return f"**No disruptive changes** ({md_text(all_clear())}).\n"
    destructive = sum(d.severity == "destructive" for d in ds)
    head = f"### :warning: Disruptive changes ({len(ds)})"
    lines = [head, ""]
    steps = sum(d.severity == "hand-step" for d in ds)
    if steps:
        lines += [f"> [!IMPORTANT]\n> {steps} hand step(s): the GitOps engine stops applying this tree until "
                  "they are done, at the moment each one names (first rows below).", ""]
    if destructive:
        lines += [f"> [!CAUTION]\n> {destructive} namespace(s) leave the tree: deleting them deletes everything "
                  "in them.", ""]
    pools = by_pool(ds)
    if pools:
        lines += ["Nodes by pool, riskiest first: " + "; ".join(map(md_text, pools)) + ".", ""]
    lines += ["| | what | effect |", "|---|---|---|"]
    for d in ds:
        lines.append(f"| **{md_text(d.severity, cell=True)}** | {md_text(d.subject, cell=True)} | "
                     f"{md_text(d.message, cell=True)} |")
    return "\n".join(lines) + "\n"


def to_data(ds: list[Disruption]) -> list[dict[str, str]]:
    return [{"severity": d.severity, "subject": d.subject, "message": d.message} for d in ds]


def render_html(ds: list[Disruption]) -> str:
    from html import escape

    if not ds:
        return f"<p><strong>No disruptive changes</strong> ({escape(all_clear())}).</p>"
    rows = "".join(f"<tr><td><strong>{escape(d.severity)}</strong></td><td>{escape(d.subject)}</td>"
                   f"<td>{escape(d.message)}</td></tr>" for d in ds)
    return (f'<section class="disruptive"><h2>&#9888; Disruptive changes ({len(ds)})</h2>'
            f"<table><thead><tr><th></th><th>what</th><th>effect</th></tr></thead><tbody>{rows}</tbody></table>"
            "</section>")
