"""The Kueue objects of examples/kueue.yaml (Argo CD) and of the same spec on Flux:
strict kueue.x-k8s.io/v1beta2 schemas, the CRDs' CEL rules (gpuplan.verify.cel), kubernetes-validate
--strict for core kinds and for the tenant pages' example Jobs, and what Kueue does with them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from gpuplan.verify import cel
from tests.conformance.test_conformance_schemas import validate
from tests.outputkit import REPO, all_objects, compile_ok, docs

CEL_DIR = REPO / "gpuplan" / "upstream" / "cel"
K8S = "1.33.0"


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    src = (REPO / "examples" / "kueue.yaml").read_text(encoding="utf-8")
    flux = tmp_path_factory.mktemp("flux") / "kueue-flux.yaml"
    flux.write_text(src.replace("engine: argocd", "engine: flux"), encoding="utf-8")
    return {"argocd": compile_ok(REPO / "examples" / "kueue.yaml"), "flux": compile_ok(flux)}


# --- CEL -------------------------------------------------------------------------------------


def _cel_rules(kind: str) -> list[dict]:
    path = CEL_DIR / f"{kind.lower()}-kueue-v1beta2.cel.json"
    assert path.is_file(), f"no CEL rules for {kind}"
    return json.loads(path.read_text(encoding="utf-8"))


def _nodes(obj, path: str):
    """The values a rule path ($.spec.x[*].y) selects; absent fields select nothing."""
    cur = [obj]
    for part in re.findall(r"\.([A-Za-z0-9_]+)|(\[\*\])", path[1:]):
        name, star = part
        nxt = []
        for c in cur:
            if star:
                nxt.extend(c if isinstance(c, list) else [])
            elif isinstance(c, dict) and name in c:
                nxt.append(c[name])
        cur = nxt
    return cur


def cel_errors(obj: dict) -> list[str]:
    """Evaluate every CEL rule of the object's CRD. Transition rules (oldSelf) are
    evaluated against the same object: a GitOps re-sync of unchanged output must pass."""
    out = []
    for rule in _cel_rules(obj["kind"]):
        prog = cel.expression(rule["rule"])
        for node in _nodes(obj, rule["path"]):
            try:
                result = cel.run(prog, {"self": node, "oldSelf": node})
            except Exception:  # noqa: BLE001 - an evaluation error rejects the object, as in the API server
                result = None
            if result is not True:
                out.append(f"{rule['path']}: {rule['message']}")
    return out


# --- schemas and CEL ------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["argocd", "flux"])
def test_every_object_validates_and_passes_cel(trees, engine):
    kinds = set()
    for path, obj in all_objects(trees[engine]):
        try:
            validate(obj)
        except Exception as exc:  # noqa: BLE001 - name the file in the failure
            pytest.fail(f"{path}: {obj['kind']} {obj['metadata'].get('name')}: {exc}")
        if obj["apiVersion"] == "kueue.x-k8s.io/v1beta2":
            assert not cel_errors(obj), (path, obj["metadata"]["name"], cel_errors(obj))
        kinds.add(obj["kind"])
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Topology"} <= kinds
    assert ("Application" if engine == "argocd" else "HelmRelease") in kinds


def test_cel_and_schema_checks_are_live():
    """A ClusterQueue that borrows without a cohort, or a flavor that misses a covered
    resource, breaks a CRD rule; a wrong field breaks the strict schema."""
    rg = {"coveredResources": ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"],
          "flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1",
                                                   "borrowingLimit": "1"}]}]}
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "x"},
          "spec": {"resourceGroups": [rg]}}
    errors = cel_errors(cq)
    assert "$.spec: borrowingLimit must be nil when cohort is empty" in errors
    assert "$.spec.resourceGroups[*]: flavors must have the same number of resources as the coveredResources" in errors
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "example.com/rack"}]}}
    assert cel_errors(topo) == ["$.spec.levels: the kubernetes.io/hostname label can only be used at the lowest "
                                "level of topology"]
    with pytest.raises(AssertionError):
        validate({**cq, "spec": {"cohort": "old-v1beta1-field"}})


# --- what Kueue does with them ---------------------------------------------------------------


def _by_kind(c, kind):
    return [o for _, o in all_objects(c) if o["kind"] == kind]


def _example_jobs(c) -> list[tuple[str, dict]]:
    """The tenant pages' example Jobs for queued tiers (those that name a Kueue queue)."""
    out = []
    for path in sorted(p for p in c.files if p.startswith("tenants/") and p.endswith("README.md")):
        for block in re.findall(r"```yaml\n(.*?)```", c.files[path].decode(), re.S):
            doc = yaml.safe_load(block)
            if doc.get("kind") == "Job" and "kueue.x-k8s.io/queue-name" in doc["metadata"].get("labels", {}):
                out.append((path, doc))
    return out


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, taint["effect"]) or t.get("key") != taint["key"]:
            continue
        if t.get("operator") == "Exists" or t.get("value") == taint.get("value"):
            return True
    return False


