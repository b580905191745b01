"""Volcano's Queues (gpuplan.queueing.volcano): the queue ledger's numbers in Volcano's fields, a
leaf per tenant and pool pinned to the pool's node group, and no Kueue object beside them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet, compile_fleet
from gpuplan.queueing.volcano.names import NODE_GROUP_LABEL, SCHEDULER
from gpuplan.queueing.volcano.queues import ROOT, leaf_name, tenant_queue_name, volcano_plan
from gpuplan.queues import queue_ledger, queued_tiers

REPO = Path(__file__).parents[2]
VOLCANO = REPO / "examples" / "volcano.yaml"


@pytest.fixture(scope="module")
def rf():
    c = check_fleet(VOLCANO)
    assert c.resolved is not None and not c.failed(), c.diagnostics
    return c.resolved


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    c = compile_fleet(VOLCANO, out_dir=tmp_path_factory.mktemp("volcano"))
    assert not [d for d in c.diagnostics if d.is_error]
    return {path: list(yaml.safe_load_all(data)) if path.endswith(".yaml") else data.decode()
            for path, data in c.files.items()}


def test_each_leaf_holds_its_tenants_grant_ceiling_and_lending_limit(rf):
    ledger, plan = queue_ledger(rf), volcano_plan(rf)
    assert ledger is not None and plan is not None and ledger.engine == "volcano"
    checked = 0
    for qp in ledger.queues:
        for fq in qp.quotas:
            leaf = plan.leaf(qp.tenant, fq.pool)
            assert leaf is not None and leaf.name == leaf_name(qp.tenant, fq.pool)
            assert dict(leaf.deserved)[fq.resource] == fq.nominal
            assert dict(leaf.capability)[fq.resource] == fq.potential
            assert dict(leaf.guarantee).get(fq.resource, 0) == fq.nominal - fq.lendable
            checked += 1
    assert checked >= 6
    # the example's lendingLimit keeps 8 of vision's 16 burst GPUs to itself
    assert dict(plan.leaf("vision", "burst-h100").guarantee) == {"nvidia.com/gpu": 8}


def test_a_leaf_lists_every_gpu_name_so_none_is_unlimited(rf):
    """Volcano leaves a name a capability does not list unlimited (resource_info.go:949-985): each
    leaf names every GPU resource of the fleet, 0 where the tenant holds none on that pool."""
    plan = volcano_plan(rf)
    for q in plan.queues:
        if q.leaf:
            cap = dict(q.capability)
            assert set(rf.gpu_resources) <= set(cap)
            assert cap["nvidia.com/mig-3g.40gb"] == 0  # the A100 pool's profile is no H100 leaf's


def test_the_hierarchy_sums_its_leaves_and_names_its_parents_first(rf):
    plan = volcano_plan(rf)
    names = [q.name for q in plan.queues]
    assert len(names) == len(set(names))
    for i, q in enumerate(plan.queues):
        assert q.parent == ROOT or q.parent in names[:i], q
    for tenant in ("vision", "nlp", "research"):
        top = next(q for q in plan.queues if q.name == tenant_queue_name(tenant))
        leaves = plan.leaves_of(tenant)
        assert leaves and all(x.parent == top.name for x in leaves)
        for field in ("deserved", "guarantee", "capability"):
            total: dict[str, int] = {}
            for x in leaves:
                for k, v in getattr(x, field):
                    total[k] = total.get(k, 0) + v
            assert {k: v for k, v in getattr(top, field) if v} == {k: v for k, v in total.items() if v}, field
    # vision and nlp name the child cohort lab: their queues sit under gpuplan.lab; research under root
    assert {q.parent for q in plan.queues if q.name in ("gpuplan-vision", "gpuplan-nlp")} == {"gpuplan.lab"}
    assert next(q for q in plan.queues if q.name == "gpuplan-research").parent == ROOT


def test_queue_objects_are_the_plan_and_pin_each_leaf_to_its_pools_nodes(rf, tree):
    plan = volcano_plan(rf)
    queues = {d["metadata"]["name"]: d for d in tree["volcano/queues.yaml"] if d}
    assert set(queues) == {q.name for q in plan.queues}
    for q in plan.queues:
        spec = queues[q.name]["spec"]
        assert spec["parent"] == q.parent and spec["reclaimable"] is True
        assert spec["capability"] == {k: str(v) for k, v in q.capability}
        if q.leaf:
            assert spec["affinity"] == {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [q.pool]}}
        else:
            assert "affinity" not in spec
    # every pool's nodes carry its node group: the NodeFeatureRule of a static pool, the NodePool template
    labelled = {}
    for path, docs in tree.items():
        for d in docs if isinstance(docs, list) else ():
            if not d:
                continue
            if d.get("kind") == "NodeFeatureRule":
                for rule in d["spec"]["rules"]:
                    labelled[rule["labels"]["gpuplan.dev/pool"]] = rule["labels"].get(NODE_GROUP_LABEL)
            elif d.get("kind") == "NodePool":
                labels = d["spec"]["template"]["metadata"]["labels"]
                labelled[labels["gpuplan.dev/pool"]] = labels.get(NODE_GROUP_LABEL)
    assert labelled == {p.name: p.name for p in rf.fleet.spec.pools}


def test_the_scheduler_runs_capacity_and_strict_node_groups_hierarchically(tree):
    conf = yaml.safe_load(tree["volcano/values.yaml"][0]["custom"]["scheduler_config_override"])
    plugins = {p["name"]: p for tier in conf["tiers"] for p in tier["plugins"]}
    assert plugins["capacity"]["enableHierarchy"] is True and plugins["nodegroup"]["enableHierarchy"] is True
    assert "strict" not in plugins["nodegroup"]  # strict is the default: unlabelled nodes fit no queue
    assert "proportion" not in plugins and "overcommit" not in plugins
    assert {"gang", "priority", "predicates"} <= set(plugins)
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert actions[0] == "enqueue" and {"allocate", "preempt", "reclaim"} <= set(actions)


def test_a_volcano_tree_has_no_kueue_object_and_a_kueue_tree_no_volcano_one(tree, tmp_path):
    groups = {d.get("apiVersion", "").split("/")[0] for docs in tree.values() if isinstance(docs, list) for d in docs if d}
    assert "scheduling.volcano.sh" in groups and "kueue.x-k8s.io" not in groups
    assert "delivery/volcano.yaml" in tree and "delivery/kueue.yaml" not in tree
    assert not any(p.startswith("kueue/") or p.endswith("localqueues.yaml") for p in tree)
    kueue = compile_fleet(REPO / "examples" / "kueue.yaml", out_dir=tmp_path / "kueue")
    text = b"".join(kueue.files.values()).decode()
    assert "volcano" not in text.lower()


def test_queued_tiers_contract_pods_name_the_volcano_scheduler(rf):
    from gpuplan.identity import contract_spec

    queued = set(queued_tiers(rf))
    assert queued == {"training", "batch", "burst-training"}
    for t in rf.fleet.spec.tiers:
        assert (contract_spec(rf, t).get("schedulerName") == SCHEDULER) == (t.name in queued), t.name


def test_every_queue_passes_volcanos_own_webhook_rules(rf, tree):
    """What Volcano's admission webhook holds a Queue to (pkg/webhooks/admission/queues/validate):
    deserved at most capability, every guarantee within deserved, a parent that exists when the
    queue is made (a sync wave per level, parents first), at most 5 levels deep."""
    plan = volcano_plan(rf)
    depth = {ROOT: 0}
    for q in plan.queues:
        cap, des, gua = dict(q.capability), dict(q.deserved), dict(q.guarantee)
        assert all(v <= cap.get(k, 0) for k, v in des.items()), q.name
        assert all(k in des and v <= des[k] for k, v in gua.items()), q.name
        depth[q.name] = depth[q.parent] + 1
    assert max(depth.values()) <= 5
    wave = {d["metadata"]["name"]: int(d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
            for d in tree["volcano/queues.yaml"] if d}
    for q in plan.queues:
        if q.parent != ROOT:
            assert wave[q.parent] < wave[q.name], q.name


def test_the_tenant_pages_volcano_objects_fit_volcanos_schemas(tree):
    """Each page's Volcano Job and PodGroup, as a tenant copies it, against Volcano v1.15.1's CRDs
    (the pinned strict schemas: an unknown or misspelt field is an error there)."""
    import re

    from gpuplan.verify.schemas import crd_validator, prepare, schema_errors

    seen = set()
    for path, text in tree.items():
        if not re.fullmatch(r"tenants/[^/]+/README\.md", path):
            continue
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            for obj in yaml.safe_load_all(block):
                group, _, version = obj["apiVersion"].rpartition("/")
                if group not in ("scheduling.volcano.sh", "batch.volcano.sh"):
                    continue
                v = crd_validator(group, obj["kind"], version)
                assert v is not None, obj["kind"]
                assert list(schema_errors(v, prepare(group, obj["kind"], v.schema, obj))) == [], (path, obj["kind"])
                seen.add(obj["kind"])
    assert seen == {"Job", "PodGroup"}
