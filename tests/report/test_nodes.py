"""`gpuplan.report.nodes`: the Node objects of every example fleet, held against what the rest of
gpuplan says about the pools: each tier's contract pod (gpuplan.identity) lands on its own pool's
nodes and on no other, the node counts are the generated ceilings, verify-cluster accepts the
nodes, and the objects are valid v1 Nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.cli.nodes import NODE_TARGETS
from gpuplan.compiler import check_fleet, placement_docs, planned_objects
from gpuplan.dra.claims import is_dra
from gpuplan.identity import (
    CAPACITY_TYPE_LABEL, GUARANTEED_TAINT_KEY, POOL_LABEL, capacity_pin, contract_spec, guaranteed_nodepool_name,
    pool_gang_resources,
)
from gpuplan.k8snames import is_dns_subdomain, is_label_key, is_label_value
from gpuplan.placement.simulate import ert_enabled, extended_resource_toleration, tolerates
from gpuplan.provisioning.pools import autoscaled, karpenter_pool, node_group_pool, static_nodes
from gpuplan.report.nodes import (
    DEFAULTS, KWOK_ANNOTATION, NODEPOOL_LABEL, NodeNameClash, binary_quantity, fleet_nodes, kinds, node_list, render,
    split_count,
)
from gpuplan.resolve import GPU
from gpuplan.verify.core import quantity
from tests.conftest import REPO
from tests.report.helpers import resolved

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _load(path: Path):
    checked = check_fleet(path)
    assert checked.resolved is not None and not checked.failed(), checked.diagnostics
    rf = checked.resolved
    return rf, planned_objects(rf, NODE_TARGETS, kinds())


@pytest.fixture(scope="module", params=EXAMPLES, ids=[p.stem for p in EXAMPLES])
def example(request):
    rf, docs = _load(request.param)
    return rf, docs, fleet_nodes(rf, docs)


def _pool(node) -> str:
    return node["metadata"]["labels"][POOL_LABEL]


def _by_pool(nodes) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for n in nodes:
        out.setdefault(_pool(n), []).append(n)
    return out


def _contract_pod(rf, tier) -> dict:
    """The tier's contract pod as admission leaves it (ExtendedResourceToleration where on)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": contract_spec(rf, tier)}
    return extended_resource_toleration(pod) if ert_enabled(rf) else pod


