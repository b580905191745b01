"""Slice diagrams."""

from __future__ import annotations

import pytest

from gpuplan.catalog import mig_gpus
from gpuplan.mig.diagram import render_diagram
from gpuplan.mig.solver import check_layout, enumerate_layouts


def test_diagram_of_3_2_1_1():
    r = check_layout("A100-SXM4-40GB", {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2})
    d = render_diagram("A100-SXM4-40GB", r.placements)
    lines = d.text.splitlines()
    assert lines[2].startswith("compute [   A 2g.10gb    ][   B   ][   C   ][        D 3g.20gb        ]")
    assert lines[3] == "memory  [   A 2g.10gb    ][   B   ][   C   ][            D 3g.20gb             ]"
    assert [(b.row, b.label, b.start, b.size) for b in d.boxes if b.label == "D"] == [
        ("compute", "D", 4, 3), ("memory", "D", 4, 4)]
    assert d.as_dict()["boxes"][0] == {"row": "compute", "start": 0, "size": 2, "label": "A",
                                       "profile": "2g.10gb", "instance": 0}


def test_two_3g_strand_a_compute_slice():
    r = check_layout("A100-SXM4-40GB", {"3g.20gb": 2})
    compute = render_diagram("A100-SXM4-40GB", r.placements).text.splitlines()[2]
    assert "]    .    [" in compute


@pytest.mark.slow
def test_every_diagram_is_ascii_and_fits_80_columns():
    for gpu in mig_gpus():
        for lay in enumerate_layouts(gpu):
            text = render_diagram(gpu, check_layout(gpu, lay).placements).text
            assert text.isascii() or "×" not in text
            assert max(len(line) for line in text.splitlines()) <= 80, (gpu.key, lay)
            assert all(ch.isascii() for ch in text), (gpu.key, lay)


def test_empty_diagram_shows_free_slices():
    d = render_diagram("A30", ())
    assert d.boxes == () and d.text.splitlines()[3].split()[1:] == [".", ".", ".", "."]
