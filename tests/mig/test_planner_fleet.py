"""Mixed-fleet planner: cost vs GPU objective, pinned demand, keeping existing layouts."""

from __future__ import annotations

import pytest

from gpuplan.catalog import resolve_gpu
from gpuplan.mig.planner import InfeasibleError, PlanError, UnknownProfileError
from gpuplan.mig.planner_fleet import PoolCapacity, layout_changes, plan_fleet
from gpuplan.mig.solver import check_layout


def _served_total(fp, key: str) -> int:
    return sum(p.served.get(key, 0) for p in fp.pools)


def _assert_valid(fp, demand: dict[str, int]) -> None:
    for p in fp.pools:
        gpu = resolve_gpu(p.gpu)
        assert p.gpus == len(p.per_gpu) == sum(n for _, n in p.layouts) <= p.max_gpus
        for layout in p.per_gpu:
            assert check_layout(gpu, layout).ok, (p.name, layout)
    for key, d in demand.items():
        assert _served_total(fp, key) >= d
    assert fp.gpus == sum(p.gpus for p in fp.pools)
    assert fp.lower_bound <= fp.objective_value + 1e-9


POOLS = [
    PoolCapacity("a100-80", "A100-SXM4-80GB", max_gpus=16, price_per_gpu_hour=4.0),
    PoolCapacity("a100-40", "A100-SXM4-40GB", max_gpus=16, price_per_gpu_hour=1.5),
]


def test_gpu_objective_picks_the_denser_model() -> None:
    # 1g.10gb is a single-memory 1g on A100-80GB (7 per GPU) but a double-memory
    # 1g on A100-40GB (4 per GPU): 7 instances = 1 GPU of 80GB, or 2 GPUs of 40GB
    fp = plan_fleet(POOLS, {"1g.10gb": 7}, objective="gpus")
    assert fp.gpus == 1 and fp.pool("a100-80").gpus == 1 and fp.pool("a100-40").gpus == 0
    assert fp.optimal and fp.lower_bound == 1
    _assert_valid(fp, {"1g.10gb": 7})


def test_cost_objective_picks_the_cheaper_model() -> None:
    # cost: 1 x $4.00 (80GB) vs 2 x $1.50 = $3.00 (40GB) -> the 40GB pool
    fp = plan_fleet(POOLS, {"1g.10gb": 7}, objective="cost")
    assert fp.pool("a100-40").gpus == 2 and fp.pool("a100-80").gpus == 0
    assert fp.cost_per_hour == pytest.approx(3.0)
    assert fp.optimal
    _assert_valid(fp, {"1g.10gb": 7})
    # at $2.50 the 40GB pool costs 2 x 2.5 = $5.00 > $4.00: back to the 80GB pool
    dearer = [POOLS[0], PoolCapacity("a100-40", "A100-SXM4-40GB", 16, 2.5)]
    fp = plan_fleet(dearer, {"1g.10gb": 7}, objective="cost")
    assert fp.pool("a100-80").gpus == 1 and fp.pool("a100-40").gpus == 0
    assert fp.cost_per_hour == pytest.approx(4.0)


def test_pinned_demand_keys() -> None:
    fp = plan_fleet(POOLS, {"A100-SXM4-40GB/1g.10gb": 7, "a100-80/3g.40gb": 1})
    assert fp.pool("a100-40").served == {"A100-SXM4-40GB/1g.10gb": 7}
    assert fp.pool("a100-40").gpus == 2  # ceil(7 / 4)
    assert fp.pool("a100-80").served == {"a100-80/3g.40gb": 1}
    _assert_valid(fp, {"A100-SXM4-40GB/1g.10gb": 7, "a100-80/3g.40gb": 1})


def test_capacity_limits_spill_to_the_other_pool() -> None:
    small = [PoolCapacity("a100-80", "A100-SXM4-80GB", 1, 4.0), POOLS[1]]
    fp = plan_fleet(small, {"1g.10gb": 15})
    # 80GB pool: 1 GPU x 7; the other 8 on 40GB: ceil(8/4) = 2 -> 3 GPUs
    assert fp.pool("a100-80").gpus == 1 and fp.pool("a100-40").gpus == 2 and fp.gpus == 3
    _assert_valid(fp, {"1g.10gb": 15})


def test_keep_existing_keeps_every_gpu_that_still_fits() -> None:
    pools = [PoolCapacity("h100", "H100-SXM5-80GB", 3)]
    # each existing GPU is full: 3g@4, 2g@0, 1g@2, 1g+me@3 (7 compute, 8 memory slices)
    existing = {"h100": [{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1, "1g.10gb+me": 1}] * 3}
    demand = {"3g.40gb": 3, "2g.20gb": 3, "1g.10gb": 3}
    # bound: compute 9 + 6 + 3 = 18 -> 3 GPUs; so the 3 existing GPUs are already optimal
    kept = plan_fleet(pools, demand, existing=existing)
    assert kept.gpus == 3 and kept.changed_gpus == 0 and kept.changes == ()
    # from scratch the planner never adds the undemanded 1g.10gb+me, so all 3 GPUs change
    scratch = plan_fleet(pools, demand, existing=existing, keep_existing=False)
    assert scratch.gpus == 3 and scratch.changed_gpus == 3
    assert all(c.kind == "reconfigure" for c in scratch.changes)
    _assert_valid(kept, demand)
    _assert_valid(scratch, demand)