def _selects(pod, node) -> bool:
    labels = node["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in pod["spec"]["nodeSelector"].items())


def _tolerated(pod, node) -> bool:
    tols = pod["spec"].get("tolerations", [])
    return all(any(tolerates(t, x["key"], x.get("value", ""), x["effect"]) for t in tols)
               for x in (node.get("spec") or {}).get("taints", []) if x["effect"] != "PreferNoSchedule")


def _fits(rf, tier, pod, node) -> bool:
    """nodeSelector, taints and (off DRA pools) the tier's resource: what the scheduler checks."""
    if not (_selects(pod, node) and _tolerated(pod, node)):
        return False
    pv = rf.pool_by_name[tier.pool]
    return is_dra(rf, pv) or quantity(node["status"]["allocatable"].get(rf.tier_resource(tier), "0")) >= 1


def _tiers(rf):
    return [t for t in rf.fleet.spec.tiers if rf.tier_resource(t) is not None and t.pool in rf.pool_by_name]


def _floor(node) -> bool:
    return any(t["key"] == GUARANTEED_TAINT_KEY for t in (node.get("spec") or {}).get("taints", []))


# --- which nodes ------------------------------------------------------------------------


def test_static_pools_get_their_listed_nodes(example):
    rf, _, nodes = example
    pools = _by_pool(nodes)
    static = [pv for pv in rf.pools if static_nodes(pv.pool)]
    for pv in static:
        assert sorted(n["metadata"]["name"] for n in pools.get(pv.name, [])) == sorted(pv.pool.nodes or ())


def test_autoscaled_pools_get_their_generated_ceiling(example):
    """Karpenter: every NodePool's limits.nodes, read from the generated NodePool itself; node groups:
    the node-group maximum; names <nodepool>-<i>."""
    rf, docs, nodes = example
    pools = _by_pool(nodes)
    for d in docs:
        if d["kind"] != "NodePool":
            continue
        name = d["metadata"]["name"]
        mine = sorted(n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get(NODEPOOL_LABEL) == name)
        assert mine == sorted(f"{name}-{i}" for i in range(int(d["spec"]["limits"]["nodes"])))
    for pv in rf.pools:
        if node_group_pool(pv.pool):
            assert sorted(n["metadata"]["name"] for n in pools.get(pv.name, [])) == \
                sorted(f"{pv.name}-{i}" for i in range(pv.node_count or 0))
        if karpenter_pool(pv.pool):  # the NodePools' limits add up to the pool's ceiling
            assert len(pools.get(pv.name, [])) == (pv.node_count or 0)


def test_a_floor_nodepool_names_its_own_nodes():
    rf, docs = _load(REPO / "examples" / "aws-spot.yaml")
    nodes = fleet_nodes(rf, docs)
    floors = [pv for pv in rf.pools if any(d["kind"] == "NodePool" and d["metadata"]["name"] ==
                                            guaranteed_nodepool_name(pv.name) for d in docs)]
    assert floors, "aws-spot.yaml has a pool with an on-demand floor"
    for pv in floors:
        floor = guaranteed_nodepool_name(pv.name)
        mine = [n for n in nodes if n["metadata"]["labels"].get(NODEPOOL_LABEL) == floor]
        assert mine and all(n["metadata"]["name"].startswith(f"{floor}-") and _floor(n) for n in mine)
        assert all(n["metadata"]["labels"][CAPACITY_TYPE_LABEL] != "spot" for n in mine)


@pytest.mark.parametrize("count", [0, 1, 2, 5])
def test_count_gives_that_many_nodes_per_autoscaled_pool(example, count):
    rf, docs, at_ceiling = example
    pools = _by_pool(fleet_nodes(rf, docs, count=count))
    for pv in rf.pools:
        got = pools.get(pv.name, [])
        if autoscaled(pv.pool):
            assert len(got) == count, pv.name
        else:
            assert got == _by_pool(at_ceiling).get(pv.name, [])


def test_count_two_puts_one_node_on_a_floor_and_one_on_the_pool():
    rf, docs = _load(REPO / "examples" / "aws-spot.yaml")
    nodes = fleet_nodes(rf, docs, count=2)
    for pv in rf.pools:
        if any(d["kind"] == "NodePool" and d["metadata"]["name"] == guaranteed_nodepool_name(pv.name) for d in docs):
            pools = sorted(n["metadata"]["labels"][NODEPOOL_LABEL] for n in nodes if _pool(n) == pv.name)
            assert pools == [pv.name, guaranteed_nodepool_name(pv.name)]


def test_memory_is_written_in_the_api_servers_canonical_form():
    assert [binary_quantity(n) for n in (2 ** 41, 393216 * 2 ** 20, 1536 * 2 ** 20, 1000)] == \
        ["2Ti", "384Gi", "1536Mi", "1000"]


def test_split_count_respects_the_floor_limit():
    assert split_count(0, 3) == (0, 0)
    assert split_count(1, 3) == (0, 1)
    assert split_count(5, 3) == (2, 3)
    assert split_count(10, 3) == (3, 7)


# --- where the tiers land ---------------------------------------------------------------


def test_every_node_of_a_pool_is_selected_as_its_tiers_select_it(example):
    """Every label a tier's contract pod selects is on every node of its pool, but the capacity
    type a pinned tier selects (then: exactly the pool's nodes of that type)."""
    rf, _, nodes = example
    pools = _by_pool(nodes)
    assert set(pools) <= set(rf.pool_by_name)
    for tier in _tiers(rf):
        pod = _contract_pod(rf, tier)
        pin = capacity_pin(rf, tier)
        for n in pools.get(tier.pool, []):
            labels = n["metadata"]["labels"]
            for k, v in pod["spec"]["nodeSelector"].items():
                if k == CAPACITY_TYPE_LABEL and pin is not None:
                    continue
                assert labels.get(k) == v, (tier.name, n["metadata"]["name"], k)


def test_each_tier_fits_only_nodes_of_its_own_pool(example):
    rf, _, nodes = example
    pools = _by_pool(nodes)
    for tier in _tiers(rf):
        pod = _contract_pod(rf, tier)
        fitting = [n for n in nodes if _fits(rf, tier, pod, n)]
        if not pools.get(tier.pool):
            continue  # a pool with no node at its ceiling
        assert fitting, f"tier {tier.name}: no node of pool {tier.pool} takes its contract pod"
        stray = sorted(n["metadata"]["name"] for n in fitting if _pool(n) != tier.pool)
        assert not stray, f"tier {tier.name} (pool {tier.pool}) fits nodes of other pools: {stray}"
        # and nothing of another pool even matches its selector and tolerations
        assert not [n for n in nodes if _pool(n) != tier.pool and _selects(pod, n) and _tolerated(pod, n)]
        pin = capacity_pin(rf, tier)
        mine = pools[tier.pool]
        if pin is not None:
            assert sorted(n["metadata"]["name"] for n in fitting) == \
                sorted(n["metadata"]["name"] for n in mine if n["metadata"]["labels"][CAPACITY_TYPE_LABEL] == pin)
        else:  # every node of the pool but its on-demand floor, which only pinned tiers tolerate
            assert sorted(n["metadata"]["name"] for n in fitting) == \
                sorted(n["metadata"]["name"] for n in mine if not _floor(n))


def test_every_node_takes_some_tier_of_its_pool(example):
    rf, _, nodes = example
    tiers = _tiers(rf)
    for n in nodes:
        own = [t for t in tiers if t.pool == _pool(n)]
        if own:
            assert any(_fits(rf, t, _contract_pod(rf, t), n) for t in own), n["metadata"]["name"]


def test_allocatable_holds_each_tier_resource(example):
    rf, _, nodes = example
    pools = _by_pool(nodes)
    for tier in _tiers(rf):
        pv = rf.pool_by_name[tier.pool]
        res = rf.tier_resource(tier)
        for n in pools.get(tier.pool, []):
            have = n["status"]["allocatable"]
            if is_dra(rf, pv):  # the device plugin is off there: the GPUs are ResourceSlices
                assert not [k for k in have if k.startswith("nvidia.com/")], n["metadata"]["name"]
            else:
                assert quantity(have[res]) >= 1
                # the device plugin's resources, and the fabric a gang pod there requests (EFA: at
                # least the pool's count, the instance type's own)
                fabric = pool_gang_resources(rf, pv)
                ext = {k: int(v) for k, v in have.items() if "/" in k}
                assert {k: v for k, v in ext.items() if k not in fabric} == pv.node_resources()
                assert all(ext.get(k, 0) >= v for k, v in fabric.items()), n["metadata"]["name"]


def test_verify_cluster_accepts_the_nodes(example):
    """`gpuplan verify-cluster` finds nothing to say about these nodes (labels, taints, GPU
    capacity, MIG state, nodes per pool), but on DRA pools, where it expects the device plugin."""
    from gpuplan.drift import parse_live, verify

    rf, _, nodes = example
    result = verify(rf, parse_live([("nodes", json.dumps(node_list(nodes)))]), [])
    dra = {pv.name for pv in rf.pools if is_dra(rf, pv)}
    diags = [d for d in result.diagnostics if not any(f"(pool {p})" in d.message for p in dra)]
    assert not diags, [d.message for d in diags]
    for p in result.pools:
        if p.pool not in dra:
            assert p.ok == p.found


# --- valid Nodes ------------------------------------------------------------------------


def test_every_node_is_a_valid_v1_node(example):
    """What the API server's ValidateNode checks: names, labels, taints (unique per key and
    effect), resource quantities (integers for extended resources)."""
    rf, _, nodes = example
    for n in nodes:
        meta = n["metadata"]
        assert (n["apiVersion"], n["kind"]) == ("v1", "Node")
        assert is_dns_subdomain(meta["name"]) and len(meta["name"]) <= 253
        for k, v in meta["labels"].items():
            assert is_label_key(k) and is_label_value(v), (meta["name"], k, v)
        taints = (n.get("spec") or {}).get("taints", [])
        assert len({(t["key"], t["effect"]) for t in taints}) == len(taints)
        for t in taints:
            assert is_label_key(t["key"]) and is_label_value(t.get("value", "")) and t["effect"] in TAINT_EFFECTS
        st = n["status"]
        assert st["allocatable"] == st["capacity"]
        for name, q in st["capacity"].items():
            assert isinstance(q, str) and quantity(q) is not None and quantity(q) > 0, (name, q)
            if "/" in name:
                assert quantity(q).denominator == 1
        assert {"cpu", "memory", "pods", "ephemeral-storage"} <= set(st["capacity"])
        assert [c["type"] for c in st["conditions"] if c["status"] == "True"] == ["Ready"]
        assert st["nodeInfo"]["kubeletVersion"] == f"v{rf.fleet.spec.cluster.kubernetes_version}.0"
        assert meta["labels"]["kubernetes.io/hostname"] == meta["name"]
        assert meta["labels"]["kubernetes.io/os"] == "linux"


def test_the_list_passes_gpuplan_verify(example, tmp_path):
    from gpuplan.verify.verifier import Options, verify_paths

    rf, _, nodes = example
    f = tmp_path / "nodes.yaml"
    f.write_bytes(render(nodes))
    result = verify_paths([str(f)], Options(kubernetes_version=rf.fleet.spec.cluster.kubernetes_version,
                                            nearest_version=True))
    assert not [d for d in result.diagnostics if d.is_error], [d.message for d in result.diagnostics]
    assert (result.stats.core_objects, result.stats.not_verified) == (len(nodes), 0)


def test_karpenter_and_machine_labels_and_sizes(example):
    """Karpenter nodes name their NodePool and carry one of its instance types, with that type's
    vCPUs and memory from the EC2 table; a node group names its machine type."""
    from gpuplan.cloud.aws import instance_type
    from gpuplan.provisioning.pools import machine

    rf, docs, nodes = example
    nodepools = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NodePool"}
    for n in nodes:
        labels, cap = n["metadata"]["labels"], n["status"]["capacity"]
        pv = rf.pool_by_name[_pool(n)]
        if karpenter_pool(pv.pool):
            np = nodepools[labels[NODEPOOL_LABEL]]
            reqs = {r["key"]: r["values"] for r in np["spec"]["template"]["spec"]["requirements"]}
            for key in ("node.kubernetes.io/instance-type", CAPACITY_TYPE_LABEL):
                assert labels[key] in reqs[key]
            it = instance_type(labels["node.kubernetes.io/instance-type"])
            if it is not None:
                assert (cap["cpu"], quantity(cap["memory"])) == (str(it.cpu), it.memory_mib * 2 ** 20)
                assert labels["karpenter.k8s.aws/instance-gpu-count"] == str(it.gpu_count)
        elif node_group_pool(pv.pool) and machine(pv.pool) is not None:
            assert labels["node.kubernetes.io/instance-type"] == machine(pv.pool).name
        elif static_nodes(pv.pool):
            assert "node.kubernetes.io/instance-type" not in labels
            assert (cap["cpu"], cap["memory"]) == (DEFAULTS["cpu"], DEFAULTS["memory"])
        if pv.pool.capi is not None:
            assert (cap["cpu"], cap["memory"]) == (pv.pool.capi.cpu or DEFAULTS["cpu"],
                                                   pv.pool.capi.memory or DEFAULTS["memory"])


def test_gpu_feature_discovery_labels_where_the_operator_runs(example):
    from gpuplan.catalog import resolve_gpu
    from gpuplan.provisioning.pools import platform_gpu_stack

    rf, _, nodes = example
    for n in nodes:
        labels = n["metadata"]["labels"]
        pv = rf.pool_by_name[_pool(n)]
        if platform_gpu_stack(pv.pool) or labels.get("nvidia.com/gpu.deploy.operands") == "false":
            assert "nvidia.com/gpu.product" not in labels
            continue
        assert resolve_gpu(labels["nvidia.com/gpu.product"]) == pv.gpu
        if pv.pool.sharing.mode != "mig":
            assert labels["nvidia.com/gpu.count"] == str(pv.gpus_per_node)
        if pv.pool.sharing.mode == "mig":
            assert labels["nvidia.com/mig.config.state"] == "success"


# --- options and output -------------------------------------------------------------------


def test_kwok_marks_every_node(example):
    rf, docs, plain = example
    marked = fleet_nodes(rf, docs, kwok=True)
    assert [n["metadata"]["name"] for n in marked] == [n["metadata"]["name"] for n in plain]
    for n in marked:
        assert n["metadata"]["annotations"] == {KWOK_ANNOTATION: "fake"}
        assert n["metadata"]["labels"]["type"] == "kwok"
    assert not any("annotations" in n["metadata"] or "type" in n["metadata"]["labels"] for n in plain)


def test_output_is_sorted_and_byte_identical(example):
    rf, docs, nodes = example
    names = [n["metadata"]["name"] for n in nodes]
    assert names == sorted(names) and len(set(names)) == len(names)
    again_rf, again_docs = _load(Path(rf.file))  # a fresh run: spec read, checked and lowered again
    assert render(fleet_nodes(again_rf, again_docs)) == render(nodes)
    assert render(fleet_nodes(rf, docs, count=3, kwok=True)) == render(fleet_nodes(rf, docs, count=3, kwok=True))


def test_the_placement_objects_give_the_same_nodes_but_root_volumes(example):
    """What the placement proof reads (``placement_docs``) is enough: without the EC2NodeClasses
    only ephemeral-storage falls back to the default."""
    rf, _, nodes = example
    other = fleet_nodes(rf, placement_docs(rf))
    for a, b in zip(nodes, other, strict=True):
        a_cap = {k: v for k, v in a["status"]["capacity"].items() if k != "ephemeral-storage"}
        b_cap = {k: v for k, v in b["status"]["capacity"].items() if k != "ephemeral-storage"}
        assert (a["metadata"], a.get("spec"), a_cap) == (b["metadata"], b.get("spec"), b_cap)


def test_a_static_node_named_like_an_autoscaled_one_is_refused(tmp_path):
    text = (REPO / "examples" / "fleet.yaml").read_text(encoding="utf-8")
    text = text.replace("nodes: [gpu-a100-07, gpu-a100-08]", "nodes: [burst-h100-0, gpu-a100-08]")
    rf = resolved(tmp_path, text)
    with pytest.raises(NodeNameClash, match="burst-h100-0"):
        fleet_nodes(rf, planned_objects(rf, NODE_TARGETS, kinds()))


def test_the_inventory_gives_a_static_node_its_cpus():
    """A node-probe inventory's online CPUs count; a node without one keeps the default."""
    from gpuplan.probe.inventory import Metadata, NodeInventory, Probe, SystemInfo

    rf, docs = _load(REPO / "examples" / "fleet.yaml")
    name = rf.pool_by_name["train-a100"].pool.nodes[0]
    rf.inventory = [NodeInventory(metadata=Metadata(name=name), probe=Probe(version="0", source="fake"),
                                  system=SystemInfo(hostname=name, online_cpus="0-95,128-159"))]
    cpus = {n["metadata"]["name"]: n["status"]["capacity"]["cpu"] for n in fleet_nodes(rf, docs)}
    assert cpus[name] == "128"
    assert {c for n, c in cpus.items() if n != name and not n.startswith("burst-")} == {DEFAULTS["cpu"]}


def test_a_gpu_resource_name_is_what_the_pool_advertises(example):
    """The shared and MIG names come from the device-plugin config, never a plain nvidia.com/gpu
    where the pool renames or partitions."""
    rf, _, nodes = example
    for n in nodes:
        pv = rf.pool_by_name[_pool(n)]
        if GPU not in pv.node_resources():
            assert GPU not in n["status"]["capacity"]


def test_nodes_behind_a_topology_aware_flavor_carry_every_level():
    """Kueue's TAS counts a node only with every `queueing.topologyLevels` label (kueue v0.19.2
    pkg/util/tas/node.go:21-33): those pools' nodes carry them, other pools' do not."""
    from gpuplan.compiler import check_fleet, placement_docs
    from gpuplan.queues import tas_pools
    from gpuplan.report.nodes import fleet_nodes

    rf = check_fleet(REPO / "examples" / "kueue.yaml").resolved
    levels = [lv for lv in rf.fleet.spec.queueing.topology_levels if lv != "kubernetes.io/hostname"]
    assert levels and tas_pools(rf)
    for n in fleet_nodes(rf, placement_docs(rf)):
        pool = n["metadata"]["labels"]["gpuplan.dev/pool"]
        has = [lv in n["metadata"]["labels"] for lv in levels]
        assert all(has) if pool in tas_pools(rf) else not any(has), (n["metadata"]["name"], pool)
