"""tenants/<tenant>/README.md: what a tenant is given and how to use it (a text artifact
from the Jinja2 template ``tenant.md.j2``, one section per tier). Written where Kueue is
on; the example Job of each queued tier is rendered by the YAML writer and is a valid,
admissible ``batch/v1`` Job.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import POOL_LABEL, contract_spec, contract_job, contract_pod, contract_pod_spec
from gpuplan.queues import QueueLedger, flavor_name, gang_shape, gang_sizes, queued_namespaces, tier_capacity
from gpuplan.resolve import ResolvedFleet


def example_job(rf: ResolvedFleet, tier, namespace: str, resource: str, units: int, pods: int) -> dict[str, Any]:
    from gpuplan.identity import LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL, workload_priority_class_name

    pod = contract_pod_spec(rf, tier, resource, units)
    from gpuplan.identity import pod_annotations

    # do-not-disrupt, and the topology the pod set asks Kueue for (identity.topology_annotations)
    annotations = dict(pod_annotations(rf, tier))
    template: dict[str, Any] = {"metadata": {"annotations": annotations}, "spec": pod} if annotations else {"spec": pod}
    spec: dict[str, Any] = {"parallelism": pods, "completions": pods}
    if pods > 1:
        spec["completionMode"] = "Indexed"
    spec["suspend"] = True  # Kueue unsuspends it on admission
    spec["template"] = template
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": f"{tier.name}-", "namespace": namespace,
                     "labels": {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: workload_priority_class_name(tier)}},
        "spec": spec,
    }


def _tier_sections(rf: ResolvedFleet, ledger: QueueLedger, tenant,
                   specs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """``specs``: what every tenant's page shares, made once (each tier's contract pod spec, each
    class's refusals). The namespaces' quotas are the tenant's own: read for this page only, so a
    large fleet's quotas never all live at once."""
    from gpuplan.identity import priority_class_name, quota_cap
    from gpuplan.render.yamlwriter import dump

    from gpuplan.queueing.volcano.queues import volcano_plan

    q = rf.fleet.spec.queueing
    engine = q.engine if q is not None else "kueue"
    qp = ledger.queue(tenant.name) if ledger is not None else None
    queued = set(ledger.queued_tiers) if ledger is not None else set()
    granted: dict[str, list[tuple[str, int]]] = {}  # tier -> (namespace, units), in the spec's order
    for ns, per in tenant.quotas.items():
        for name, units in per.items():
            granted.setdefault(name, []).append((ns, units))
    quotas: dict[str, list[dict[str, Any]]] = {}  # namespace -> its ResourceQuotas
    out = []
    for tier in rf.fleet.spec.tiers:
        grants = granted.get(tier.name, [])
        if not grants and qp is None:
            continue  # a large fleet's tenant is granted few of its many tiers
        res = rf.tier_resource(tier)
        ctype = tier_capacity(rf, tier)
        fq = qp.quota(tier.pool, res, ctype) if (qp is not None and res) else None
        if fq is not None and tier.name not in fq.tiers:
            fq = None  # the queue reaches the flavor through another tier
        if res is None or (not grants and fq is None):
            continue
        row: dict[str, Any] = {
            "name": tier.name, "pool": tier.pool, "resource": res, "priority": tier.priority,
            "priority_class": priority_class_name(tier), "grants": grants,
            "queued": tier.name in queued and fq is not None, "gang": tier.gang is not None,
        }
        ns = next((n for n, u in grants if u > 0), tenant.namespaces[0])
        spec = specs.get(tier.name) or specs.setdefault(tier.name, contract_spec(rf, tier))
        pc = priority_class_name(tier)
        row["enforced"] = [(n, quota_cap(_quotas(rf, tenant, n, quotas), pc, res)) for n, _ in grants
                           if n in tenant.namespaces]
        row["dra"] = _dra_enforced(rf, tenant, tier, [n for n, _ in grants if n in tenant.namespaces], quotas)
        row["refused"] = _refusals(rf, pc, specs)
        row["interruption"] = _interruption(rf, tier)
        row.update(node_selector=spec["nodeSelector"], tolerations=spec["tolerations"],
                   max_per_pod=tier.max_gpus_per_pod, preemption=tier.preemption,
                   **{k: example(ns) for k, example in _examples(rf, tier, spec, specs).items()})
        if row["queued"]:
            shape = gang_shape(rf, tier)
            pods, units = shape if shape else (1, max(1, min(tier.max_gpus_per_pod or 1, fq.potential)))
            sizes = gang_sizes(tier)
            if sizes is not None and sizes[0] != sizes[1]:
                # a range: the page's example is the largest job this queue admits (GP421: at least the fewest)
                admits = max(sizes[0], min(sizes[1], fq.potential // max(units, 1)))
                row.update(gang_min=sizes[0], gang_max=sizes[1], gang_admits=admits)
                pods = admits
            shared = [f"`{n}`" for n in fq.tiers if n != tier.name]
            row["shared_note"] = (f" {'Volcano counts the pool' if engine == 'volcano' else 'Kueue counts the flavor'}, "
                                  f"not the tier: this quota is shared with "
                                  f"tier{'s' if len(shared) > 1 else ''} {', '.join(shared)}, and any of them can "
                                  "use all of it." if shared else "")
            row.update(nominal=fq.nominal, flavor=flavor_name(tier.pool, ctype), borrowing_limit=fq.borrowing_limit,
                       lending_limit=fq.lending_limit, potential=fq.potential, gang_pods=pods, gang_units=units)
            if engine == "volcano":
                from gpuplan.queueing.volcano import pages
                from gpuplan.render.yamlwriter import dump_documents

                plan = specs.get("volcano-plan") or specs.setdefault("volcano-plan", volcano_plan(rf))
                row.update(volcano=pages.page_facts(plan, tenant.name, tier),
                           example=dump(pages.example_job(rf, tier, ns, res, units, pods, tenant.name)),
                           podgroup=dump_documents(pages.example_podgroup(rf, tier, ns, pods, tenant.name)))
            else:
                row["example"] = dump(example_job(rf, tier, ns, res, units, pods))
        out.append(row)
    return out


def _examples(rf: ResolvedFleet, tier, spec: dict[str, Any], cache: dict) -> dict[str, Any]:
    """The tier's example Pod and Job as YAML, per namespace: dumped once per tier, each
    tenant's namespace written into its place (``yamlwriter.dump_template``)."""
    from gpuplan.render.yamlwriter import dump_template

    key = ("examples", tier.name)
    if key not in cache:
        cache[key] = {"pod": dump_template(lambda ns: contract_pod(rf, tier, ns, spec)),
                      "job": dump_template(lambda ns: contract_job(rf, tier, ns, spec))}
    return cache[key]


def _interruption(rf: ResolvedFleet, tier) -> str | None:
    """What can stop the tier's pods, and the checkpoint advice that follows.

    ``karpenter.sh/do-not-disrupt`` keeps Karpenter's voluntary disruption (consolidation, drift)
    off the node of a running pod, and its drain leaves the pod until the NodePool's
    terminationGracePeriod (kubernetes-sigs/karpenter@v1.14.1 pkg/utils/pod/scheduling.go:58-62,
    pkg/controllers/node/termination/terminator/terminator.go:112); it does not exclude a node
    from interruption or expiration (aws/karpenter-provider-aws v1.14.1 website/content/en/docs/
    concepts/disruption.md:422), and EC2 reclaims a spot instance two minutes after its notice
    (disruption.md:207). Pods that may run on spot do not carry it (``identity.pod_annotations``):
    Karpenter's drain would skip them (pkg/utils/pod/scheduling.go:58-62)."""
    from gpuplan.identity import DO_NOT_DISRUPT, capacity_pin, pod_annotations
    from gpuplan.lower.karpenter import termination_grace_period
    from gpuplan.provisioning.pools import RECLAIM_NOTICE, platform
    from gpuplan.units import preemptible_pool, preemptible_tier

    pv = rf.pool_by_name[tier.pool]
    annotated = bool(pod_annotations(rf, tier).get(DO_NOT_DISRUPT))
    if preemptible_pool(pv) and capacity_pin(rf, tier) is None and preemptible_tier(tier):
        where = platform(rf.fleet.spec.cluster, pv.pool)
        who, notice = RECLAIM_NOTICE.get(where, ("the provider", "short"))
        return (f"May run on spot capacity: {who} reclaims a spot node {notice} after its notice"
                + (", and Karpenter drains the node as soon as it sees the notice: pods get SIGTERM and what is "
                   "left of the notice" if where == "karpenter-aws" else "")
                + ". Write checkpoints often, to storage outside the node, and resume from the latest.")
    if annotated:
        grace = termination_grace_period(rf, pv)
        return (f"Pods carry `{DO_NOT_DISRUPT}: \"true\"`: Karpenter does not consolidate or drift their node while "
                "they run. Expiry (`expireAfter`) still ends the node"
                + (f": its pods get at most {grace} (the NodePool's terminationGracePeriod)" if grace else "")
                + ". Checkpoint within that.")
    return _platform_upgrades(rf, pv)


def _platform_upgrades(rf: ResolvedFleet, pv) -> str | None:
    """A job pool whose nodes the platform upgrades itself: AKS quarantines a node a
    PodDisruptionBudget keeps (``undrainableNodeBehavior: Cordon``, gpuplan.provisioning.aks); GKE
    drains it for at most an hour (GP980, gpuplan.rules.gke)."""
    from gpuplan.provisioning import aks

    if pv.pool.aks is not None and aks.upgrade_settings(rf, pv) is not None:
        return ("AKS upgrades this pool's nodes itself (cluster and node-image upgrades), draining each. A node whose "
                "pods a PodDisruptionBudget keeps from eviction is cordoned and quarantined instead, and the job runs "
                "on: give the job's pods a PodDisruptionBudget with `maxUnavailable: 0`. Without one the upgrade "
                "evicts them: write checkpoints to storage outside the node.")
    from gpuplan.identity import job_pool

    if pv.pool.gke is not None and pv.pool.gke.auto_upgrade and job_pool(rf, pv):
        return ("GKE upgrades this pool's nodes itself, recreating each after a drain that waits at most an hour for "
                "PodDisruptionBudgets: write checkpoints to storage outside the node, and resume from the latest.")
    return None


def _dra_enforced(rf: ResolvedFleet, tenant, tier, namespaces: list[str], cache: dict) -> dict[str, Any] | None:
    """A DRA tier's enforced grant, read from the quotas gpuplan emits: the quota key that charges
    its DeviceClass's claims, each namespace's number, and the most devices one claim template asks."""
    from gpuplan.dra.claims import claim_template_name, tier_claim

    claim = tier_claim(rf, tier)
    if claim is None:
        return None
    per_ns = []
    for ns in namespaces:
        hards = [int(q["spec"]["hard"][claim.quota_key]) for q in _quotas(rf, tenant, ns, cache)
                 if claim.quota_key in q["spec"].get("hard", {})]
        per_ns.append((ns, min(hards) if hards else None))
    counts = claim.template_counts()
    return {"device_class": claim.class_name, "key": claim.quota_key, "enforced": per_ns,
            "max_per_claim": max(counts), "templates": [claim_template_name(claim.tier, n) for n in counts]}


def _quotas(rf: ResolvedFleet, tenant, ns: str, cache: dict) -> list[dict[str, Any]]:
    """The namespace's ResourceQuotas, as lower/tenancy.py writes them (``cache``: the page's, by namespace)."""
    from gpuplan.lower.tenancy import namespace_quotas

    if ns not in cache:
        cache[ns] = namespace_quotas(rf, tenant, ns)
    return cache[ns]


def _refusals(rf: ResolvedFleet, pc: str, cache: dict) -> list[str]:
    """What the admission policy of class ``pc`` refuses, in its own messages (once per class)."""
    from gpuplan.lower import admission

    if not admission.enabled(rf):
        return []
    key = ("refused", pc)
    if key not in cache:
        tiers = admission.class_tiers(rf).get(pc, [])
        cache[key] = [v["message"] for v in admission.class_validations(rf, pc, tiers)] if tiers else []
    return cache[key]


def _boundary(rf: ResolvedFleet) -> list[str]:
    """What the namespace policy refuses everywhere (its messages)."""
    from gpuplan.lower import admission

    return [v["message"] for v in admission.namespace_validations(rf)] if admission.enabled(rf) else []


def _policy_name(rf: ResolvedFleet) -> str | None:
    from gpuplan.lower import admission

    return admission.policy_name(rf) if admission.enabled(rf) else None


# "Your contract" lists at most this many tiers, so that it fits one screen; the rest are below
CONTRACT_ROWS = 12


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    """The pages without Kueue (with Kueue, gpuplan.lower.kueue writes them with its ledger)."""
    from gpuplan.queues import queue_ledger

    if rf.fleet.spec.queueing is not None and queue_ledger(rf) is not None:
        return iter(())
    return tenant_pages(rf, None)


def tenant_pages(rf: ResolvedFleet, ledger: QueueLedger | None) -> Iterator[Artifact]:
    from gpuplan.identity import CAPACITY_TYPE_LABEL, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL
    from gpuplan.queueing.volcano.queues import cohort_queue_name
    from gpuplan.render.text import render

    q = rf.fleet.spec.queueing
    specs: dict[Any, Any] = {}
    boundary = _boundary(rf)
    for tn in rf.fleet.spec.tenants:
        qp = ledger.queue(tn.name) if ledger is not None else None
        sections = _tier_sections(rf, ledger, tn, specs)
        volcano = q is not None and q.engine == "volcano"
        text = render(
            "tenant.md.j2", fleet=rf.fleet.metadata.name, tenant=tn.name, namespaces=list(tn.namespaces),
            engine=q.engine if q is not None else None,
            queue=qp.name if qp else None,
            cohort=(qp.cohort if not volcano else (None if qp.cohort == ledger.cohort else cohort_queue_name(qp.cohort)))
            if qp else None, weight=qp.weight if qp else 0,
            fair_sharing=bool(q and q.fair_sharing), local_queue=LOCAL_QUEUE, queue_label=QUEUE_LABEL,
            queue_namespaces=queued_namespaces(ledger, tn) if qp else [],
            priority_label=PRIORITY_LABEL, tiers=sections,
            pinned=any(CAPACITY_TYPE_LABEL in t["node_selector"] for t in sections),
            pool_label=POOL_LABEL, policy=_policy_name(rf), boundary=boundary, contract_rows=CONTRACT_ROWS,
        )
        yield Artifact(f"tenants/{tn.name}/README.md", text=text, kustomize=False,
                       description=f"What tenant {tn.name} is given and how to submit jobs")
