"""The failure headroom of the capacity ledger (gpuplan.capacity.Headroom) and its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.capacity import capacity_with_nodes_down, default_nodes_down, nodes_down
from gpuplan.report.render import render_markdown, render_text
from tests.rules.helpers import BASE, Run, edit

HEALTH = "      health:\n        nodesDown: 0\n"
TRAIN = "      gpusPerNode: 4\n      nodes: [n1, n2]\n"
INFER = "      nodes: [n3]\n"
EXAMPLES = Path(__file__).parents[2] / "examples"


def _open(text: str) -> str:
    """BASE without the health settings that accept the risk on train and infer."""
    return text.replace(HEALTH, "")


def _rows(run: Run, text: str) -> dict:
    return {(h.pool, h.resource): h for h in run.resolved(text).capacity.headroom}


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)


def test_the_largest_nodes_go_first():
    assert capacity_with_nodes_down([8, 4, 8], 0) == 20
    assert capacity_with_nodes_down([8, 4, 8], 1) == 12
    assert capacity_with_nodes_down([4, 8, 8], 2) == 4
    assert capacity_with_nodes_down([8, 4, 8], 3) == 0
    assert capacity_with_nodes_down([8, 4], 9) == 0
    assert capacity_with_nodes_down([], 1) == 0


def test_static_pool(run):
    h = _rows(run, _open(BASE))[("train", "nvidia.com/gpu")]
    # 2 nodes × 4 GPUs, training granted 8; one node (the default) down leaves 4
    assert (h.tiers, h.nodes_down, h.nodes_down_set, h.basis) == (("training",), 1, False, "nodes")
    assert (h.granted, h.capacity, h.capacity_down, h.per_node) == (8, 8, 4, 4)
    assert (h.fits, h.shortfall) == (False, 4)
    more = _rows(run, edit(_open(BASE), "nodes: [n1, n2]", "nodes: [n1, n2, n3b]"))[("train", "nvidia.com/gpu")]
    assert (more.capacity, more.capacity_down, more.fits, more.shortfall) == (12, 8, True, 0)


def test_autoscaled_pool_counts_at_its_most_nodes(run):
    text = edit(_open(BASE), TRAIN, "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 24}\n")
    text = edit(text, "    gitops:\n", "    aws: {clusterName: c, nodeRole: r}\n    gitops:\n")
    h = _rows(run, text)[("train", "nvidia.com/gpu")]
    # maxGPUs 24 = 3 nodes × 8 GPUs; one down leaves 16 for the 8 granted
    assert (h.basis, h.nodes, h.capacity, h.capacity_down, h.fits) == ("max", 3, 24, 16, True)


def test_mig_pool_counts_instances(run):
    text = edit(_open(BASE), INFER, "      nodes: [n3, n6]\n")
    text = edit(text, "serve: 8,", "serve: 30,")
    h = _rows(run, text)[("infer", "nvidia.com/mig-1g.10gb")]
    # {1g.10gb: 7} on 4 GPUs = 28 instances a node
    assert (h.per_node, h.capacity, h.capacity_down, h.granted) == (28, 56, 28, 30)
    assert (h.fits, h.shortfall, h.unit_gpus) == (False, 2, 0.125)


def test_time_sliced_pool_counts_replicas(run):
    # notebooks is interactive (preemptible): no headroom to hold until it must not be interrupted
    assert ("dev", "nvidia.com/gpu.shared") not in _rows(run, BASE)
    text = edit(BASE, "preemption: Never}", "preemption: Never, preemptible: false}")
    h = _rows(run, edit(text, "nodes: [n4]", "nodes: [n4, n5]"))[("dev", "nvidia.com/gpu.shared")]
    # 2 nodes × 4 GPUs × 4 replicas; one down leaves 16 for the 16 granted
    assert (h.per_node, h.capacity, h.capacity_down, h.fits, h.shortfall) == (16, 32, 16, True, 0)
    one = _rows(run, text)[("dev", "nvidia.com/gpu.shared")]
    assert (one.capacity, one.capacity_down, one.shortfall) == (16, 0, 16)


def test_unknown_capacity_is_not_guessed(tmp_path):
    from gpuplan.compiler import check_fleet

    text = edit(_open(BASE), TRAIN, "      karpenter: {instanceTypes: [x9.unknown], maxGPUs: 16}\n")
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    rf = check_fleet(p).resolved
    (h,) = [h for h in rf.capacity.headroom if h.pool == "train"]
    assert (h.capacity, h.capacity_down, h.fits, h.shortfall, h.nodes) == (None, None, None, None, None)
    assert h.granted == 8
    section = render_text(rf.capacity).split("Failure headroom")[1]
    row = next(line for line in section.splitlines() if line.startswith("train "))
    assert row.split()[-5:] == ["?", "(max)", "?", "?", "?"]  # capacity, with nodes down, fits, short


def test_default_nodes_down_follows_the_tiers(run):
    assert (default_nodes_down(True), default_nodes_down(False)) == (1, 0)
    rf = run.resolved(_open(BASE))
    by_pool = {}
    for t in rf.capacity.tiers:
        by_pool.setdefault(t.pool, []).append(t)
    assert nodes_down(rf.pool_by_name["train"], by_pool["train"]) == (1, False)  # training: guaranteed
    assert nodes_down(rf.pool_by_name["dev"], by_pool["dev"]) == (0, False)  # interactive only
    rf = run.resolved(edit(BASE, "nodes: [n4]\n", "nodes: [n4]\n      health: {nodesDown: 3}\n"))
    assert nodes_down(rf.pool_by_name["dev"], by_pool["dev"]) == (3, True)
    assert nodes_down(rf.pool_by_name["train"], by_pool["train"]) == (0, True)


def test_on_demand_floor_holds_the_guaranteed_tiers(run):
    h = _rows(run, (EXAMPLES / "aws-spot.yaml").read_text())[("infer-l40s", "nvidia.com/gpu")]
    # guaranteedGPUs 24 = 6 g6e.12xlarge of 4 GPUs; the pool's maxGPUs is larger
    assert (h.basis, h.nodes, h.capacity, h.capacity_down, h.shortfall) == ("floor", 6, 24, 20, 4)


def test_table_in_text_and_markdown(run):
    r = run.resolved(_open(BASE)).capacity
    md = render_markdown(r)
    assert "## Failure headroom" in md
    head = "| pool | resource | guaranteed tiers | granted | nodes down | capacity | with nodes down | fits | short |"
    assert head in md
    assert "| train | nvidia.com/gpu | training | 8 | 1 (default) | 8 | 4 | NO | 4 |" in md
    assert "| infer | nvidia.com/mig-1g.10gb | serve | 8 | 1 (default) | 28 | 0 | NO | 8 |" in md
    text = render_text(r)
    assert "Failure headroom\n----------------" in text
    # pools in spec order, after the spot section and before the notes
    assert text.index("Failure headroom") < text.index("\nNotes\n")
    assert [line.split()[0] for line in text.split("Failure headroom")[1].splitlines()
            if line.startswith(("train ", "infer "))] == ["train", "infer"]


def test_no_section_without_a_guaranteed_tier(run):
    text = edit(BASE, "workload: training,", "workload: batch,")
    text = edit(text, "workload: inference,", "workload: batch,")
    r = run.resolved(text).capacity
    assert r.headroom == ()
    assert "Failure headroom" not in render_markdown(r)


def test_json_and_html_carry_it(run):
    import json

    from gpuplan.report.html import render_html
    from gpuplan.report.render import render_json

    r = run.resolved(_open(BASE)).capacity
    rows = {(h["pool"], h["resource"]): h for h in json.loads(render_json(r))["headroom"]}
    assert rows[("train", "nvidia.com/gpu")] == {
        "pool": "train", "resource": "nvidia.com/gpu", "tiers": ["training"], "nodesDown": 1, "nodesDownSet": False,
        "granted": 8, "nodes": 2, "counted": "nodes", "capacity": 8, "capacityNodesDown": 4, "fits": False,
        "shortfall": 4}
    html = render_html(r)
    assert "<h2>Failure headroom</h2>" in html and "<td>1 (default)</td>" in html
