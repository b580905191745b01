"""The tenancy boundary at every step of the GitOps engine's sync, from the existing tree
to the new one (docs/transitions.md "The tenancy boundary at every step").

The engine does not apply a tree at once. What the API server holds after each step:

- **Argo CD** (argoproj/argo-cd@v3.5.1): one step per sync wave
  (``argocd.argoproj.io/sync-wave``, 0 when absent; gitops-engine/pkg/sync/sync_task.go:59-64),
  the objects of a wave applied together; prunes in the reverse order of their waves, the
  prune waves swapped symmetrically (gitops-engine/pkg/sync/sync_context.go:1097-1125);
  ``Prune=false`` objects stay.
- **Flux** (fluxcd/kustomize-controller@v1.9.4): the apply of the Kustomization that holds
  these objects (the tenancy one, ``delivery/tenancy/``, which depends on nothing, so the
  operator's health never holds it) as one step (kustomization_controller.go:960), its prunes
  (:1416), then the Kustomization of the tiers' PriorityClasses, which ``dependsOn`` it
  (:551-628), its apply and prunes.

For each state that is neither the old tree's nor the new one's, the boundary proof
(:mod:`gpuplan.placement.boundary`) runs on the objects held then: the classes of both trees
(a removed tier's class is tried as a class of no tier), each refused while its
PriorityClass does not exist. A *step breach* is a pod that the state admits past the new
spec's boundary in a way the old tree did not (the same pod, namespace and escape): a window
the change opens, not a grant the old tree already gave (a removed tier's pods in the
namespaces it was granted are admitted by the old tree; the same pods uncharged by any quota
are not).

Limits: only the admission objects change between steps (Namespaces, ResourceQuotas,
PriorityClasses, the policies and their bindings); the pools are the new tree's; the prune
waves are those of the admission objects pruned (the swap keeps their order whatever
other objects a sync prunes); the objects of one step are taken as applied at once (the
engine applies them one by one within a wave, a fraction of a second; the real control
plane replays them one by one in tests/e2e/test_transitions.py). DeviceClasses are not
stepped: one that does not exist yet (or any more) only leaves claims of it unallocated
(kubernetes/dynamic-resource-allocation v0.36.3
structured/internal/stable/allocator_stable.go:429-432), which narrows the boundary.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from gpuplan.identity import TIER_LABEL, priority_class_name
from gpuplan.resolve import ResolvedFleet

WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
# what changes between the steps; the pools and the rest are the new tree's
STEP_KINDS = frozenset({"Namespace", "ResourceQuota", "PriorityClass", "ValidatingAdmissionPolicy",
                        "ValidatingAdmissionPolicyBinding"})

Key = tuple[str, str, str]


@dataclass(frozen=True)
class StepBreach:
    step: str
    namespace: str
    pod: str
    escape: str


def _meta(d: dict[str, Any]) -> dict[str, Any]:
    m = d.get("metadata")
    return m if isinstance(m, dict) else {}


def _key(d: dict[str, Any]) -> Key:
    m = _meta(d)
    return (str(d.get("kind")), str(m.get("namespace") or ""), str(m.get("name") or ""))


def _annotations(d: dict[str, Any]) -> dict[str, Any]:
    a = _meta(d).get("annotations")
    return a if isinstance(a, dict) else {}


def sync_wave(d: Any) -> int:
    """An object's Argo CD sync wave (0 when absent or unreadable: a hand-edited tree)."""
    try:
        return int(_annotations(d).get(WAVE, 0)) if isinstance(d, dict) else 0
    except (TypeError, ValueError):
        return 0


def prune_waves(waves: Iterable[int]) -> dict[int, int]:
    """The wave each prune of a sync runs in, by its object's wave: gitops-engine swaps the
    prune waves symmetrically, so the highest goes first (sync_context.go:1097-1125)."""
    ws = sorted(set(waves))
    return {w: ws[len(ws) - 1 - i] for i, w in enumerate(ws)}


def _prunable(d: dict[str, Any]) -> bool:
    a = _annotations(d)
    return "Prune=false" not in str(a.get(SYNC_OPTIONS, "")).split(",") and a.get(FLUX_PRUNE) != "disabled"


