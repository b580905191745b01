"""The solver agrees with an independent brute-force search on every model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import mig_gpus
from gpuplan.mig.solver import check_layout, enumerate_layouts

from .bruteforce import all_count_vectors, creatable

MIG = mig_gpus()
# one board per profile table is enough for the exhaustive sweep (same table, same answer);
# hypothesis below draws from every board
TABLES = list({g.table: g for g in MIG}.values())


@st.composite
def model_and_layout(draw):
    gpu = draw(st.sampled_from(MIG))
    layout = {}
    for p in gpu.profiles:
        if draw(st.booleans()):
            layout[p.name] = draw(st.integers(0, p.max_instances + 1))
    return gpu, layout


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(model_and_layout())
def test_solver_agrees_with_brute_force(case):
    gpu, layout = case
    result = check_layout(gpu, layout)
    assert result.ok == creatable(gpu, layout), (gpu.key, layout, result.failure)
    if result.ok:  # and the placements it returns are a real witness
        used: set[int] = set()
        for pl in result.placements:
            p = gpu.profile(pl.profile)
            assert (pl.start, pl.size) in p.placements
            span = set(range(pl.start, pl.start + pl.size))
            assert not used & span
            used |= span
        assert sorted(pl.profile for pl in result.placements) == sorted(
            n for n, c in layout.items() for _ in range(c)
        )


def test_exhaustive_agreement_and_enumeration_on_every_table():
    for gpu in TABLES:
        expected = set()
        for layout in all_count_vectors(gpu):
            want = creatable(gpu, layout)
            assert check_layout(gpu, layout).ok == want, (gpu.key, layout)
            if want and layout:
                expected.add(tuple(sorted(layout.items())))
        got = {tuple(sorted(lay.items())) for lay in enumerate_layouts(gpu)}
        assert got == expected, gpu.key
