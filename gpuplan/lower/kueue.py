"""Kueue (``kueue.x-k8s.io/v1beta2``), only with ``spec.queueing``: docs/kueue.md.

What maps to what (the numbers come from ``gpuplan.queues``, the ledger the
capacity rules and ResourceQuotas share):

- pool with a queued tier -> ``ResourceFlavor gpuplan-<pool>``: ``nodeLabels`` =
  the pool label every pool node carries, ``tolerations`` = the pool's node taints.
  Kueue injects both into the pods of an admitted job (so they land on the pool), and
  picks a flavor only when its ``nodeLabels`` agree with the pod's nodeSelector
  (kueue v0.19.2 ``pkg/scheduler/flavorassigner/flavorassigner.go:1243-1252``);
- tenant -> ``ClusterQueue gpuplan-<tenant>`` in the fleet's cohort; namespace ->
  ``LocalQueue default`` (Kueue gives every job without a ``kueue.x-k8s.io/queue-name``
  the queue named ``default`` of its namespace: ``pkg/controller/jobframework/defaults.go:79-97``,
  ``pkg/controller/constants/constants.go:27``), so a Job cannot slip past the queue;
- queued tier -> ``WorkloadPriorityClass gpuplan-<tier>`` (same value as its PriorityClass).
  Kueue takes a Job's priority from that label, else from its pods' PriorityClass
  (``pkg/controller/jobframework/reconciler.go:1716-1719`` ``ExtractPriority``), and lets a
  running Job change the label (``:1215`` ``UpdateWorkloadPriority``,
  ``pkg/controller/jobframework/validation.go:219-232``): the admission policies hold the
  label to the Job's own class (docs/placement.md "Kueue"), and tiers that are not queued
  get no WorkloadPriorityClass a Job could borrow;
- ``queueing.topologyLevels`` -> ``Topology gpuplan-<fleet>`` and the flavors' ``topologyName``;
- the Kueue Helm chart (``oci://registry.k8s.io/kueue/charts/kueue``) with its manager
  Configuration in ``managerConfig.controllerManagerConfigYaml`` (the chart parses that
  string and writes it to the manager ConfigMap: ``charts/kueue/templates/manager/manager-config.yaml:24-37``),
  delivered beside the GPU Operator: an Argo CD Application, or a Flux HelmRelease in
  ``delivery/gpu-operator/`` (synced, and waited for, before the tree that uses the CRDs).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import (LOCAL_QUEUE, POOL_LABEL, TENANT_LABEL, TIER_LABEL, kueue_app_name, pool_node_taints,
                              workload_priority_class_name)
from gpuplan.lower.gitops import argo_chart_application, flux_chart_objects
from gpuplan.lower.common import ARGO_SYNC_OPTIONS, ARGO_WAVE, FLUX_OPERATOR_DIR, engine, object_annotations
from gpuplan.queues import QueueLedger, cohort_name, kueue_on, queue_ledger, queued_namespaces, queued_tiers
from gpuplan.resolve import ResolvedFleet

API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
HOSTNAME = "kubernetes.io/hostname"
CHART_REPO = "oci://registry.k8s.io/kueue/charts"
CHART = "kueue"
RELEASE = "kueue"
VALUES_PATH = "kueue/values.yaml"
ARGO_APP_PATH = "delivery/kueue.yaml"
FLUX_PATH = f"{FLUX_OPERATOR_DIR}/kueue.yaml"
# Kueue's objects need its CRDs and webhook, which the chart installs: after the
# Application (wave -1) and the namespaces, and without failing the first dry run.
WAVE = "1"


def annotations(rf: ResolvedFleet, kind: str) -> dict[str, str]:
    out = object_annotations(rf, kind)
    if ARGO_WAVE in out:
        out[ARGO_WAVE] = WAVE
        out[ARGO_SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"
    return out


def topology_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}"


# --- objects ----------------------------------------------------------------------------


def _tolerations(taints: list[dict[str, str]]) -> list[dict[str, str]]:
    out = []
    for t in taints:
        if "value" in t:
            out.append({"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]})
        else:
            out.append({"key": t["key"], "operator": "Exists", "effect": t["effect"]})
    return out


def resource_flavor(rf: ResolvedFleet, pool: str, capacity_type: str | None = None) -> dict[str, Any]:
    """The flavor of a pool, or of one capacity type of a pool that allows spot and a guaranteed
    type (``queues.flavor_types``): its ``nodeLabels`` then add ``karpenter.sh/capacity-type``, the
    label Karpenter gives its nodes and honours in a pod's selector (aws/karpenter-provider-aws
    v1.14.1 website/content/en/docs/concepts/scheduling.md:211-219). Kueue injects the nodeLabels
    of the flavor it assigns, so a job admitted on the spot flavor launches spot nodes, and skips a
    flavor whose nodeLabels contradict the pod's selector (flavorassigner.go:1243-1252): a pod
    pinned to on-demand is never given the spot flavor."""
    from gpuplan.identity import CAPACITY_TYPE_LABEL
    from gpuplan.queues import flavor_name

    pv = rf.pool_by_name[pool]
    labels = {POOL_LABEL: pool}
    if capacity_type is not None:
        labels[CAPACITY_TYPE_LABEL] = capacity_type
    spec: dict[str, Any] = {"nodeLabels": labels}
    tol = _tolerations(pool_node_taints(pv))
    if tol:
        spec["tolerations"] = tol
    from gpuplan.queues import tas_pools

    if pool in tas_pools(rf):  # a pool that can be empty gets no topology (queues.tas_pools)
        spec["topologyName"] = topology_name(rf)
    meta = metadata(rf, flavor_name(pool, capacity_type), extra_labels={POOL_LABEL: pool},
                    annotations=annotations(rf, "ResourceFlavor"))
    return obj(API, "ResourceFlavor", meta, spec=spec)


def topology(rf: ResolvedFleet) -> dict[str, Any] | None:
    levels = rf.fleet.spec.queueing.topology_levels  # type: ignore[union-attr]
    if not levels:
        return None
    names = [lv for lv in levels if lv != HOSTNAME] + [HOSTNAME]  # hostname only as the lowest level
    meta = metadata(rf, topology_name(rf), annotations=annotations(rf, "Topology"))
    return obj(API, "Topology", meta, spec={"levels": [{"nodeLabel": n} for n in names]})


def _resource_groups(ledger: QueueLedger, qp) -> list[dict[str, Any]]:
    out = []
    from gpuplan.queues import flavor_name

    for resources, pools in ledger.queue_groups(qp):
        flavors = []
        for pool, ctype in pools:
            rows = []
            for res in resources:
                fq = qp.quota(pool, res, ctype)
                row: dict[str, Any] = {"name": res, "nominalQuota": str(fq.nominal if fq else 0)}
                if fq is not None and fq.borrowing_limit is not None:
                    row["borrowingLimit"] = str(fq.borrowing_limit)
                if fq is not None and fq.lending_limit is not None:
                    row["lendingLimit"] = str(fq.lending_limit)
                rows.append(row)
            flavors.append({"name": flavor_name(pool, ctype), "resources": rows})
        out.append({"coveredResources": resources, "flavors": flavors})
    return out


def cluster_queue(rf: ResolvedFleet, ledger: QueueLedger, qp) -> dict[str, Any]:
    from gpuplan.queues import reclaim_within_cohort

    q = rf.fleet.spec.queueing
    spec: dict[str, Any] = {
        "cohortName": qp.cohort,
        # by name (set by the API server), not by a label anyone who can label a namespace could copy
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(qp.namespaces)}]},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": _resource_groups(ledger, qp),
        # reclaim lent quota from borrowers (of any priority unless a `Never` tier could evict with it)
        "preemption": {"withinClusterQueue": qp.preemption,
                       "reclaimWithinCohort": reclaim_within_cohort(ledger, rf, qp)},
    }
    if q is not None and q.fair_sharing:
        spec["fairSharing"] = {"weight": str(qp.weight)}
    meta = metadata(rf, qp.name, extra_labels={TENANT_LABEL: qp.tenant}, annotations=annotations(rf, "ClusterQueue"))
    return obj(API, "ClusterQueue", meta, spec=spec)


def cohorts(rf: ResolvedFleet, ledger: QueueLedger) -> list[dict[str, Any]]:
    """Hierarchical cohorts, only when a tenant names a child cohort."""
    if not ledger.child_cohorts:
        return []
    out = [obj(API, "Cohort", metadata(rf, ledger.cohort, annotations=annotations(rf, "Cohort")), spec={})]
    for name in ledger.child_cohorts:
        out.append(obj(API, "Cohort", metadata(rf, name, annotations=annotations(rf, "Cohort")),
                       spec={"parentName": ledger.cohort}))
    return out


def local_queue(rf: ResolvedFleet, tenant: str, ns: str) -> dict[str, Any]:
    meta = metadata(rf, LOCAL_QUEUE, namespace=ns, extra_labels={TENANT_LABEL: tenant},
                    annotations=annotations(rf, "LocalQueue"))
    return obj(API, "LocalQueue", meta, spec={"clusterQueue": f"gpuplan-{tenant}"})


def workload_priority_class(rf: ResolvedFleet, tier) -> dict[str, Any]:
    meta = metadata(rf, workload_priority_class_name(tier), extra_labels={TIER_LABEL: tier.name},
                    annotations=annotations(rf, "WorkloadPriorityClass"))
    return obj(API, "WorkloadPriorityClass", meta, value=tier.priority,
               description=f"gpuplan tier {tier.name} (queue order; the pods' PriorityClass has the same value)")


# --- installation -----------------------------------------------------------------------


def manager_config(rf: ResolvedFleet) -> dict[str, Any]:
    """The manager Configuration. The chart's own defaults (values.yaml, managerConfig) are
    repeated, because the chart takes the whole string; gpuplan adds waitForPodsReady,
    fairSharing, integrations and the quota check strategy."""
    q = rf.fleet.spec.queueing
    assert q is not None
    gang = q.gang_admission
    # waitForPodsReady is on in the v1beta2 Configuration whenever present (and Kueue's
    # defaults add it with 30m: apis/config/v1beta2/defaults.go:99-116); written out so
    # the timeout is the spec's
    wfpr: dict[str, Any] = {"timeout": gang.timeout, "blockAdmission": gang.block_admission,
                            "requeuingStrategy": {"timestamp": "Eviction"}}
    if gang.backoff_limit_count is not None:
        wfpr["requeuingStrategy"]["backoffLimitCount"] = gang.backoff_limit_count
    cfg: dict[str, Any] = {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
        }},
        "clientConnection": {"qps": 300, "burst": 500},
        "waitForPodsReady": wfpr,
        "integrations": {"frameworks": list(q.integrations)},
        # the ClusterQueues hold GPU quota only: cpu and memory requests must not make a job
        # inadmissible (flavorassigner.go:295 IgnoreUndeclaredResources; beta, on in 0.19)
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
    }
    if q.fair_sharing:
        # fairSharing present = on (pkg/scheduler/preemption/fairsharing/strategy.go:50-52)
        cfg["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return cfg


BY_HAND_PATH = "delivery/bootstrap-kueue.yaml"


def rolebinding_by_hand(rf: ResolvedFleet) -> bool:
    """The chart's visibility RoleBinding lives in kube-system (it binds the built-in
    ``extension-apiserver-authentication-reader`` Role, which exists only there;
    kubernetes-sigs/kueue v0.19.2 charts/kueue/templates/visibility/role_binding.yaml:19-35).
    The AppProject gpuplan writes admits no kube-system, and one refused object fails
    the whole sync (docs/charts.md, GP526), so under Argo CD with gpuplan's project the
    chart skips it (values.yaml:24-25 says so for GitOps projects) and gpuplan writes it
    in a file applied by hand with delivery/bootstrap.yaml. Without it the visibility
    APIService stays unavailable, which also stalls namespace deletion."""
    g = rf.fleet.spec.cluster.gitops
    return g.engine == "argocd" and g.project is None


def helm_values(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    out: dict[str, Any] = {}
    if rolebinding_by_hand(rf):
        out["enableVisibilityAuthReaderRoleBinding"] = False
    out["managerConfig"] = {"controllerManagerConfigYaml": dump(manager_config(rf)).rstrip("\n")}
    return out


def visibility_rolebinding(rf: ResolvedFleet) -> dict[str, Any]:
    """The chart's RoleBinding (``kueue.fullname`` = the release name), made here."""
    k = rf.fleet.spec.queueing.kueue  # type: ignore[union-attr]
    return obj("rbac.authorization.k8s.io/v1", "RoleBinding",
               metadata(rf, f"{RELEASE}-visibility-server-auth-reader", namespace="kube-system"),
               roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "extension-apiserver-authentication-reader"},
               subjects=[{"kind": "ServiceAccount", "name": f"{RELEASE}-controller-manager",
                          "namespace": k.namespace}])