@pytest.mark.slow
def test_tenant_pages_show_admissible_jobs(trees):
    """Each example Job is a valid batch/v1 Job (strict) that Kueue admits: its queue label
    names the LocalQueue of its namespace, its priority class exists, its nodeSelector
    matches exactly one flavor of its ClusterQueue (flavorassigner.go:1246-1252), the
    whole job fits in what that queue can be admitted, and the tolerations Kueue injects
    from the flavor let its pods onto the pool's tainted nodes."""
    c = trees["argocd"]
    ledger = c.resolved.capacity.queues
    lqs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
           for o in _by_kind(c, "LocalQueue")}
    wpcs = {o["metadata"]["name"] for o in _by_kind(c, "WorkloadPriorityClass")}
    flavors = {o["metadata"]["name"]: o["spec"] for o in _by_kind(c, "ResourceFlavor")}
    cqs = {o["metadata"]["name"]: o for o in _by_kind(c, "ClusterQueue")}
    jobs = _example_jobs(c)
    assert len(jobs) >= 6
    for path, job in jobs:
        kubernetes_validate.validate(job, K8S, strict=True)
        ns = job["metadata"]["namespace"]
        cq_name = lqs[(ns, job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"])]
        assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] in wpcs
        pod = job["spec"]["template"]["spec"]
        cq_flavors = [f["name"] for g in cqs[cq_name]["spec"]["resourceGroups"] for f in g["flavors"]]
        matching = [f for f in cq_flavors
                    if all(pod["nodeSelector"].get(k) == v for k, v in flavors[f]["nodeLabels"].items())]
        assert len(matching) == 1, (path, matching)
        qp = ledger.queue(cq_name.removeprefix("gpuplan-"))
        # the one resource the queue covers; Kueue ignores the others (a gang's EFA:
        # quotaCheckStrategy IgnoreUndeclared)
        [(res, qty)] = [(r, q) for r, q in pod["containers"][0]["resources"]["requests"].items()
                        if any(x.resource == r for x in qp.quotas)]
        # the Workload's pod set: min(parallelism, completions) pods (job_controller.go:451-458)
        need = int(qty) * min(job["spec"]["parallelism"], job["spec"]["completions"])
        fq = next(q for q in qp.quotas if q.flavor == matching[0] and q.resource == res)
        assert need <= fq.potential, (path, need, fq)
        pool = c.resolved.pool_by_name[matching[0].removeprefix("gpuplan-")]
        from gpuplan.identity import pool_node_taints

        for taint in pool_node_taints(pool):
            assert _tolerates(flavors[matching[0]].get("tolerations", []), taint), (path, taint)


def test_gang_job_is_one_podset_of_all_its_pods(trees):
    """Kueue admits a Job as one Workload whose pod set counts `parallelism` pods, so the
    gang tier's example asks for nodesPerJob pods at once, in the declared topology."""
    c = trees["argocd"]
    [gang] = [j for _, j in _example_jobs(c) if j["metadata"]["generateName"] == "training-"
              and j["metadata"]["namespace"] == "nlp-train"]
    assert gang["spec"]["parallelism"] == gang["spec"]["completions"] == 2
    ann = gang["spec"]["template"]["metadata"]["annotations"]
    assert ann == {"kueue.x-k8s.io/podset-required-topology": "topology.example.com/rack"}
    [topo] = _by_kind(c, "Topology")
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == ["topology.example.com/rack", "kubernetes.io/hostname"]
    # topology-aware: the static pools' flavors; the Karpenter pool can be empty (queues.tas_pools)
    tas = {f["metadata"]["name"]: f["spec"].get("topologyName") for f in _by_kind(c, "ResourceFlavor")}
    assert tas == {"gpuplan-train-h100": topo["metadata"]["name"], "gpuplan-burst-h100": None}


def test_manager_configuration(trees):
    values = docs(trees["argocd"].files["kueue/values.yaml"])[0]
    cfg = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and cfg["kind"] == "Configuration"
    assert cfg["waitForPodsReady"] == {"timeout": "15m", "blockAdmission": False,
                                       "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5}}
    assert cfg["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob"]
    assert cfg["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}
    assert cfg["fairSharing"]["preemptionStrategies"]
    # the chart's own settings stay: it replaces the whole configuration with this string
    assert cfg["webhook"] == {"port": 9443} and cfg["leaderElection"]["leaderElect"] is True


def test_delivery(trees):
    argo, flux = trees["argocd"], trees["flux"]
    root = docs(argo.files["kustomization.yaml"])[0]["resources"]
    assert {"delivery/kueue.yaml", "kueue/clusterqueues.yaml", "kueue/resourceflavors.yaml",
            "tenants/nlp/localqueues.yaml"} <= set(root)
    assert "kueue/values.yaml" not in root
    [app] = docs(argo.files["delivery/kueue.yaml"])
    src = app["spec"]["sources"][0]
    assert (src["repoURL"], src["targetRevision"], src["path"]) == ("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", ".")
    assert src["helm"]["valueFiles"] == ["$values/generated/kueue/values.yaml"]
    # Flux: the HelmRelease is synced (and waited for) with the operator, before the tree
    sub = docs(flux.files["delivery/gpu-operator/kustomization.yaml"])[0]["resources"]
    assert "kueue.yaml" in sub and "delivery/gpu-operator/kueue.yaml" not in docs(flux.files["kustomization.yaml"])[0]["resources"]
    repo, release = docs(flux.files["delivery/gpu-operator/kueue.yaml"])
    assert repo["spec"]["type"] == "oci" and release["spec"]["chart"]["spec"]["version"] == "0.19.2"
    assert release["spec"]["values"] == docs(flux.files["kueue/values.yaml"])[0]


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: `kubectl kustomize` cannot run")
def test_kustomize_builds_the_kueue_tree(trees, tmp_path):
    root = tmp_path / "generated"
    for rel, data in trees["argocd"].files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    r = subprocess.run([KUBECTL, "kustomize", str(root)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(r.stdout) if d}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass"} <= kinds


def test_pinned_schemas_are_listed_with_their_source():
    """Every pinned Kueue schema and CEL file is listed in gpuplan/upstream/sources.json
    with its repository, tag and commit (the comparison with the reference copies is
    `python -m gpuplan.upstream.refresh_kueue`'s; tests never read that directory)."""
    from gpuplan.upstream.pins import sources

    listed = {e["schema"]: e for e in sources()["crds"] if e["apiVersion"].startswith("kueue.x-k8s.io/")}
    pinned = REPO / "gpuplan" / "upstream"
    for kind in ("clusterqueue", "cohort", "localqueue", "resourceflavor", "workloadpriorityclass", "topology"):
        e = listed[f"crds/kueue.x-k8s.io/{kind}_v1beta2.json"]
        assert (e["repository"], e["tag"]) == ("kubernetes-sigs/kueue", "v0.19.2") and len(e["commit"]) == 40
        assert (pinned / e["schema"]).is_file() and (pinned / e["cel"]).is_file()


def test_hierarchical_cohorts(tmp_path):
    """A tenant's `queueing.cohort` becomes a child Cohort of the fleet's cohort; its queue
    names the child, and every object passes the schema and the CEL rules."""
    src = (REPO / "examples" / "kueue.yaml").read_text(encoding="utf-8")
    src = src.replace("        fairSharingWeight: 2\n", "        fairSharingWeight: 2\n        cohort: vision-teams\n")
    p = tmp_path / "hier.yaml"
    p.write_text(src, encoding="utf-8")
    c = compile_ok(p)
    objs = docs(c.files["kueue/clusterqueues.yaml"])
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Cohort"}
    assert cohorts == {"gpuplan-kueue-lab": {}, "vision-teams": {"parentName": "gpuplan-kueue-lab"}}
    cq = {o["metadata"]["name"]: o["spec"]["cohortName"] for o in objs if o["kind"] == "ClusterQueue"}
    assert cq == {"gpuplan-vision": "vision-teams", "gpuplan-nlp": "gpuplan-kueue-lab",
                  "gpuplan-research": "gpuplan-kueue-lab"}
    for o in objs:
        validate(o)
        assert not cel_errors(o)
    # a child cohort without quota or limits passes everything up: the same max admitted
    flat = c.resolved.capacity.queues.queue("vision")
    assert [q.potential for q in flat.quotas] == [32, 32]


def test_every_local_queue_is_in_its_cluster_queues_namespace_selector(trees):
    """Kueue admits from a LocalQueue only when its namespace matches the ClusterQueue's
    namespaceSelector: the tenant's namespaces by name (kubernetes.io/metadata.name, set by
    the API server), so a namespace that copies the tenant label joins no queue."""
    from gpuplan.placement.simulate import _selects, namespace_object

    c = trees["argocd"]
    nss = {o["metadata"]["name"]: namespace_object(o) for o in _by_kind(c, "Namespace")}
    cqs = {o["metadata"]["name"]: o["spec"]["namespaceSelector"] for o in _by_kind(c, "ClusterQueue")}
    lqs = _by_kind(c, "LocalQueue")
    # one per namespace granted a queued tier (vision-serve runs only the unqueued inference tier)
    assert len(lqs) == 3
    for lq in lqs:
        selector = cqs[lq["spec"]["clusterQueue"]]
        assert _selects(selector, nss[lq["metadata"]["namespace"]]), lq["metadata"]
        copied = namespace_object({"metadata": {"name": "copycat", "labels": dict(nss[lq["metadata"]["namespace"]]
                                                                                 ["metadata"]["labels"])}})
        assert not _selects(selector, copied)


def test_tenant_page_names_only_the_namespaces_that_have_the_local_queue(trees):
    """vision-serve is granted no queued tier, so it gets no LocalQueue, and the page says so."""
    c = trees["argocd"]
    queues = {d["metadata"]["namespace"] for d in docs(c.files["tenants/vision/localqueues.yaml"])}
    page = c.files["tenants/vision/README.md"].decode()
    sentence = next(line for line in page.splitlines() if "the LocalQueue `default`" in line)
    assert queues == {"vision-train"}
    assert "`vision-train`" in sentence and "vision-serve" not in sentence and "Every namespace" not in sentence
