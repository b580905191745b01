"""How the GitOps engine applies a generated tree, step by step, for the control-plane tests.

- **Argo CD** (argoproj/argo-cd v3.5.1, gitops-engine vendored under ``gitops-engine/``):
  tasks sorted by phase, ``argocd.argoproj.io/sync-wave`` (0 when absent), kind (Helm's
  install order; a kind not in the list, every custom resource, after all listed kinds), then
  name (``pkg/sync/sync_tasks.go`` ``kindOrder`` and ``syncTasks.Less``); one step per wave;
  prunes in the reverse order of their waves (``pkg/sync/sync_context.go:1097-1125``): the
  objects of the highest old wave are pruned in the step of the lowest new wave, and so on.
- **Flux** (fluxcd/kustomize-controller v1.9.4): read from the tree's Kustomizations (bootstrap.yaml's
  and those the tree holds): a Kustomization runs once its object exists (bootstrap, or applied
  by another) and each it ``dependsOn`` is Ready (kustomization_controller.go ``checkDependencies``
  :551-628); it applies its objects in one server-side apply, CRDs and Namespaces first, then
  kinds named ``*Class``, then the rest (fluxcd/pkg ssa v0.76.1 ``ResourceManager.ApplyAllStaged``,
  manager_apply.go:347-420), then prunes what its last revision held and this one does not,
  skipping an object another Kustomization has applied since (its owner labels no longer match,
  ssa/manager_delete.go:77-84); it is Ready unless marked broken (a HelmRelease that fails), and
  with ``wait`` only once every Kustomization it applied is (checkHealth, :997-1045).

Both apply server-side (Argo CD ``ServerSideApply=true``; Flux always)."""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

WAVE = "argocd.argoproj.io/sync-wave"
FLUX_OPERATOR_DIR = "delivery/gpu-operator/"
FLUX_CLASSES_DIR = "delivery/priorityclasses/"

# gitops-engine pkg/sync/sync_tasks.go kindOrder (Helm's releaseutil/kind_sorter.go InstallOrder)
KIND_ORDER = [
    "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
    "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass", "PersistentVolume",
    "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod",
    "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob",
    "IngressClass", "Ingress", "APIService",
]
_KIND_RANK = {k: i - len(KIND_ORDER) for i, k in enumerate(KIND_ORDER)}  # custom kinds: 0, after all


def key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    m = obj.get("metadata") or {}
    return (obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else "", obj["kind"],
            m.get("namespace") or "", m.get("name") or "")


@dataclass
class Tree:
    """The Kubernetes objects of a generated tree, by the file that holds them."""

    root: Path
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    files: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    root_files: set[str] = field(default_factory=set)

    @property
    def engine(self) -> str:
        return "flux" if any(k[1] == "Kustomization" and k[0] == "kustomize.toolkit.fluxcd.io"
                             for k in self.objects) else "argocd"

    def in_root(self) -> list[dict[str, Any]]:
        """What the root Application (or Kustomization) syncs: the root kustomization's files."""
        return [o for k, o in self.objects.items() if self.files[k] in self.root_files]

    def outside_root(self) -> list[dict[str, Any]]:
        return [o for k, o in self.objects.items() if self.files[k] not in self.root_files]

    def flux_operator(self) -> list[dict[str, Any]]:
        """What the operator's own Flux Kustomization applies (its path, ``delivery/gpu-operator``),
        before the root's, which ``dependsOn`` it."""
        return [o for k, o in self.objects.items() if self.files[k].startswith(FLUX_OPERATOR_DIR)]

    def flux_classes(self) -> list[dict[str, Any]]:
        """What the tiers' PriorityClasses' Flux Kustomization applies (``delivery/priorityclasses``),
        after the root's apply and prune, which it ``dependsOn``."""
        return [o for k, o in self.objects.items() if self.files[k].startswith(FLUX_CLASSES_DIR)]


def load_tree(root: Path) -> Tree:
    t = Tree(root)
    kust = root / "kustomization.yaml"
    if kust.exists():
        t.root_files = set(yaml.safe_load(kust.read_text()).get("resources") or [])
    for f in sorted(root.rglob("*.yaml")):
        rel = f.relative_to(root).as_posix()
        for d in yaml.safe_load_all(f.read_text(encoding="utf-8")):
            if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
                continue  # Helm values and other non-objects
            if d["apiVersion"].startswith("kustomize.config.k8s.io/"):
                continue  # kustomize's own file, not an API object
            k = key(d)
            t.objects[k] = d
            t.files[k] = rel
    return t


def wave(obj: dict[str, Any]) -> int:
    v = ((obj.get("metadata") or {}).get("annotations") or {}).get(WAVE, "0")
    try:
        return int(v)
    except ValueError:
        return 0


