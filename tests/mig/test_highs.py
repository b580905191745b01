"""gpuplan.mig.highs: the planners' one door to HiGHS, answering in their terms."""

from __future__ import annotations

import math

from gpuplan.mig import highs


def test_milp_and_its_lp_relaxation() -> None:
    # minimise x + y with 2x + 3y >= 7: the LP optimum is y = 7/3, the integer one 3
    rows = [{0: 2.0, 1: 3.0}]
    lp = highs.solve([1.0, 1.0], rows, [7.0], [highs.INF], [0.0, 0.0], [highs.INF, highs.INF])
    assert lp.optimal and not lp.infeasible and math.isclose(lp.value, 7 / 3)
    assert lp.dual_bound is None  # an LP has no MIP bound
    mip = highs.solve([1.0, 1.0], rows, [7.0], [highs.INF], [0.0, 0.0], [10.0, 10.0], [True, True],
                      time_limit=5)
    assert mip.optimal and mip.value == 3 and mip.dual_bound is not None and math.isclose(mip.dual_bound, 3)
    x = [round(v) for v in mip.x]
    assert all(math.isclose(a, b) for a, b in zip(mip.x, x)) and 2 * x[0] + 3 * x[1] >= 7 and sum(x) == 3


def test_mixed_integrality_and_row_ranges() -> None:
    # 1 <= x - y <= 1.5, x integer in [2, 5], minimise x + y: y continuous gives x = 2,
    # y = 0.5; were y integral it would have to be 1
    rows = [{0: 1.0, 1: -1.0}]
    s = highs.solve([1.0, 1.0], rows, [1.0], [1.5], [2.0, 0.0], [5.0, highs.INF], [True, False])
    assert s.optimal and math.isclose(s.x[0], 2) and math.isclose(s.x[1], 0.5) and math.isclose(s.value, 2.5)
    both = highs.solve([1.0, 1.0], rows, [1.0], [1.5], [2.0, 0.0], [5.0, highs.INF], [True, True])
    assert both.optimal and math.isclose(both.value, 3.0)


def test_infeasible_model_says_so_and_has_no_point() -> None:
    s = highs.solve([1.0], [{0: 1.0}], [2.0], [highs.INF], [0.0], [1.0], [True])
    assert s.infeasible and not s.optimal and s.x is None and s.value is None
