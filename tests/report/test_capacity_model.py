"""Capacity arithmetic on hand-computed cases."""

import pytest

from gpuplan.capacity import capacity
from gpuplan.units import HOURS_PER_MONTH
from tests.report.helpers import SCENARIO, resolved
from tests.rules.helpers import BASE, edit

GPU_MONTH = 1.60 * HOURS_PER_MONTH  # 1168.00 per GPU per month


@pytest.fixture
def report(tmp_path):
    return capacity(resolved(tmp_path, SCENARIO))


def test_scenario_does_not_fit_as_whole_gpus_but_fits_with_sharing(report):
    physical = report.physical_gpus
    assert physical == 8 * 4 == 32
    whole_gpu_demand = 4 * 4 + 12 + 8  # training + one GPU per inference service + one per notebook
    assert whole_gpu_demand == 36 > physical
    # with sharing: 16 whole + 12 × 4/8 (3g.40gb = 4 of 8 memory slices) + 8 × 1/2 (2 replicas)
    assert report.granted_gpus == pytest.approx(16 + 6 + 4) == 26
    assert report.granted_gpus <= physical
    assert all(not t.over_limit for t in report.tiers)


def test_scenario_pools(report):
    train, infer, dev = report.pools
    assert (train.physical_gpus, dict(train.resources)) == (16, {"nvidia.com/gpu": 16})
    # 2 nodes × 4 GPUs × 2 instances of 3g.40gb
    assert (infer.physical_gpus, dict(infer.resources)) == (8, {"nvidia.com/mig-3g.40gb": 16})
    # 2 nodes × 4 GPUs × 2 replicas
    assert (dev.physical_gpus, dict(dev.resources)) == (8, {"nvidia.com/gpu.shared": 16})
    assert dict(dev.explanations) == {"nvidia.com/gpu.shared": "2 nodes × 4 GPUs × 2 replicas"}
    # {3g.40gb: 2} uses 6 of 7 compute slices and 8 of 8 memory slices per GPU; 8 GPUs
    (usage,) = infer.layouts
    assert (usage.gpus, usage.used_compute, usage.used_memory) == (8, 6, 8)
    assert (infer.idle_compute_slices, infer.idle_memory_slices) == (8, 0)
    assert [p[1:] for p in usage.placements] == [(0, 4, 3), (4, 4, 3)]  # memory start, size, compute
    # cost: GPUs × 1.60 × 730
    assert train.cost_per_month == 16 * GPU_MONTH == 18688.00
    assert infer.cost_per_month == dev.cost_per_month == 8 * GPU_MONTH == 9344.00
    assert report.cost_per_month == 37376.00
    # infer grants 12 × 0.5 GPU: 6 of its 8 GPUs are paid for by tiers, 2 are unallocated
    assert infer.allocated_cost_per_month == 6 * GPU_MONTH == 7008.00
    assert infer.unallocated_cost_per_month == 2 * GPU_MONTH == 2336.00


def test_scenario_tiers(report):
    training, inference, notebooks = report.tiers
    assert (training.capacity, training.quota, training.oversubscription) == (16, 16, 1.0)
    assert (inference.capacity, inference.quota, inference.oversubscription) == (16, 12, 0.75)
    assert (notebooks.capacity, notebooks.quota, notebooks.oversubscription) == (16, 8, 0.5)
    assert (training.unit_gpus, inference.unit_gpus, notebooks.unit_gpus) == (1.0, 0.5, 0.5)
    assert training.cost_per_month == 16 * GPU_MONTH
    assert inference.cost_per_month == 12 * 0.5 * GPU_MONTH == 7008.00
    assert notebooks.cost_per_month == 8 * 0.5 * GPU_MONTH == 4672.00
    assert inference.capacity_explained == "2 nodes × 8 per node"
    assert [(g.tenant, g.namespace, g.units) for g in inference.grants] == [
        ("vision", "vision-serve", 8), ("nlp", "nlp-serve", 4)]


def test_scenario_tenants(report):
    vision, nlp = report.tenants
    # vision: 8 GPUs + 8 × 0.5 GPU; nlp: 8 GPUs + 4 × 0.5 + 8 × 0.5
    assert vision.gpus == 12 and nlp.gpus == 14
    assert vision.cost_per_month == 8 * GPU_MONTH + 8 * 0.5 * GPU_MONTH == 14016.00
    assert nlp.cost_per_month == 8 * GPU_MONTH + 4 * 0.5 * GPU_MONTH + 8 * 0.5 * GPU_MONTH == 16352.00
    assert vision.units("inference") == 8


def test_oversubscription_and_shared_resource_groups(tmp_path):
    # two tiers on pool train share nvidia.com/gpu: the ratio counts both
    text = edit(BASE, "    - {name: notebooks,",
                "    - {name: low, pool: train, workload: batch, priority: 1, preemption: Never}\n    - {name: notebooks,")
    text = edit(text, "alpha-ns: {training: 8, serve: 8, notebooks: 16}",
                "alpha-ns: {training: 4, low: 2, serve: 8, notebooks: 16}")
    r = capacity(resolved(tmp_path, text))
    t = r.tier("training")
    assert (t.quota, t.pool_resource_quota, t.capacity) == (4, 6, 8)
    assert t.oversubscription == 0.75 and t.sharing_tiers == ("training", "low")
    assert r.tier("serve").capacity == 28  # 4 GPUs × 7 × 1g.10gb
    assert r.tier("serve").unit_gpus == 1 / 8


def test_karpenter_pool_counts_at_max_gpus(tmp_path):
    text = edit(BASE, "      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 20, amiVersion: v20260714}\n")
    text = edit(text, '    kubernetesVersion: "1.33"\n',
                '    kubernetesVersion: "1.33"\n    aws: {clusterName: small, nodeRole: KarpenterNodeRole}\n'
                '    gpuOperator: {toolkit: preinstalled}\n')
    r = capacity(resolved(tmp_path, text))
    p = r.pool("train")
    # 20 GPUs allow 2 whole nodes of 8 GPUs
    assert (p.nodes, p.gpus_per_node, p.physical_gpus, p.autoscaled) == (2, 8, 16, True)
    assert p.cost_per_month == 16 * 2.0 * HOURS_PER_MONTH


def test_idle_slices_with_per_gpu_layouts(tmp_path):
    text = edit(BASE, "layout: {1g.10gb: 7}",
                "devices: [{devices: [0, 1], layout: {1g.10gb: 7}}, {devices: [2, 3], layout: {4g.40gb: 1}}]")
    r = capacity(resolved(tmp_path, text))
    p = r.pool("infer")
    usage = {u.layout: u for u in p.layouts}
    seven = usage[(("1g.10gb", 7),)]
    four = usage[(("4g.40gb", 1),)]
    # 1g.10gb × 7: 7/7 compute, 7/8 memory -> 1 idle memory slice per GPU; 2 GPUs
    assert (seven.gpus, seven.idle_compute, seven.idle_memory) == (2, 0, 2)
    # 4g.40gb: 4/7 compute, 4/8 memory -> 3 compute + 4 memory idle per GPU; 2 GPUs
    assert (four.gpus, four.idle_compute, four.idle_memory) == (2, 6, 8)
    assert (p.idle_compute_slices, p.idle_memory_slices) == (6, 10)
