"""`gpuplan import` of Volcano Queues (`scheduling.volcano.sh/v1beta1`, docs/volcano.md): gpuplan's own
tree (examples/volcano.yaml synced) round-trips to the same Queues, and a hand-made shape (a queue per
team with capability / deserved / guarantee, with or without a parent, with or without a node-group
affinity) drafts the tenants' grants and limits, with GP969 for what cannot be mapped. Queue shapes
from the pinned CRD (gpuplan/upstream/crds, volcano v1.15.1 QueueSpec)."""

from __future__ import annotations

import copy

import yaml

from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import REPO, dump, snapshot
from tests.importer.test_foreign import _gfd, _run

TREE = REPO / "tests/golden/volcano"
VQ = "scheduling.volcano.sh/v1beta1"
NG = "volcano.sh/nodegroup-name"


def _import(doc):
    r = import_cluster(["-"], stdin=dump(doc))
    assert r.text is not None, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def _queues_of(files: dict) -> dict:
    text = next(b for p, b in files.items() if p.endswith("volcano/queues.yaml")).decode()
    return {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all(text) if isinstance(d, dict)}


def test_gpuplan_own_queues_round_trip_to_the_same_queues():
    r, spec = _import(snapshot("volcano.yaml", TREE))
    assert r.round_trip.built and not r.round_trip.unexplained
    golden = {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all((TREE / "volcano/queues.yaml").read_text())
              if isinstance(d, dict)}
    assert _queues_of(r.round_trip.files) == golden
    assert spec["queueing"]["engine"] == "volcano" and spec["queueing"]["tiers"] == ["training", "batch",
                                                                                      "burst-training"]
    tenants = {t["name"]: t for t in spec["tenants"]}
    # research deserves 4 on train-h100 and may reach 12: its borrowing limit is 8; on burst-h100 it
    # deserves nothing and reaches 8; vision keeps 8 of its 16 on burst-h100 (guarantee): it lends 8
    assert tenants["research"]["queueing"] == {"borrowingLimit": {"batch": 8, "burst-training": 8}}
    assert tenants["vision"]["queueing"] == {"cohort": "lab", "lendingLimit": {"burst-training": 8}}
    assert tenants["nlp"]["queueing"] == {"cohort": "lab", "borrowingLimit": {"training": 8}}
    assert tenants["nlp"]["quotas"] == {"nlp-train": {"training": 16, "burst-training": 16}}
    # one leaf deserves 12 for two tiers of vision-train: split evenly, and said
    assert sum(tenants["vision"]["quotas"]["vision-train"][t] for t in ("training", "batch")) == 12
    [todo] = [d for d in r.diagnostics if d.code == "GP958"]
    assert "Volcano Queue gpuplan-vision" in todo.message and "12 nvidia.com/gpu on pool train-h100" in todo.message
    assert not [d for d in r.diagnostics if d.code == "GP969"]


def test_an_edited_leaf_is_named_by_the_import_and_the_round_trip():
    doc = snapshot("volcano.yaml", TREE)
    leaf = next(o for o in doc["items"] if o["kind"] == "Queue" and o["metadata"]["name"] == "gpuplan-nlp.burst-h100")
    leaf["spec"]["weight"] = 4
    leaf["spec"]["capability"]["nvidia.com/gpu"] = "20"  # planned 24: what the cohort lends, less 4
    r, spec = _import(doc)
    [w] = [d for d in r.diagnostics if d.code == "GP969"]
    assert "Queue gpuplan-nlp.burst-h100: spec.weight 4 is not imported" in w.message and w.line
    nlp = next(t for t in spec["tenants"] if t["name"] == "nlp")
    assert nlp["queueing"]["borrowingLimit"] == {"training": 8, "burst-training": 4}
    # the draft builds the leaf with the cluster's capability, and without the weight
    assert _queues_of(r.round_trip.files)["gpuplan-nlp.burst-h100"]["capability"]["nvidia.com/gpu"] == "20"
    assert any("gpuplan-nlp.burst-h100: spec.weight removed" in u for u in r.round_trip.unexplained), \
        r.round_trip.unexplained


def _queue(name, parent=None, affinity=None, labels=None, **spec):
    if parent:
        spec["parent"] = parent
    if affinity is not None:
        spec["affinity"] = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affinity}}
    return {"apiVersion": VQ, "kind": "Queue", "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": spec}


def _ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _podgroup(ns, queue):
    return {"apiVersion": VQ, "kind": "PodGroup", "metadata": {"name": "pg", "namespace": ns},
            "spec": {"minMember": 2, "queue": queue}}


NODES = [_gfd(f"h100-{i}", "NVIDIA-H100-80GB-HBM3", "8", None, **{NG: "big"}) for i in range(2)] + \
        [_gfd(f"l4-{i}", "NVIDIA-L4", "4", None, **{NG: "small"}) for i in range(2)]