def test_keep_existing_minimises_changed_gpus_without_costing_gpus() -> None:
    pools = [PoolCapacity("h100", "H100-SXM5-80GB", 8)]
    existing = {"h100": [{"3g.40gb": 2}] * 4 + [{"1g.10gb": 7}] * 4}
    demand = {"3g.40gb": 8, "1g.10gb": 8, "2g.20gb": 2}
    # GPUs: compute 24 + 8 + 4 = 36 -> 6; memory 32 + 8 + 4 = 44 -> 6. Keep 4 x {3g x2}
    # and 1 x {1g x7}; the 2g demand exists on no current GPU, so >= 1 GPU must change:
    # {2g, 2g, 1g} on one reconfigured GPU -> 6 GPUs, 1 change, 2 released
    fp = plan_fleet(pools, demand, existing=existing)
    assert fp.gpus == 6 and fp.changed_gpus == 1
    kinds = {c.kind: c.gpus for c in fp.changes}
    assert kinds == {"reconfigure": 1, "release": 2}
    assert fp.pool("h100").kept == 5
    scratch = plan_fleet(pools, demand, existing=existing, keep_existing=False)
    assert scratch.gpus == fp.gpus  # lexicographic: never more GPUs to keep layouts
    assert scratch.changed_gpus >= fp.changed_gpus
    _assert_valid(fp, demand)


def test_fresh_gpus_take_new_layouts_before_draining() -> None:
    # 4 GPUs configured, room for 4 more: the new 2g layout goes onto a fresh GPU
    pools = [PoolCapacity("h100", "H100-SXM5-80GB", 8)]
    existing = {"h100": [{"3g.40gb": 2}] * 4}
    fp = plan_fleet(pools, {"3g.40gb": 8, "2g.20gb": 3}, existing=existing)
    assert fp.gpus == 5 and fp.changed_gpus == 0
    assert [(c.kind, c.gpus, c.new) for c in fp.changes] == [("add", 1, {"2g.20gb": 3})]


def test_layout_changes_pairs_fresh_then_reconfigure_then_release() -> None:
    a, b, c = {"3g.40gb": 2}, {"7g.80gb": 1}, {"1g.10gb": 7}
    changes = layout_changes({"p": [a, a, b]}, {"p": [a, c, c]}, capacity={"p": 4})
    # a stays; one c goes onto the single fresh GPU; the other c replaces a or b
    kinds = sorted((ch.kind, ch.gpus) for ch in changes)
    assert kinds == [("add", 1), ("reconfigure", 1), ("release", 1)]
    assert layout_changes({"p": [a, b]}, {"p": [b, a]}) == ()
    # without capacity every new layout replaces a current one
    assert [(ch.kind, ch.old, ch.new) for ch in layout_changes({"p": [a]}, {"p": [c]})] == [("reconfigure", a, c)]
    assert [ch.kind for ch in layout_changes({}, {"q": [c]})] == ["add"]


def test_fleet_errors() -> None:
    with pytest.raises(InfeasibleError):
        plan_fleet([PoolCapacity("tiny", "A100-SXM4-80GB", 1)], {"3g.40gb": 3})
    with pytest.raises(PlanError, match="price"):
        plan_fleet([PoolCapacity("x", "A100-SXM4-80GB", 4)], {"3g.40gb": 1}, objective="cost")
    with pytest.raises(UnknownProfileError) as err:
        plan_fleet(POOLS, {"3g.41gb": 1})
    assert "3g.40gb" in err.value.suggestions
    with pytest.raises(PlanError, match="neither a pool nor a GPU model"):
        plan_fleet(POOLS, {"H100-SXM5-80GB/3g.40gb": 1})
    with pytest.raises(PlanError, match="existing"):
        plan_fleet(POOLS, {"3g.40gb": 1}, existing={"nope": [{}]})
    with pytest.raises(PlanError, match="objective"):
        plan_fleet(POOLS, {"3g.40gb": 1}, objective="speed")


def test_from_nodes_and_to_dict() -> None:
    pool = PoolCapacity.from_nodes("p", "A100-SXM4-80GB", nodes=2, gpus_per_node=8, price_per_gpu_hour=1.0)
    assert pool.max_gpus == 16 and pool.gpus_per_node == 8
    d = plan_fleet([pool], {"3g.40gb": 3}).to_dict()
    assert d["gpus"] == 2 and d["pools"][0]["layouts"][0]["gpus"] >= 1
    assert d["optimal"] is True and d["changes"] == [] and d["changed_gpus"] == 0
