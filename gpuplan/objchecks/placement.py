"""GP520-GP529: every tier lands on its pool and nowhere else (the placement proof,
gpuplan.placement, run over the objects lowering handed on). Check-objects stage.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet
from gpuplan.units import class_scoped

E_OTHER_POOL = Code(
    "GP520", "tier's pod can land on another pool", Severity.ERROR,
    "The placement proof put the tier's contract pod (its PriorityClass, pool selector, "
    "tolerations and resource, after ExtendedResourceToleration) through the generated NodePools and "
    "NodeFeatureRules: it fits a pool other than the tier's, or none. A pod that tolerates another pool's "
    "taints and matches its labels is charged to this tier's quota on hardware priced and sized for "
    "another (e.g. a one-GPU L40S serving pod that launches a p5.48xlarge).",
    bad="pools:\n  - name: train\n    taints: [{key: gpuplan.dev/pool, operator: Exists, effect: NoSchedule}]  # any\n"
        "  - name: burst\n    taints: [{key: gpuplan.dev/pool, value: x, effect: NoSchedule}]",
    good="pools:\n  - name: train      # gpuplan adds gpuplan.dev/pool=train:NoSchedule\n  - name: burst",
    pain="tiers not bound to pools: a training pod on the H100 burst nodes, charged at A100 prices",
)
E_DENIED_GRANTED = Code(
    "GP521", "tier's pod refused in a namespace granted the tier", Severity.ERROR,
    "The tier's contract pod, exactly as the tenant page shows it, is refused by the admission policy or "
    "a ResourceQuota in a namespace whose quota grants the tier: the tenant cannot use what it was given.",
    bad="tiers:\n  - {name: infer, pool: l40s, maxGPUsPerPod: 0}",
    good="tiers:\n  - {name: infer, pool: l40s, maxGPUsPerPod: 4}",
)
W_ADMITTED_UNGRANTED = Code(
    "GP522", "tier's pod admitted in a namespace not granted the tier", Severity.WARNING,
    "The tier's contract pod is admitted in a namespace whose quota does not grant the tier (or that gpuplan "
    "does not manage): nothing keeps other namespaces off the tier. gpuplan's ValidatingAdmissionPolicy "
    "closes this; it needs Kubernetes >= 1.30 and `cluster.admission.enabled`.",
    bad='cluster:\n  kubernetesVersion: "1.29"',
    good='cluster:\n  kubernetesVersion: "1.33"',
)
E_TWIN_POOLS = Code(
    "GP523", "two pools a pod cannot tell apart", Severity.ERROR,
    "Two pools' nodes carry the same labels and taints and advertise the same resources: no selector or "
    "toleration can send a pod to one and not the other, so quota, price and NodePool order decide by "
    "accident. gpuplan's pool label and binding taint (gpuplan.dev/pool) make every pool distinct; this "
    "fires only when the generated objects lost them.",
    bad="two NodePools whose template labels and taints are identical",
    good="each NodePool template labels and taints its nodes gpuplan.dev/pool=<pool>",
)
E_CLASS_CONFLICT = Code(
    "GP524", "tiers adopt one PriorityClass with different settings", Severity.ERROR,
    "Tiers that name the same `priorityClassName` share one PriorityClass object: it has one value and "
    "one preemption policy, so they must agree on `priority` and `preemption`.",
    bad="tiers:\n  - {name: a, pool: p, priorityClassName: high, priority: 1000}\n"
        "  - {name: b, pool: q, priorityClassName: high, priority: 500}",
    good="tiers:\n  - {name: a, pool: p, priorityClassName: high, priority: 1000}\n"
         "  - {name: b, pool: q, priorityClassName: high, priority: 1000}",
)
I_TOO_LARGE = Code(
    "GP525", "placement proof skipped: fleet too large", Severity.INFO,
    "The placement and boundary proofs evaluate the admission policies for every pod a tenant could "
    "write under every tier's class, and visit each namespace where a tier is granted or admitted; above "
    "40,000 tiers and namespaces together validate and build skip them to stay within seconds "
    "(the policies, quotas and tenant pages are generated all the same). Prove a smaller slice of the "
    "fleet, or split it.",
    bad="8,000 tiers and 144,000 namespaces",
    good="1,666 tiers and 30,000 namespaces",
)
E_BOUNDARY = Code(
    "GP527", "a pod outside the tier contract gets GPU capacity", Severity.ERROR,
    "The boundary proof put every pod shape a tenant or a stranger could write (every class, every GPU "
    "resource and implicit DRA name, sidecars, selectors and tolerations, no GPU at all; in every namespace "
    "state: granted, granted other tiers, unmanaged, labels copied, tenant removed) through the generated "
    "admission policies, quotas and pools: this one is admitted and can use GPU capacity outside its "
    "namespace's grants (another pool, an ungranted resource, no quota, above the grant or maxGPUsPerPod, "
    "or a GPU node without requesting a GPU). docs/placement.md has the threat model.",
    bad="cluster:\n  admission: {enabled: true, unmanagedNamespaces: [ml-sandbox]}  # and the policy edited by hand",
    good="the admission policies and quotas exactly as gpuplan writes them",
    pain="a pod in 'default' that tolerates everything lands on a GPU node and sees every GPU through "
         "NVIDIA_VISIBLE_DEVICES",
)
E_SHARED_CLASS = Code(
    "GP528", "tiers share a PriorityClass across pools or quotas", Severity.ERROR,
    "Tiers that adopt one `priorityClassName` share one class: pods of that class are admitted on every "
    "one of their pools and charged to every quota scoped to the class. On different pools, a namespace "
    "granted one tier runs on the other's pool; with `enforcePriority` (or Kueue queueing), each tier's "
    "class-scoped quota counts the other tier's pods, so a namespace can use neither fully.",
    bad="tiers:\n  - {name: a, pool: p, priorityClassName: high}\n  - {name: b, pool: q, priorityClassName: high}",
    good="tiers:\n  - {name: a, pool: p, priorityClassName: high}\n  - {name: b, pool: q, priorityClassName: high-q}",
)
E_STEP_BOUNDARY = Code(
    "GP529", "a sync step from the existing tree opens the tenancy boundary", Severity.ERROR,
    "The GitOps engine applies a tree step by step (Argo CD: sync waves, prunes in reverse wave order; "
    "Flux: the root's apply, its prunes, then the tiers' PriorityClasses). The boundary proof ran on what "
    "the API server holds after each step from the existing tree to the new one: at this step a pod is "
    "admitted past the new spec's boundary in a way the existing tree did not admit (a class accepted "
    "before its rules are bound, a namespace's pods uncharged between its quota and its grant). Pods "
    "admitted then keep running. The tree is not written. docs/transitions.md \"The tenancy boundary at "
    "every step\" lists the orders gpuplan's objects are given so that no step opens it.",
    bad="generated/ edited by hand: the tiers' PriorityClasses moved to wave -2, before their policies' bindings",
    good="the sync waves and Flux Kustomizations as gpuplan writes them",
    pain="renaming a tier admitted its class in 'default' with 8 GPUs on any pool for a wave of the sync",
)
CODES = (E_OTHER_POOL, E_DENIED_GRANTED, W_ADMITTED_UNGRANTED, E_TWIN_POOLS, E_CLASS_CONFLICT, I_TOO_LARGE,
         E_BOUNDARY, E_SHARED_CLASS, E_STEP_BOUNDARY)


TENANTS_PATH = ("spec", "tenants")  # where the proof at every sync step reports (TreeObjects keeps its position)


def step_diagnostics(rf: ResolvedFleet, old: list[dict[str, Any]], new: list[dict[str, Any]], tree: str,
                     diag: Any) -> list[Diagnostic]:
    """GP529 for each window a sync step from the existing tree (``old``) to ``new`` opens
    (``diag``: objchecks.TreeObjects.diag, the spec's positions being released by then)."""
    if not proves(rf) or not any(d.get("kind") == "ValidatingAdmissionPolicy" for d in new):
        return []
    from gpuplan.placement.steps import step_breaches

    found = step_breaches(rf, old, new)
    eng = "Argo CD" if rf.fleet.spec.cluster.gitops.engine == "argocd" else "Flux"
    out = [diag(E_STEP_BOUNDARY, f"{eng} sync from {tree}, step {b.step}: in namespace {b.namespace!r}, a pod of "
                   f"{b.pod} is admitted and {b.escape}", TENANTS_PATH,
                   hint="keep gpuplan's sync waves and Kustomizations as generated (docs/transitions.md); "
                        "`gpuplan diff` shows what the change moves")
           for b in found[:MAX_BREACHES]]
    if len(found) > MAX_BREACHES:
        out.append(diag(E_STEP_BOUNDARY, f"and {len(found) - MAX_BREACHES} more pods at sync steps from {tree}",
                        TENANTS_PATH))
    return out


def slim(doc: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """What the proofs read of an object (:func:`gpuplan.placement.simulate.slim_object`)."""
    from gpuplan.placement.simulate import slim_object

    return slim_object(doc, shared)


def proves(rf: ResolvedFleet) -> bool:
    """Whether the proof runs (and so reads the objects): within its size limit. A fleet
    without tiers is proved too: pools that cannot be told apart (GP523) need none."""
    from gpuplan.placement.simulate import MAX_PROOF_SIZE, proof_size

    return proof_size(rf) <= MAX_PROOF_SIZE


def check(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Iterable[Diagnostic]:
    yield from _classes(rf)
    if any(t.pool not in rf.pool_by_name for t in rf.fleet.spec.tiers):
        return  # reference errors are reported by the tenancy rules
    from gpuplan.placement.simulate import MAX_PROOF_SIZE, proof_size

    n = proof_size(rf)
    if n > MAX_PROOF_SIZE:
        yield rf.diag(I_TOO_LARGE, f"placement proof skipped: {n:,} tiers and namespaces (limit {MAX_PROOF_SIZE:,})",
                      ("spec", "tiers"))
        return
    yield from _proof(rf, docs)


def _classes(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    from gpuplan.identity import priority_class_name

    first: dict[str, tuple[int, object]] = {}
    for i, t in enumerate(rf.fleet.spec.tiers):
        pc = priority_class_name(t)
        j, other = first.setdefault(pc, (i, t))
        if j != i and (other.priority, other.preemption) != (t.priority, t.preemption):  # type: ignore[attr-defined]
            yield rf.diag(E_CLASS_CONFLICT,
                          f"tier {t.name!r} names PriorityClass {pc!r} with priority {t.priority}/{t.preemption}, "
                          f"tier {other.name!r} with {other.priority}/{other.preemption}",  # type: ignore[attr-defined]
                          ("spec", "tiers", i, "priorityClassName"))
        elif j != i:
            why = _shared_class_problem(rf, other, t)
            if why:
                yield rf.diag(E_SHARED_CLASS, f"tiers {other.name!r} and {t.name!r} share PriorityClass {pc!r}: {why}",  # type: ignore[attr-defined]
                              ("spec", "tiers", i, "priorityClassName"),
                              hint="give each tier its own priorityClassName (or leave it out: gpuplan-<tier>)")


def _shared_class_problem(rf: ResolvedFleet, a: Any, b: Any) -> str | None:
    from gpuplan.queues import queued_tiers

    if a.pool != b.pool:
        return f"they are on pools {a.pool!r} and {b.pool!r}, so a namespace granted one runs on both"
    held = set(queued_tiers(rf))
    for t in (a, b):
        if class_scoped(rf, t) or t.name in held:
            why = ("enforcePriority" if t.enforce_priority else "queued" if t.name in held
                   else f"{rf.tier_resource(t)} is handed out on another pool too")
            return (f"tier {t.name!r} is held to its class ({why}), "
                    "so its quota would count the other tier's pods")
    return None


def _proof(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    from gpuplan.placement.simulate import proof as placement_proof

    proof = placement_proof(rf, docs)
    idx = rf.tier_index
    for a, b in proof.twins:
        i = next(i for i, p in enumerate(rf.fleet.spec.pools) if p.name == b)
        yield rf.diag(E_TWIN_POOLS, f"pools {a!r} and {b!r} carry the same labels, taints and resources",
                      ("spec", "pools", i, "name"))
    for g in proof.groups:
        path = ("spec", "tiers", idx[g.tier], "pool")
        admitted = not g.denied_by
        for ns in g.namespaces[:MAX_NAMESPACES]:
            if g.granted and admitted and g.pools != [g.expected_pool]:
                where = ", ".join(g.pools) or "no pool"
                yield rf.diag(E_OTHER_POOL, f"tier {g.tier!r}: its pod in namespace {ns!r} fits {where}, "
                              f"not only its pool {g.expected_pool!r}", path,
                              hint="give the pools distinct taints and labels, or keep gpuplan's binding taint")
            elif g.granted and not admitted:
                yield rf.diag(E_DENIED_GRANTED, f"tier {g.tier!r}: its pod is refused in granted namespace "
                              f"{ns!r}: {'; '.join(g.denied_by)}", path)
            elif not g.granted and admitted:
                yield rf.diag(W_ADMITTED_UNGRANTED, f"tier {g.tier!r}: its pod is admitted in namespace "
                              f"{ns!r}, which is not granted the tier", path,
                              hint="gpuplan's admission policy needs kubernetesVersion >= 1.30 and "
                                   "cluster.admission.enabled")
    if not any(d.get("kind") == "ValidatingAdmissionPolicy" for d in docs):
        return  # no policy: GP522 says what is open; there is no boundary to prove
    from gpuplan.placement.boundary import boundary

    found = boundary(rf, docs).breaches
    for b in found[:MAX_BREACHES]:
        yield rf.diag(E_BOUNDARY, f"in namespace {b.namespace!r}, a pod of {b.pod} is admitted and {b.escape}",
                      ("spec", "tenants"),
                      hint="keep gpuplan's admission policies and quotas as generated; docs/placement.md "
                           "lists what each one stops")
    if len(found) > MAX_BREACHES:
        yield rf.diag(E_BOUNDARY, f"and {len(found) - MAX_BREACHES} more pods break the tenancy boundary "
                      "(`gpuplan plan` lists them)", ("spec", "tenants"))


MAX_BREACHES = 10
MAX_NAMESPACES = 50  # per tier and namespace shape: one finding is the same in all of them
