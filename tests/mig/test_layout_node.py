"""Node-level rules under the single / mixed / none strategies."""

from __future__ import annotations

import pytest

from gpuplan.mig.layout import NodeProblemKind, check_node, resources_for_layout, resources_for_node

A80 = "A100-SXM4-80GB"


def kinds(problems):
    return [p.kind for p in problems]


def test_single_needs_one_identical_profile_on_every_gpu():
    assert check_node(A80, [{"1g.10gb": 7}] * 8, "single") == []
    p = check_node(A80, [{"1g.10gb": 7}] * 7 + [{"2g.20gb": 3}], "single")
    assert kinds(p) == [NodeProblemKind.SINGLE_MIXED_PROFILES]
    assert p[0].profiles == ("1g.10gb", "2g.20gb") and "more than one MIG device type" in p[0].message
    p = check_node(A80, [{"3g.40gb": 1, "1g.10gb": 2}], "single")
    assert kinds(p) == [NodeProblemKind.SINGLE_MIXED_PROFILES]


def test_single_rejects_mig_disabled_and_empty_gpus():
    p = check_node(A80, [{"1g.10gb": 7}, None, {"1g.10gb": 7}, None], "single")
    assert kinds(p) == [NodeProblemKind.SINGLE_MIG_DISABLED] and p[0].gpu_indices == (1, 3)
    p = check_node(A80, [{"1g.10gb": 7}, {}], "single")
    assert kinds(p) == [NodeProblemKind.SINGLE_EMPTY_GPU] and p[0].gpu_indices == (1,)
    # no MIG at all is not a MIG problem
    assert check_node(A80, [None, None], "single") == []


def test_mixed_allows_different_profiles_and_disabled_gpus():
    assert check_node(A80, [{"3g.40gb": 1, "1g.10gb": 2}, None, {}, {"7g.80gb": 1}], "mixed") == []
    p = check_node(A80, [{"1c.3g.40gb": 1, "3g.40gb": 1}], "mixed")
    assert kinds(p) == [NodeProblemKind.NO_MIXED_RESOURCE] and p[0].severity == "warning"


def test_mig_on_a_gpu_without_mig_names_the_gpu():
    p = check_node("L40S", [None, {"1g.10gb": 1}], "mixed")
    assert kinds(p) == [NodeProblemKind.NOT_MIG_CAPABLE]
    assert p[0].gpu_indices == (1,) and "L40S" in p[0].message and "GPU 1" in p[0].message
    assert check_node("L40S", [None, None], "mixed") == []


def test_strategy_none_warns():
    p = check_node(A80, [{"1g.10gb": 7}], "none")
    assert kinds(p) == [NodeProblemKind.STRATEGY_NONE] and p[0].severity == "warning"
    with pytest.raises(ValueError):
        check_node(A80, [], "auto")


def test_resources_for_layout():
    lay = {"3g.40gb": 1, "1g.10gb": 2, "1g.10gb+me": 1}
    assert resources_for_layout(A80, lay, "mixed") == {
        "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-3g.40gb": 1}
    assert resources_for_layout(A80, {"1g.10gb": 7}, "single") == {"nvidia.com/gpu": 7}
    assert resources_for_layout(A80, lay, "none") == {}
    assert resources_for_layout(A80, None, "mixed") == {"nvidia.com/gpu": 1}
    assert resources_for_layout(A80, {"1c.3g.40gb": 1}, "mixed") == {}
    assert resources_for_node(A80, [{"1g.10gb": 7}, None], "mixed") == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 7}
