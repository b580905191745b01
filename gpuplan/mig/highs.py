"""HiGHS, the MILP solver of both MIG planners, through its own binding.

``highspy`` (the HiGHS project's Python package) imports in ~0.2 s where
``scipy.optimize`` (which bundles an older HiGHS behind ``milp``/``linprog``)
costs 0.6–1.0 s. It is imported only on use: most demands are proved optimal by the greedy path
and never reach a solver.

One function, :func:`solve`, takes a model as plain lists (sparse rows) and
answers in the terms the planners reason in: a solution or none, optimal or
stopped by the time limit, infeasible, and the proved dual bound.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

INF = math.inf
# A relative gap of 1e-4 (HiGHS' default) could stop one GPU short on plans above 10,000 GPUs.
MIP_REL_GAP = 1e-9


@dataclass(frozen=True)
class Solution:
    x: tuple[float, ...] | None  # None: no feasible point found
    optimal: bool  # proved optimal (within MIP_REL_GAP)
    infeasible: bool  # proved that no point satisfies the rows and bounds
    value: float | None  # objective at x
    dual_bound: float | None  # no integer point has a smaller objective (MILP only)
    message: str


def solve(
    cost: Sequence[float],
    rows: Sequence[Mapping[int, float]],
    row_lo: Sequence[float],
    row_hi: Sequence[float],
    col_lo: Sequence[float],
    col_hi: Sequence[float],
    integer: Sequence[bool] | None = None,
    *,
    time_limit: float | None = None,
) -> Solution:
    """Minimise ``cost·x`` subject to ``row_lo <= rows·x <= row_hi`` and the
    column bounds; ``integer`` marks integral columns (None: the LP)."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(float(time_limit), 0.01))
    if integer is not None:
        h.setOptionValue("mip_rel_gap", MIP_REL_GAP)
    lp = highspy.HighsLp()  # HiGHS' infinity is IEEE inf (highspy.kHighsInf), so INF passes as is
    lp.num_col_, lp.num_row_ = len(cost), len(rows)
    lp.col_cost_ = [float(c) for c in cost]
    lp.col_lower_ = [float(v) for v in col_lo]
    lp.col_upper_ = [float(v) for v in col_hi]
    lp.row_lower_ = [float(v) for v in row_lo]
    lp.row_upper_ = [float(v) for v in row_hi]
    m = lp.a_matrix_
    m.format_ = highspy.MatrixFormat.kRowwise
    m.num_col_, m.num_row_ = len(cost), len(rows)
    start, index, value = [0], [], []
    for r in rows:
        for j in sorted(r):
            if r[j]:
                index.append(j)
                value.append(float(r[j]))
        start.append(len(index))
    m.start_, m.index_, m.value_ = start, index, value
    if integer is not None:
        kinds = highspy.HighsVarType
        lp.integrality_ = [kinds.kInteger if i else kinds.kContinuous for i in integer]
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    found = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    x = tuple(h.getSolution().col_value) if found else None
    dual = float(info.mip_dual_bound) if integer is not None else None
    return Solution(
        x=x,
        optimal=status == highspy.HighsModelStatus.kOptimal,
        infeasible=status == highspy.HighsModelStatus.kInfeasible,
        value=float(info.objective_function_value) if found else None,
        dual_bound=dual if dual is not None and math.isfinite(dual) else None,
        message=h.modelStatusToString(status),
    )