def _hand_made():
    return [*NODES, *(_ns(n) for n in ("team-a", "team-b", "team-c", "team-x", "ml-train")),
            _queue("root", weight=1), _queue("default", weight=1, reclaimable=True),
            _queue("research", parent="root", capability={"nvidia.com/gpu": "16"}),
            _queue("team-a", parent="research", affinity=["big"], deserved={"nvidia.com/gpu": "8"},
                   capability={"nvidia.com/gpu": "12", "cpu": "64"}, guarantee={"resource": {"nvidia.com/gpu": "2"}}),
            _queue("team-b", parent="research", affinity=["big"], deserved={"nvidia.com/gpu": "4"}, weight=3),
            _queue("team-c", deserved={"nvidia.com/gpu": "4"}, capability={"nvidia.com/gpu": "4"}),
            _queue("inference", affinity=["small"], deserved={"nvidia.com/gpu": "4"}),
            _podgroup("ml-train", "inference"),
            _queue("ghost", deserved={"nvidia.com/gpu": "2"}),
            _queue("team-x", affinity=["nowhere"], deserved={"nvidia.com/gpu": "2"})]


def test_hand_made_team_queues_draft_grants_limits_and_cohorts():
    r, spec = _run(_hand_made())
    pools = {p["name"]: p for p in spec["pools"]}
    tier_of = {t["pool"]: t["name"] for t in spec["tiers"]}
    big, small = (next(n for n, p in pools.items() if p["gpu"] == g) for g in ("H100-SXM5-80GB", "L4"))
    tenants = {t["name"]: t for t in spec["tenants"]}
    assert spec["queueing"]["engine"] == "volcano"
    assert sorted(spec["queueing"]["tiers"]) == sorted([tier_of[big], tier_of[small]])
    # team-a: deserved 8 on the H100 node group, reaches 12 (borrows 4), guarantees 2 (lends 6), under research
    assert tenants["team-a"]["quotas"] == {"team-a": {tier_of[big]: 8}}
    assert tenants["team-a"]["queueing"] == {"cohort": "research", "borrowingLimit": {tier_of[big]: 4},
                                             "lendingLimit": {tier_of[big]: 6}}
    assert tenants["team-b"]["queueing"] == {"cohort": "research"}
    # team-c: no parent, no affinity: the pool that advertises nvidia.com/gpu (two do: said); capability = deserved
    assert tenants["team-c"]["quotas"] == {"team-c": {tier_of[big]: 4}}
    assert tenants["team-c"]["queueing"] == {"borrowingLimit": {tier_of[big]: 0}}
    # a queue named by the PodGroups of a tenant's namespace is that tenant's
    assert tenants["ml-train"]["quotas"] == {"ml-train": {tier_of[small]: 4}}
    assert "team-x" not in {t for t, v in tenants.items() if v.get("quotas")}
    unread = {d.message.split(":")[0].split(" serves")[0].split(" also")[0]: d for d in r.diagnostics
              if d.code == "GP969"}
    assert set(unread) == {"Queue team-a", "Queue team-b", "Queue ghost", "Queue team-x"}, unread
    assert "cpu: 64" in unread["Queue team-a"].message
    assert "spec.weight 3" in unread["Queue team-b"].message
    assert "serves no imported tenant" in unread["Queue ghost"].message
    assert "nowhere" in unread["Queue team-x"].message and "no imported pool's node group" in unread["Queue team-x"].message
    assert all(d.line for d in unread.values())
    [split] = [d for d in r.diagnostics if d.code == "GP958" and "Queue team-c" in d.message]
    assert "advertised by pools" in split.message
    # what gpuplan writes instead is listed: its own queues added, the team queues removed
    rt = "\n".join(r.round_trip.unexplained)
    assert "Queue.scheduling.volcano.sh team-a: removed" in rt and "gpuplan-team-a." + big + ": added" in rt
    assert "Queue.scheduling.volcano.sh root" not in rt and "Queue.scheduling.volcano.sh default" not in rt
    built = _queues_of(r.round_trip.files)
    assert built["gpuplan.research"]["parent"] == "root"
    assert built[f"gpuplan-team-a.{big}"]["deserved"] == {"nvidia.com/gpu": "8"}
    assert built[f"gpuplan-team-a.{big}"]["guarantee"] == {"resource": {"nvidia.com/gpu": "2"}}


def test_kueue_and_volcano_in_one_cluster_read_kueue_and_say_so():
    doc = snapshot("kueue.yaml", REPO / "tests/golden/kueue")
    doc["items"] += copy.deepcopy([q for q in _hand_made() if q["kind"] == "Queue"])
    r, spec = _import(doc)
    assert spec["queueing"].get("engine", "kueue") == "kueue"
    assert [d for d in r.diagnostics if d.code == "GP969" and "one queueing engine" in d.message]
