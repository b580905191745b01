"""`gpuplan verify-cluster` on a Volcano fleet (examples/volcano.yaml): the live Volcano Queues
(`kubectl get queues.scheduling.volcano.sh -o json`) against the planned ones, and the pools'
nodes against their `volcano.sh/nodegroup-name` label. The live Queues are the golden tree's
`volcano/queues.yaml` with the fields the API server adds (uid, resourceVersion, status), so the
check is made against what gpuplan writes, not against itself."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from gpuplan.compiler import PLANNED_ADMISSION_AND_QUEUES, check_fleet, planned_objects, planned_quotas
from gpuplan.drift import LiveInputError, parse_live, verify
from tests.conftest import REPO
from tests.importer.snapshot import snapshot

TREE = REPO / "tests/golden/volcano"


@pytest.fixture(scope="module")
def rf():
    c = check_fleet(REPO / "examples/volcano.yaml")
    assert c.resolved is not None
    return c.resolved


def _queues() -> list[dict]:
    out = []
    for i, d in enumerate(yaml.safe_load_all((TREE / "volcano/queues.yaml").read_text())):
        if isinstance(d, dict) and d.get("kind") == "Queue":
            d["metadata"].update(uid=f"u-{i}", resourceVersion=str(100 + i), creationTimestamp="2026-01-01T00:00:00Z")
            d["status"] = {"state": "Open", "reservation": {}, "allocated": {"nvidia.com/gpu": "0"}}
            out.append(d)
    # Volcano's controller makes these two itself: gpuplan plans neither, and says nothing of them
    out += [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": n},
             "spec": {"reclaimable": True, "weight": 1}} for n in ("root", "default")]
    return out


def _by_name(items: list[dict], name: str) -> dict:
    return next(q for q in items if q["metadata"]["name"] == name)


def _findings(rf, items: list[dict]) -> list:
    live = parse_live([("live.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))])
    return verify(rf, live, planned_quotas(rf), planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES)).diagnostics


def _queue_findings(rf, items):
    return sorted((d.code, d.path, d.message) for d in _findings(rf, items) if d.code == "GP889")


def test_queues_as_planned_have_no_finding(rf):
    assert _queue_findings(rf, _queues()) == []


def test_the_plan_holds_every_queue_of_the_tree(rf):
    planned = {o["metadata"]["name"] for o in planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES)
               if o["kind"] == "Queue"}
    assert planned == {q["metadata"]["name"] for q in _queues()} - {"root", "default"}
    assert len(planned) == 10


def test_a_missing_leaf_is_a_finding_at_its_tenant(rf):
    items = [q for q in _queues() if q["metadata"]["name"] != "gpuplan-nlp.train-h100"]
    [(code, path, msg)] = _queue_findings(rf, items)
    assert code == "GP889" and path == "spec.tenants[1]"  # nlp
    assert "gpuplan-nlp.train-h100 is not in the cluster" in msg and "leaf" in msg


def test_a_missing_cohort_queue_is_a_finding(rf):
    items = [q for q in _queues() if q["metadata"]["name"] != "gpuplan.lab"]
    [(code, path, msg)] = _queue_findings(rf, items)
    assert path == "spec.queueing" and "gpuplan.lab is not in the cluster" in msg


def test_each_field_that_differs_is_a_finding_with_its_numbers(rf):
    items = _queues()
    leaf = _by_name(items, "gpuplan-nlp.train-h100")
    leaf["spec"]["capability"]["nvidia.com/gpu"] = "32"  # planned 24
    del leaf["spec"]["capability"]["nvidia.com/mig-3g.40gb"]  # an absent name is not limited
    burst = _by_name(items, "gpuplan-vision.burst-h100")
    burst["spec"]["guarantee"]["resource"]["nvidia.com/gpu"] = "16"  # planned 8
    burst["spec"]["deserved"]["nvidia.com/gpu"] = 20  # an integer, as a hand edit may write it
    research = _by_name(items, "gpuplan-research.train-h100")
    research["spec"]["parent"] = "root"
    research["spec"]["affinity"]["nodeGroupAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = ["burst-h100"]
    got = _queue_findings(rf, items)
    text = "\n".join(m for _, _, m in got)
    assert len(got) == 5, text
    assert {p for _, p, _ in got} == {"spec.tenants[0]", "spec.tenants[1]", "spec.tenants[2]"}
    assert "gpuplan-nlp.train-h100 capability differs" in text
    assert "nvidia.com/gpu: 32 (planned 24)" in text and "nvidia.com/mig-3g.40gb: absent (planned 0)" in text
    assert "gpuplan-vision.burst-h100 guarantee differs: nvidia.com/gpu: 16 (planned 8)" in text
    assert "gpuplan-vision.burst-h100 deserved differs: nvidia.com/gpu: 20 (planned 16)" in text
    assert "gpuplan-research.train-h100 parent root, planned gpuplan-research" in text
    assert "gpuplan-research.train-h100 nodeGroupAffinity burst-h100, planned train-h100" in text


def test_the_same_numbers_in_other_spelling_are_no_finding(rf):
    items = _queues()
    leaf = _by_name(items, "gpuplan-nlp.train-h100")
    leaf["spec"]["capability"]["nvidia.com/gpu"] = 24  # the API server keeps an integer quantity's spelling
    assert _queue_findings(rf, items) == []


def test_without_queues_in_the_input_they_are_not_checked(rf):
    nodes = [o for o in snapshot("volcano.yaml", TREE)["items"] if o["kind"] == "Node"]
    assert _queue_findings(rf, nodes) == []


def test_a_node_without_its_node_group_label_is_a_finding(rf):
    nodes = [o for o in snapshot("volcano.yaml", TREE)["items"] if o["kind"] == "Node"]
    node = next(n for n in nodes if n["metadata"]["name"] == "gpu-h100-02")
    assert node["metadata"]["labels"].pop("volcano.sh/nodegroup-name") == "train-h100"
    other = next(n for n in nodes if n["metadata"]["name"] == "gpu-h100-03")
    other["metadata"]["labels"]["volcano.sh/nodegroup-name"] = "burst-h100"
    got = [(d.code, d.path, d.message) for d in _findings(rf, nodes + _queues()) if "nodegroup" in d.message]
    assert sorted(got) == [
        ("GP872", "spec.pools[0]", "node gpu-h100-02 (pool train-h100) has no volcano.sh/nodegroup-name; "
         "planned volcano.sh/nodegroup-name=train-h100"),
        ("GP872", "spec.pools[0]", "node gpu-h100-03 (pool train-h100) has volcano.sh/nodegroup-name=burst-h100; "
         "planned volcano.sh/nodegroup-name=train-h100")]


def test_a_queue_field_of_the_wrong_type_refuses_the_input(rf):
    items = _queues()
    _by_name(items, "gpuplan-nlp.train-h100")["spec"]["capability"] = ["nvidia.com/gpu=24"]
    with pytest.raises(LiveInputError) as e:
        parse_live([("live.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": copy.deepcopy(items)}))])
    assert e.value.diags[0].code == "GP882" and "spec.capability" in e.value.diags[0].message


def test_the_command_exits_6_on_a_drifted_queue(tmp_path):
    from tests.conftest import run_gpuplan

    items = _queues()
    _by_name(items, "gpuplan-research.burst-h100")["spec"]["capability"]["nvidia.com/gpu"] = "16"  # planned 8
    live = tmp_path / "queues.json"
    live.write_text(json.dumps({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "QueueList", "items": items}))
    r = run_gpuplan("verify-cluster", str(REPO / "examples/volcano.yaml"), "--live", str(live),
                    "--tree", str(tmp_path / "no-tree"), "--format", "json")
    assert r.returncode == 6, r.stderr
    got = [(d["code"], d["path"]) for d in json.loads(r.stdout)["diagnostics"]]
    assert got == [("GP889", "spec.tenants[2]")]
    live.write_text(json.dumps({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "QueueList",
                                "items": _queues()}))
    assert run_gpuplan("verify-cluster", str(REPO / "examples/volcano.yaml"), "--live", str(live),
                       "--tree", str(tmp_path / "no-tree")).returncode == 0