def argo_application(rf: ResolvedFleet) -> dict[str, Any]:
    k = rf.fleet.spec.queueing.kueue  # type: ignore[union-attr]
    # Argo CD's native OCI source (v3.1+): the chart's artifact, path "."
    chart = {"repoURL": f"{CHART_REPO}/{CHART}", "targetRevision": k.chart_version, "path": "."}
    return argo_chart_application(rf, kueue_app_name(rf), chart, RELEASE, VALUES_PATH, k.namespace)


def flux_objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    k = rf.fleet.spec.queueing.kueue  # type: ignore[union-attr]
    return flux_chart_objects(rf, "kueue", CHART_REPO, CHART, RELEASE, k.chart_version, k.namespace, helm_values(rf),
                              oci=True)


# --- target -------------------------------------------------------------------------------


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    ledger = queue_ledger(rf)
    if ledger is None or not kueue_on(rf):
        return
    from gpuplan.lower.tenant_page import tenant_pages

    flavors = [resource_flavor(rf, p, c) for p, c in ledger.flavors_of()]
    topo = topology(rf)
    yield Artifact("kueue/resourceflavors.yaml", documents=tuple(([topo] if topo else []) + flavors),
                   description="Kueue ResourceFlavors, one per pool of a queued tier"
                   + (" (+ the Topology)" if topo else ""))
    queues = cohorts(rf, ledger) + [cluster_queue(rf, ledger, qp) for qp in ledger.queues]
    if queues:
        yield Artifact("kueue/clusterqueues.yaml", documents=tuple(queues),
                       description=f"Kueue ClusterQueues, one per tenant, cohort {cohort_name(rf)}")
    queued = set(queued_tiers(rf))
    if queued:
        yield Artifact("kueue/workloadpriorityclasses.yaml",
                       documents=tuple(workload_priority_class(rf, t) for t in rf.fleet.spec.tiers if t.name in queued),
                       description="Kueue WorkloadPriorityClasses, one per queued tier")
    tenants = {tn.name: tn for tn in rf.fleet.spec.tenants}
    for qp in ledger.queues:
        namespaces = queued_namespaces(ledger, tenants[qp.tenant])  # only those granted a queued tier
        if namespaces:
            yield Artifact(f"tenants/{qp.tenant}/localqueues.yaml",
                           documents=tuple(local_queue(rf, qp.tenant, ns) for ns in namespaces),
                           description=f"Kueue LocalQueues of tenant {qp.tenant}")
    yield Artifact(VALUES_PATH, documents=(helm_values(rf),), kustomize=False,
                   description="Helm values of the Kueue chart (manager configuration)")
    if engine(rf) == "argocd":
        yield Artifact(ARGO_APP_PATH, documents=(argo_application(rf),),
                       description="Argo CD Application: the Kueue Helm chart, values from kueue/values.yaml")
        if rolebinding_by_hand(rf):
            yield Artifact(BY_HAND_PATH, documents=(visibility_rolebinding(rf),), kustomize=False,
                           description="Kueue's visibility RoleBinding in kube-system, outside the AppProject: "
                                       "apply once by hand with delivery/bootstrap.yaml")
    else:
        yield Artifact(FLUX_PATH, documents=tuple(flux_objects(rf)), kustomize=False,
                       description="Flux HelmRepository (OCI) + HelmRelease of Kueue, values = kueue/values.yaml")
    yield from tenant_pages(rf, ledger)