def sync_states(old: Iterable[dict[str, Any]], new: Iterable[dict[str, Any]], engine: str
                ) -> list[tuple[str, list[dict[str, Any]]]]:
    """(step, the objects of :data:`STEP_KINDS` held after it), for each step that changes them.
    The prune waves are swapped over every object the sync prunes, of any kind given (as
    gitops-engine swaps its prune tasks): a tree's Volcano Queues pruned at waves 1-3 move the
    prune of a policy at wave -2 to wave 3."""
    old, new = list(old), list(new)
    kept = {_key(d) for d in new}
    every_gone = [d for d in old if _key(d) not in kept and _prunable(d)]
    was = {_key(d): d for d in old if d.get("kind") in STEP_KINDS}
    now = {_key(d): d for d in new if d.get("kind") in STEP_KINDS}
    changed = [d for k, d in now.items() if was.get(k) != d]
    gone = [d for k, d in was.items() if k not in now and _prunable(d)]
    plan: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
    if engine == "flux":
        classes = [d for d in changed if d["kind"] == "PriorityClass"]
        gone_classes = [d for d in gone if d["kind"] == "PriorityClass"]
        plan = [("apply", [d for d in changed if d["kind"] != "PriorityClass"], []),
                ("prune", [], [d for d in gone if d["kind"] != "PriorityClass"]),
                ("priority classes", classes, gone_classes)]
    else:
        applies: dict[int, list[dict[str, Any]]] = {}
        for d in changed:
            applies.setdefault(sync_wave(d), []).append(d)
        swap = prune_waves(sync_wave(d) for d in every_gone)
        prunes: dict[int, list[dict[str, Any]]] = {}
        for d in gone:
            prunes.setdefault(swap[sync_wave(d)], []).append(d)
        plan = [(f"wave {w}", applies.get(w, []), prunes.get(w, [])) for w in sorted(set(applies) | set(prunes))]
    state = dict(was)
    out = []
    for name, apply, prune in plan:
        if not apply and not prune:
            continue
        for d in apply:
            state[_key(d)] = d
        for d in prune:
            state.pop(_key(d), None)
        out.append((name, list(state.values())))
    return out


def _tier_classes(docs: Iterable[dict[str, Any]]) -> set[str]:
    out = set()
    for d in docs:
        labels = _meta(d).get("labels")
        if d.get("kind") == "PriorityClass" and isinstance(labels, dict) and TIER_LABEL in labels:
            out.add(_key(d)[2])
    return out


def trusted_namespaces(rf: ResolvedFleet) -> frozenset[str]:
    """The namespaces the new tree exempts (identity.exempt_namespaces: the GPU Operator's, the DRA
    driver's, the system ones, ...). A pod a step admits there is no window the change opens: the
    new tree trusts that namespace whatever it runs, and one the change adds (the DRA driver's) is
    created in an early wave, while the old tree's bindings still select it."""
    from gpuplan.identity import exempt_namespaces

    return frozenset(exempt_namespaces(rf))


@dataclass(frozen=True)
class StepProver:
    """The boundary proof of the states between two trees (each a tree's objects): what a state
    holds of :data:`STEP_KINDS`, over the new tree's other objects, with the old tree's tier
    classes the new one drops tried as classes of no tier, each refused while its PriorityClass
    is not held; and what counts as a window there (:meth:`windows`)."""

    rf: ResolvedFleet
    rest: tuple[dict[str, Any], ...]
    extra: tuple[str, ...]
    opened: frozenset[tuple[str, str, str]]  # (pod, namespace, escape) the old tree admits already
    trusted: frozenset[str]

    @classmethod
    def between(cls, rf: ResolvedFleet, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> "StepProver":
        ours = {priority_class_name(t) for t in rf.fleet.spec.tiers}
        prover = cls(rf, tuple(d for d in new if d.get("kind") not in STEP_KINDS),
                     tuple(sorted(_tier_classes(old) - ours)), frozenset(), trusted_namespaces(rf))
        before = prover.prove([d for d in old if d.get("kind") in STEP_KINDS])
        return cls(prover.rf, prover.rest, prover.extra,
                   frozenset((b.pod, b.namespace, b.escape) for b in before.breaches), prover.trusted)

    def prove(self, held: Iterable[dict[str, Any]], record: bool = False) -> Any:
        """The :class:`gpuplan.placement.boundary.Boundary` of the state that holds ``held``."""
        from gpuplan.placement.boundary import prove_boundary

        held = list(held)
        defined = frozenset(_key(d)[2] for d in held if d.get("kind") == "PriorityClass")
        return prove_boundary(self.rf, [*self.rest, *held], record=record, extra_classes=self.extra, defined=defined)

    def windows(self, boundary: Any) -> list[Any]:
        """The breaches of a state's proof that the old tree did not admit, outside the namespaces
        the new tree trusts."""
        return [b for b in boundary.breaches
                if (b.pod, b.namespace, b.escape) not in self.opened and b.namespace not in self.trusted]


def step_breaches(rf: ResolvedFleet, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[StepBreach]:
    """The pods a state between ``old`` and ``new`` (each a tree's objects) admits past the
    new spec's boundary that the old tree did not admit, with the step that opens them.
    Both trees are read as the proof reads them (:func:`slim_object`), so that an object is
    changed by a step only where what the proof reads of it changes."""
    from gpuplan.placement.simulate import slim_object

    shared: dict[str, Any] = {}
    old, new = [slim_object(d, shared) for d in old], [slim_object(d, shared) for d in new]
    states = sync_states(old, new, rf.fleet.spec.cluster.gitops.engine)
    final = {_key(d): d for d in new if d.get("kind") in STEP_KINDS}
    states = [(n, s) for n, s in states if {_key(d): d for d in s} != final]
    if not states:
        return []
    prover = StepProver.between(rf, old, new)
    seen: set[tuple[str, str, str]] = set()
    out: list[StepBreach] = []
    for name, held in states:
        for br in prover.windows(prover.prove(held)):
            if (br.pod, br.namespace, br.escape) not in seen:
                seen.add((br.pod, br.namespace, br.escape))
                out.append(StepBreach(name, br.namespace, br.pod, br.escape))
    return out