def argo_order(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(objs, key=lambda o: (wave(o), _KIND_RANK.get(o["kind"], 0), o["kind"],
                                       (o.get("metadata") or {}).get("name", "")))


@dataclass(frozen=True)
class Step:
    name: str
    apply: tuple[dict[str, Any], ...] = ()
    prune: tuple[dict[str, Any], ...] = ()


def prunable(o: dict[str, Any]) -> bool:
    """Argo CD skips ``Prune=false`` (gitops-engine pkg/sync/sync_context.go, ``syncOptions``);
    Flux skips ``kustomize.toolkit.fluxcd.io/prune: disabled``."""
    ann = (o.get("metadata") or {}).get("annotations") or {}
    opts = ann.get("argocd.argoproj.io/sync-options", "")
    return "Prune=false" not in opts.split(",") and ann.get("kustomize.toolkit.fluxcd.io/prune") != "disabled"


def _flux_stage(o: dict[str, Any]) -> int:
    # fluxcd/pkg ssa v0.76.1 ApplyAllStaged: cluster definitions (CRDs, Namespaces, ClusterRoles),
    # then kinds named *Class (utils/is.go:54-56 IsClassDefinition), then the rest
    if o["kind"] in ("CustomResourceDefinition", "Namespace", "ClusterRole"):
        return 0
    return 1 if o["kind"].endswith("Class") else 2


FLUX_KUSTOMIZATION = ("kustomize.toolkit.fluxcd.io", "Kustomization")


def _flux_units(tree: Tree) -> dict[str, tuple[dict[str, Any], list[tuple[str, str, str, str]]]]:
    """Each Flux Kustomization of the tree: its object and the keys of the objects its path's
    kustomization.yaml lists (files relative to it, ``../`` resolved)."""
    ks = {k: o for k, o in tree.objects.items() if k[:2] == FLUX_KUSTOMIZATION}
    paths = {k: str((o.get("spec") or {}).get("path", "")).removeprefix("./").rstrip("/") for k, o in ks.items()}
    prefix = min(paths.values(), key=len)  # the root Kustomization syncs the tree itself
    by_file: dict[str, list[tuple[str, str, str, str]]] = {}
    for k, f in tree.files.items():
        by_file.setdefault(f, []).append(k)
    out = {}
    for k, o in ks.items():
        rel = paths[k][len(prefix):].lstrip("/")
        kust = tree.root / rel / "kustomization.yaml"
        res = (yaml.safe_load(kust.read_text(encoding="utf-8")) or {}).get("resources") or [] if kust.exists() else []
        files = [os.path.normpath(os.path.join(rel, r)) for r in res]
        out[k[3]] = (o, [x for f in files for x in by_file.get(f, [])])
    return out


def _flux_step_name(units: dict[str, tuple[dict[str, Any], list[Any]]], n: str) -> str:
    """The operator's Kustomization is step "gpu-operator", the root's "apply" (its prunes "prune"),
    as gpuplan.report.transition names them; any other by its own name."""
    path = str((units[n][0].get("spec") or {}).get("path", "")).rstrip("/")
    if path.endswith("/" + FLUX_OPERATOR_DIR.rstrip("/")):
        return "gpu-operator"
    return "apply" if len(path) == min(len(str((o.get("spec") or {}).get("path", "")).rstrip("/"))
                                       for o, _ in units.values()) else n


def flux_steps(old: Tree | None, new: Tree, broken: frozenset[str] = frozenset()) -> list[Step]:
    """Flux's steps, each named by its Kustomization (``<name> prune`` for its prunes);
    ``broken``: Kustomizations that apply but never become Ready (the operator's, its
    HelmRelease failing)."""
    units = _flux_units(new)
    was = _flux_units(old) if old is not None else {}
    held = {k for _, ks in units.values() for k in ks}
    owner = {k: n for n, (_, ks) in was.items() for k in ks}  # the live owner labels
    exists = {n for n, (o, _) in units.items() if key(o) not in held}  # bootstrap.yaml's, by hand
    ran: set[str] = set()

    def children(n: str) -> list[str]:
        return [c for c, (o, _) in units.items() if key(o) in units[n][1]]

    def ready(n: str) -> bool:
        wait = bool((units[n][0].get("spec") or {}).get("wait"))
        return n in ran and n not in broken and (not wait or all(ready(c) for c in children(n)))

    out: list[Step] = []
    while True:
        todo = [n for n in sorted(exists - ran)
                if all(ready(d["name"]) for d in (units[n][0].get("spec") or {}).get("dependsOn") or [])]
        if not todo:
            return out
        n = todo[0]
        objs = [new.objects[k] for k in units[n][1]]
        name = _flux_step_name(units, n)
        out.append(Step(name, tuple(sorted(objs, key=_flux_stage))))
        for k in units[n][1]:
            owner[k] = n
        mine = set(units[n][1])
        gone = [] if old is None or n not in was else [
            old.objects[k] for k in was[n][1] if k not in mine and owner.get(k) == n and prunable(old.objects[k])]
        if gone:
            out.append(Step("prune" if name == "apply" else f"{name} prune", (), tuple(gone)))
        ran.add(n)
        exists |= set(children(n))


def steps(old: Tree | None, new: Tree) -> list[Step]:
    """The engine's steps from ``old`` (live; None: an empty cluster) to ``new``: what each
    applies and prunes. An object whose YAML did not change is applied again (a no-op
    server-side apply), as a sync of an out-of-sync Application re-applies only the changed
    ones; applying every object keeps the step's view complete."""
    new_objs = new.in_root()
    kept = {key(n) for n in new_objs}
    gone = [] if old is None else [o for o in old.in_root() if key(o) not in kept and prunable(o)]
    if new.engine == "flux":
        return flux_steps(old, new)
    applies: dict[int, list[dict[str, Any]]] = {}
    for o in argo_order(new_objs):
        applies.setdefault(wave(o), []).append(o)
    old_waves = sorted({wave(o) for o in gone})
    prunes: dict[int, list[dict[str, Any]]] = {}
    new_waves = sorted(applies) or [0]
    # gitops-engine prunes in reverse wave order: the prune tasks' waves are swapped so the
    # highest old wave goes first; they run in the first waves of the sync
    swap = {w: old_waves[len(old_waves) - 1 - i] for i, w in enumerate(old_waves)}
    for o in gone:
        prunes.setdefault(swap[wave(o)], []).append(o)
    out = []
    for w in sorted(set(applies) | set(prunes)):
        out.append(Step(f"wave {w}", tuple(applies.get(w, ())), tuple(prunes.get(w, ()))))
    return out
