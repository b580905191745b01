"""The emitted Kueue objects through a model of Kueue's admission at v0.19.2, with the tenant
pages' example Jobs: which are admitted on an idle cluster and which wait forever.

The model follows kueue v0.19.2:
- a LocalQueue feeds its ClusterQueue only if the CQ's namespaceSelector selects the namespace;
- flavors are tried in order within the resource group that covers the pod set's resources
  (pkg/scheduler/flavorassigner/flavorassigner.go); a flavor whose nodeLabels contradict the
  pod's nodeSelector does not fit;
- topology (pkg/scheduler/flavorassigner/tas_flavorassigner.go:160-204): a ClusterQueue whose
  flavors are all topology-aware makes every pod set TAS; otherwise a pod set that does not ask
  for TAS may not use a topology-aware flavor, and one that asks may use only those;
- TAS capacity comes only from existing Nodes that match the flavor and carry a label for every
  level (pkg/util/tas/node.go:21-33); a required level needs one domain that holds every pod;
- quota: the flavor's nominal quota plus what the cohort lends, up to the borrowing limit
  (pkg/cache/scheduler/resource_node.go), on an idle cluster."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from gpuplan.placement.simulate import _selects, namespace_object
from tests.outputkit import REPO, all_objects, compile_ok
from tests.rules.helpers import edit

RACKS = {"gpu-h100-01": "rack-a", "gpu-h100-02": "rack-a", "gpu-h100-03": "rack-b", "gpu-h100-04": "rack-b"}
RACK = "topology.example.com/rack"


@pytest.fixture(scope="module")
def tree():
    return compile_ok(REPO / "examples" / "kueue.yaml")


def _objects(c, kind):
    return [o for _, o in all_objects(c) if o["kind"] == kind]


def _jobs(c) -> dict[tuple[str, str], dict]:
    """(namespace, tier) -> the example Job of a queued tier on a tenant page."""
    out = {}
    for path in sorted(p for p in c.files if p.startswith("tenants/") and p.endswith("README.md")):
        for block in re.findall(r"```yaml\n(.*?)```", c.files[path].decode(), re.S):
            doc = yaml.safe_load(block)
            if doc.get("kind") == "Job" and "kueue.x-k8s.io/queue-name" in doc["metadata"].get("labels", {}):
                out[(doc["metadata"]["namespace"], doc["metadata"]["generateName"].rstrip("-"))] = doc
    return out


def _nodes(c) -> list[dict]:
    """The cluster's GPU nodes before any job runs: the static pools' nodes (the example's H100s
    racked in two racks), none of the Karpenter pool."""
    rf = c.resolved
    out = []
    for p in rf.fleet.spec.pools:
        if p.karpenter is not None or not p.nodes:
            continue
        for n in p.nodes:
            labels = {"gpuplan.dev/pool": p.name, "kubernetes.io/hostname": n}
            if n in RACKS:
                labels[RACK] = RACKS[n]
            out.append({"name": n, "labels": labels, "gpus": rf.pool_by_name[p.name].node_resources()})
    return out


class Kueue:
    def __init__(self, c, nodes):
        self.cqs = {o["metadata"]["name"]: o for o in _objects(c, "ClusterQueue")}
        self.lqs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in _objects(c, "LocalQueue")}
        self.flavors = {o["metadata"]["name"]: o for o in _objects(c, "ResourceFlavor")}
        self.topologies = {o["metadata"]["name"]: [lv["nodeLabel"] for lv in o["spec"]["levels"]]
                           for o in _objects(c, "Topology")}
        self.nodes = nodes

    def _tas_only(self, cq) -> bool:
        return all("topologyName" in self.flavors[f["name"]]["spec"]
                   for g in cq["spec"]["resourceGroups"] for f in g["flavors"])

    def _available(self, cq, flavor: str, res: str) -> int:
        """Nominal plus what the cohort lends (idle), up to the borrowing limit."""
        def quota(q):
            for g in q["spec"]["resourceGroups"]:
                for f in g["flavors"]:
                    if f["name"] == flavor:
                        for r in f["resources"]:
                            if r["name"] == res:
                                return r
            return None
        mine = quota(cq)
        if mine is None:
            return 0
        nominal = int(mine["nominalQuota"])
        lent = 0
        for other in self.cqs.values():
            if other is cq or other["spec"].get("cohortName") != cq["spec"].get("cohortName"):
                continue
            r = quota(other)
            if r is not None:
                n = int(r["nominalQuota"])
                lent += min(n, int(r["lendingLimit"])) if "lendingLimit" in r else n
        borrow = lent if "borrowingLimit" not in mine else min(lent, int(mine["borrowingLimit"]))
        return nominal + borrow

    def _tas_fits(self, flavor, pods: int, per_pod: dict, level: str | None) -> bool:
        spec = flavor["spec"]
        levels = self.topologies[spec["topologyName"]]
        nodes = [n for n in self.nodes
                 if all(n["labels"].get(k) == v for k, v in spec.get("nodeLabels", {}).items())
                 and all(lv in n["labels"] for lv in levels)]

        def fit(group):
            return sum(min(n["gpus"].get(r, 0) // v for r, v in per_pod.items()) for n in group) >= pods
        if level is None:
            return fit(nodes)
        domains: dict[str, list] = {}
        for n in nodes:
            domains.setdefault(n["labels"][level], []).append(n)
        return any(fit(g) for g in domains.values())

    def admit(self, job: dict) -> str | None:
        """The flavor the job is admitted on, or None (it waits)."""
        ns = job["metadata"]["namespace"]
        lq = self.lqs.get((ns, job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]))
        if lq is None:
            return None
        cq = self.cqs[lq["spec"]["clusterQueue"]]
        if not _selects(cq["spec"]["namespaceSelector"], namespace_object({"metadata": {"name": ns}})):
            return None
        tmpl = job["spec"]["template"]
        ann = (tmpl.get("metadata") or {}).get("annotations", {})
        explicit = any(k in ann for k in ("kueue.x-k8s.io/podset-required-topology",
                                          "kueue.x-k8s.io/podset-preferred-topology",
                                          "kueue.x-k8s.io/podset-unconstrained-topology"))
        tas = explicit or self._tas_only(cq)
        pods = min(job["spec"].get("parallelism", 1), job["spec"].get("completions", 1))
        per_pod: dict[str, int] = {}
        for ctr in tmpl["spec"]["containers"]:
            for r, v in ctr["resources"]["limits"].items():
                per_pod[r] = per_pod.get(r, 0) + int(v)
        selector = tmpl["spec"].get("nodeSelector", {})
        # quotaCheckStrategy: IgnoreUndeclared (lower/kueue.py manager_config): a resource no group of
        # the queue covers (cpu, vpc.amazonaws.com/efa) is not checked (kueue v0.19.2
        # pkg/scheduler/flavorassigner/flavorassigner.go:294-296 IgnoreUndeclaredResources)
        covered = {r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]}
        per_pod = {r: v for r, v in per_pod.items() if r in covered}
        for g in cq["spec"]["resourceGroups"]:
            if not set(per_pod) <= set(g["coveredResources"]):
                continue
            for f in g["flavors"]:
                flavor = self.flavors[f["name"]]
                labels = flavor["spec"].get("nodeLabels", {})
                if any(k in selector and selector[k] != v for k, v in labels.items()):
                    continue
                if ("topologyName" in flavor["spec"]) != tas:
                    continue  # tas_flavorassigner.go: TAS pod sets on TAS flavors only, and the reverse
                if any(pods * v > self._available(cq, f["name"], r) for r, v in per_pod.items()):
                    continue
                if tas and not self._tas_fits(flavor, pods, per_pod, ann.get("kueue.x-k8s.io/podset-required-topology")):
                    continue
                return f["name"]
        return None


def test_burst_training_is_admitted_with_no_burst_node(tree):
    """Before: every flavor was topology-aware, so the queue was TAS-only, the burst job became
    a TAS pod set, and the empty Karpenter pool had no TAS capacity: it waited forever."""
    k = Kueue(tree, _nodes(tree))
    jobs = _jobs(tree)
    assert not [n for n in k.nodes if n["labels"]["gpuplan.dev/pool"] == "burst-h100"]
    for ns in ("vision-train", "nlp-train", "research"):
        assert k.admit(jobs[(ns, "burst-training")]) == "gpuplan-burst-h100", ns
    old = copy.deepcopy(k)
    old.flavors["gpuplan-burst-h100"]["spec"]["topologyName"] = "gpuplan-kueue-lab"
    assert old.admit(jobs[("vision-train", "burst-training")]) is None


def test_gangs_and_batch_are_admitted_on_the_racked_pool(tree):
    k = Kueue(tree, _nodes(tree))
    jobs = _jobs(tree)
    assert k.admit(jobs[("vision-train", "training")]) == "gpuplan-train-h100"
    assert k.admit(jobs[("nlp-train", "training")]) == "gpuplan-train-h100"
    assert k.admit(jobs[("research", "batch")]) == "gpuplan-train-h100"
    # the unconstrained-topology annotation is what lets batch use the TAS flavor in a mixed queue
    bare = copy.deepcopy(jobs[("vision-train", "batch")])
    assert k.admit(bare) == "gpuplan-train-h100"
    bare["spec"]["template"].pop("metadata")
    assert k.admit(bare) is None


def test_a_gang_waits_when_no_rack_holds_it(tree):
    k = Kueue(tree, [n for n in _nodes(tree) if n["name"] != "gpu-h100-02"])  # rack-a down to one node
    job = copy.deepcopy(_jobs(tree)[("vision-train", "training")])
    assert k.admit(job) == "gpuplan-train-h100"  # rack-b still holds both pods
    k.nodes = [n for n in k.nodes if n["name"] != "gpu-h100-04"]
    assert k.admit(job) is None


def test_a_namespace_that_copies_labels_joins_no_queue(tree):
    k = Kueue(tree, _nodes(tree))
    job = copy.deepcopy(_jobs(tree)[("vision-train", "burst-training")])
    job["metadata"]["namespace"] = "copycat"
    k.lqs[("copycat", "default")] = copy.deepcopy(k.lqs[("vision-train", "default")])
    assert k.admit(job) is None


def test_gang_topology_on_a_karpenter_pool_is_refused(tmp_path):
    from gpuplan.compiler import check_fleet

    text = (REPO / "examples" / "kueue.yaml").read_text()
    text = edit(text, "        nodesPerJob: 2               # 32 EFA interfaces (p5.48xlarge), vpc.amazonaws.com/efa\n",
                "        nodesPerJob: 2\n        topologyLevel: topology.example.com/rack\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    [d] = [d for d in check_fleet(p).diagnostics if d.code == "GP430"]
    assert "burst-h100" in d.message and d.line is not None


def test_preemption_follows_the_tiers(tree):
    """vision's queue holds batch (preemption: Never, the lowest queued priority) and training:
    training may preempt batch (LowerPriority), batch can evict no one; every queue reclaims
    only from lower priorities when it holds batch, from any otherwise."""
    cqs = {o["metadata"]["name"]: o["spec"]["preemption"] for o in _objects(tree, "ClusterQueue")}
    assert cqs["gpuplan-vision"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    assert cqs["gpuplan-research"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    assert cqs["gpuplan-nlp"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
