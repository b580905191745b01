"""MIG planner: exactness against brute force, hand-checked savings, bounds."""

from __future__ import annotations

import itertools
import math
import random
from functools import lru_cache

import pytest

from gpuplan.catalog import mig_gpus, resolve_gpu
from gpuplan.mig import planner
from gpuplan.mig.planner import (
    PlanError,
    UnknownGpuError,
    UnknownProfileError,
    format_layout,
    naive_gpus,
    plan,
)
from gpuplan.mig.solver import check_layout

MIG_MODELS = [g.key for g in mig_gpus()]


# --------------------------------------------------------------------------- independent brute force


@lru_cache(maxsize=None)
def _creatable(gpu_key: str, names: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Every non-empty creatable count vector over ``names``, straight from
    check_layout (not from enumerate_layouts, not from the planner's columns)."""
    gpu = resolve_gpu(gpu_key)
    ranges = [range(gpu.profile(n).max_instances + 1) for n in names]
    out = []
    for counts in itertools.product(*ranges):
        if any(counts) and check_layout(gpu, {n: c for n, c in zip(names, counts) if c}).ok:
            out.append(counts)
    return tuple(out)


def brute_force_gpus(gpu_key: str, demand: dict[str, int]) -> int:
    """Fewest layouts (a multiset of creatable layouts) covering the demand,
    by exhaustive search over residual demands."""
    names = tuple(sorted(n for n, d in demand.items() if d))
    layouts = _creatable(gpu_key, names)

    @lru_cache(maxsize=None)
    def need(residual: tuple[int, ...]) -> int:
        if not any(residual):
            return 0
        best = math.inf
        for lay in layouts:
            nxt = tuple(max(r - a, 0) for r, a in zip(residual, lay))
            if nxt != residual:
                best = min(best, 1 + need(nxt))
        return best

    return need(tuple(demand[n] for n in names))


def _provided(p: planner.Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for layout, n in p.layouts:
        for name, c in layout.items():
            out[name] = out.get(name, 0) + c * n
    return out


def _check_plan(gpu_key: str, demand: dict[str, int], p: planner.Plan) -> None:
    gpu = resolve_gpu(gpu_key)
    for layout, n in p.layouts:
        assert n >= 1
        assert check_layout(gpu, layout).ok, (gpu_key, layout)
    assert sum(n for _, n in p.layouts) == p.gpus
    # surplus is trimmed: the GPUs provide exactly the demand
    assert _provided(p) == {k: v for k, v in demand.items() if v}
    assert p.lower_bound <= p.gpus
    assert p.gap == p.gpus - p.lower_bound
    assert p.optimal == (p.gap == 0)
    assert p.lower_bound == max(p.bounds.values(), default=0)
    assert p.saving == p.naive_gpus - p.gpus
    gpu_c = sum(gpu.profile(n).compute_slices * d for n, d in demand.items())
    gpu_m = sum(gpu.profile(n).memory_slices * d for n, d in demand.items())
    assert p.idle_compute_slices == p.gpus * gpu.compute_slices - gpu_c
    assert p.idle_memory_slices == p.gpus * gpu.memory_slices - gpu_m


def _tiny_demands(gpu_key: str, seed: int, n: int) -> list[dict[str, int]]:
    gpu = resolve_gpu(gpu_key)
    rng = random.Random(f"{gpu_key}-{seed}")
    names = list(gpu.profile_names)
    out = []
    for _ in range(n):
        k = rng.randint(1, min(3, len(names)))
        out.append({name: rng.randint(1, 5) for name in rng.sample(names, k)})
    return out


@pytest.mark.parametrize("gpu_key", MIG_MODELS)
def test_plan_matches_brute_force_on_every_mig_model(gpu_key: str) -> None:
    for demand in _tiny_demands(gpu_key, 1, 8):
        p = plan(gpu_key, demand)
        _check_plan(gpu_key, demand, p)
        assert p.gpus == brute_force_gpus(gpu_key, demand), demand
        assert p.optimal, (demand, p.bounds)


@pytest.mark.parametrize("gpu_key", ["A100-SXM4-80GB", "A30", "H200-SXM-141GB", "RTX-PRO-6000-BLACKWELL-SERVER"])
def test_milp_path_matches_brute_force(gpu_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # disable the cheap paths: a poor greedy and no weighted bound force the MILP
    monkeypatch.setattr(planner, "_weight_bound", lambda *a, **k: (0, ""))
    monkeypatch.setattr(planner, "_greedy_weights", lambda geo, idx: [[1.0] * len(idx)])
    used_milp = 0
    for demand in _tiny_demands(gpu_key, 2, 8):
        p = plan(gpu_key, demand)
        _check_plan(gpu_key, demand, p)
        assert p.gpus == brute_force_gpus(gpu_key, demand), demand
        if p.method.startswith("MILP"):
            used_milp += 1
            assert "LP relaxation" in p.bounds and p.bounds["LP relaxation"] <= p.gpus
            assert p.bounds["MILP"] == p.gpus
    assert used_milp >= 1


def test_media_extension_profiles_need_one_gpu_each() -> None:
    # 1g.10gb+me is limited to one instance per GPU: 3 of them need 3 GPUs
    p = plan("A100-SXM4-80GB", {"1g.10gb+me": 3, "1g.10gb": 6})
    assert p.gpus == 3
    assert all(layout.get("1g.10gb+me", 0) <= 1 for layout, _ in p.layouts)
    assert p.naive_gpus == 4  # ceil(3/1) + ceil(6/7)
    _check_plan("A100-SXM4-80GB", {"1g.10gb+me": 3, "1g.10gb": 6}, p)


# --------------------------------------------------------------------------- hand-checked savings (A100 80GB)


def test_mixed_demand_a100_80gb_hand_computed() -> None:
    demand = {"3g.40gb": 10, "2g.20gb": 10, "1g.10gb": 20}
    p = plan("A100-SXM4-80GB", demand)
    # naive: 3g alone fits 2 per GPU -> ceil(10/2)=5; 2g alone 3 -> ceil(10/3)=4;
    #        1g.10gb alone 7 (slice 7 unusable) -> ceil(20/7)=3; total 12 GPUs
    assert p.naive_gpus == 12
    # bound: compute slices 10*3 + 10*2 + 20*1 = 70 = 10 GPUs x 7
    # plan:  5 x {3g@4, 2g@0, 2g@2} (7c/8m) + 5 x {3g@4, 1g@0..3} (7c/8m) = 10 GPUs
    assert p.gpus == 10 and p.lower_bound == 10 and p.optimal
    assert p.saving == 2
    assert p.idle_compute_slices == 0 and p.idle_memory_slices == 0
    _check_plan("A100-SXM4-80GB", demand, p)


def test_naive_far_from_optimal_a100_80gb() -> None:
    demand = {"4g.40gb": 1, "3g.40gb": 1, "2g.20gb": 3, "1g.20gb": 1, "1g.10gb": 3}
    p = plan("A100-SXM4-80GB", demand)
    # naive: one all-<profile> GPU each -> 1 + 1 + ceil(3/3) + ceil(1/4) + ceil(3/7) = 5
    assert p.naive_gpus == 5
    # bound: compute 4+3+6+1+3 = 17 -> ceil(17/7) = 3; memory 4+4+6+2+3 = 19 -> ceil(19/8) = 3
    # plan:  {4g@0, 3g@4} + {2g@0,2,4, 1g@6} + {1g.20gb@6, 1g.10gb@0,1} = 3 GPUs (40% fewer)
    assert p.gpus == 3 and p.lower_bound == 3 and p.saving == 2
    _check_plan("A100-SXM4-80GB", demand, p)


def test_memory_bound_binds_on_small_mix() -> None:
    demand = {"3g.40gb": 3, "2g.20gb": 4, "1g.10gb": 5}
    p = plan("A100-SXM4-80GB", demand)
    # naive: ceil(3/2) + ceil(4/3) + ceil(5/7) = 2 + 2 + 1 = 5
    # bound: compute 9+8+5 = 22 -> 4; memory 12+8+5 = 25 -> 4
    # plan:  3 x {3g, 2g, 1g, 1g} + 1 x {2g, ...} = 4 GPUs
    assert (p.naive_gpus, p.gpus, p.lower_bound, p.saving) == (5, 4, 4, 1)


def test_slice_seven_makes_one_g_demand_need_more_gpus() -> None:
    # 1g.10gb can never use memory slice 7, so 8 of them need 2 GPUs, not 1
    p = plan("A100-SXM4-80GB", {"1g.10gb": 8})
    assert p.gpus == 2 and p.naive_gpus == 2 and p.saving == 0
    assert p.bounds["instance limit of 1g.10gb"] == 2


# --------------------------------------------------------------------------- bounds and gap


@pytest.mark.parametrize("gpu_key", ["A100-SXM4-40GB", "H100-SXM5-80GB", "A30", "B200", "RTX-PRO-5000-BLACKWELL"])
def test_lower_bound_never_exceeds_plan_on_random_mixes(gpu_key: str) -> None:
    gpu = resolve_gpu(gpu_key)
    rng = random.Random(gpu_key)
    for _ in range(25):
        names = rng.sample(list(gpu.profile_names), rng.randint(1, min(5, len(gpu.profile_names))))
        demand = {n: rng.randint(0, 60) for n in names}
        p = plan(gpu, demand)
        _check_plan(gpu_key, demand, p)
        assert 0 <= p.gap <= 1


def test_time_limit_still_returns_a_valid_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner, "_weight_bound", lambda *a, **k: (0, ""))
    demand = {"3g.40gb": 37, "2g.20gb": 41, "1g.20gb": 13, "1g.10gb": 55}
    p = plan("H100-SXM5-80GB", demand, time_limit=0.001)
    _check_plan("H100-SXM5-80GB", demand, p)


def test_gap_is_reported_when_the_bound_is_weaker(monkeypatch: pytest.MonkeyPatch) -> None:
    # with HiGHS' answer replaced by 'nothing found', the plan is the greedy one and
    # the bound the slice bound: the gap must be their difference, and optimal False
    from gpuplan.mig import highs

    nothing = highs.Solution(x=None, optimal=False, infeasible=False, value=None, dual_bound=None,
                             message="Time limit reached")
    monkeypatch.setattr(highs, "solve", lambda *a, **k: nothing)
    monkeypatch.setattr(planner, "_weight_bound", lambda *a, **k: (0, ""))
    monkeypatch.setattr(planner, "_greedy_weights", lambda geo, idx: [[1.0] * len(idx)])
    demand = {"3g.40gb": 1, "2g.20gb": 6, "1g.10gb": 6}
    p = plan("A100-SXM4-80GB", demand)
    # bound: compute 3 + 12 + 6 = 21 -> 3 GPUs; memory 4 + 12 + 6 = 22 -> 3 GPUs
    assert p.lower_bound == 3
    assert p.gpus > p.lower_bound  # the count-greedy needs 4
    assert p.gap == p.gpus - 3 and not p.optimal
    assert p.method.startswith("greedy")
    _check_plan("A100-SXM4-80GB", demand, p)


# --------------------------------------------------------------------------- errors and edges


def test_unknown_profile_is_a_plan_error_with_suggestion() -> None:
    with pytest.raises(UnknownProfileError) as err:
        plan("A100-SXM4-80GB", {"3g.20gb": 2})
    assert isinstance(err.value, PlanError)
    assert err.value.suggestions[0] == "3g.40gb"
    assert "did you mean 3g.40gb" in str(err.value)


def test_unknown_and_non_mig_models() -> None:
    with pytest.raises(UnknownGpuError) as err:
        plan("A100-SXM4-81GB", {"1g.10gb": 1})
    assert "A100-SXM4-80GB" in err.value.suggestions
    with pytest.raises(UnknownGpuError, match="does not support MIG"):
        plan("T4", {"1g.5gb": 1})


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_counts_are_rejected(bad: object) -> None:
    with pytest.raises(PlanError):
        plan("A100-SXM4-80GB", {"1g.10gb": bad})  # type: ignore[dict-item]


def test_profile_names_match_case_insensitively() -> None:
    p = plan("a100-80gb", {"3G.40GB": 2, "1g.10gb": 1})
    assert p.demand == {"3g.40gb": 2, "1g.10gb": 1}
    # 3g@0 + 3g@4 fill all 8 memory slices, so the 1g needs a second GPU
    assert p.gpus == 2


def test_empty_demand_needs_no_gpus() -> None:
    p = plan("A100-SXM4-80GB", {"1g.10gb": 0})
    assert (p.gpus, p.lower_bound, p.layouts, p.naive_gpus) == (0, 0, (), 0)


def test_layouts_are_deterministic_and_grouped() -> None:
    demand = {"3g.40gb": 7, "2g.20gb": 13, "1g.20gb": 5, "1g.10gb": 23}
    a = plan("A100-SXM4-80GB", demand)
    b = plan("A100-SXM4-80GB", dict(reversed(list(demand.items()))))
    assert a.layouts == b.layouts
    counts = [n for _, n in a.layouts]
    assert counts == sorted(counts, reverse=True)
    assert len({format_layout(lay) for lay, _ in a.layouts}) == len(a.layouts)


def test_format_layout_and_naive() -> None:
    assert format_layout({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}) == "{3g.40gb, 2g.20gb, 1g.10gb×2}"
    assert naive_gpus("A30", {"1g.6gb": 5, "2g.12gb": 1}) == 3  # ceil(5/4) + ceil(1/2)


def test_to_dict_shape() -> None:
    d = plan("A100-SXM4-80GB", {"3g.40gb": 1}).to_dict()
    assert d["gpus"] == 1 and d["lower_bound"] == 1 and d["gap"] == 0 and d["optimal"] is True
    assert d["layouts"] == [{"layout": {"3g.40gb": 1}, "gpus": 1}]
    assert d["naive_gpus"] == 1 and d["saving"] == 0
