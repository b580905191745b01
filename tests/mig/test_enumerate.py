"""Layout enumeration: complete, creatable, maximal, deterministic, fast."""

from __future__ import annotations

import subprocess
import sys

from gpuplan.catalog import mig_gpus
from gpuplan.mig.solver import check_layout, enumerate_layouts, layout_tuples

A40 = "A100-SXM4-40GB"


def test_every_layout_is_creatable_and_distinct():
    for gpu in mig_gpus():
        lays = enumerate_layouts(gpu)
        keys = [tuple(sorted(lay.items())) for lay in lays]
        assert len(keys) == len(set(keys)), gpu.key
        assert all(lay and all(c > 0 for c in lay.values()) for lay in lays)
        assert all(check_layout(gpu, lay).ok for lay in lays), gpu.key


def test_known_layouts_are_listed():
    lays = enumerate_layouts(A40)
    for lay in ({"7g.40gb": 1}, {"4g.20gb": 1, "3g.20gb": 1}, {"1g.5gb": 7}, {"2g.10gb": 3, "1g.5gb": 1},
                {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}, {"1g.10gb": 4}):
        assert lay in lays
    for lay in ({"3g.20gb": 2, "1g.5gb": 1}, {"4g.20gb": 1, "2g.10gb": 2}, {"1g.10gb": 4, "1g.5gb": 1}):
        assert lay not in lays
    assert lays[0] == {"7g.40gb": 1}  # most compute first


def test_maximal_layouts():
    every = enumerate_layouts(A40)
    maximal = enumerate_layouts(A40, maximal=True)
    assert set(map(lambda d: tuple(sorted(d.items())), maximal)) <= set(
        map(lambda d: tuple(sorted(d.items())), every))
    assert {"3g.20gb": 2} in maximal and {"1g.5gb": 7} in maximal and {"4g.20gb": 1, "3g.20gb": 1} in maximal
    assert {"3g.20gb": 1} not in maximal and {"1g.5gb": 6} not in maximal
    profiles = [p.name for p in __import__("gpuplan.catalog").catalog.get_gpu(A40).profiles]
    for lay in maximal:
        for p in profiles:
            bigger = dict(lay)
            bigger[p] = bigger.get(p, 0) + 1
            assert not check_layout(A40, bigger).ok, (lay, p)
    for lay in every:
        if lay not in maximal:
            assert any(check_layout(A40, {**lay, p: lay.get(p, 0) + 1}).ok for p in profiles), lay


def test_enumeration_is_deterministic_and_cached():
    assert layout_tuples(A40) is layout_tuples("NVIDIA-A100-SXM4-40GB")
    code = ("import json; from gpuplan.mig.solver import enumerate_layouts as e;"
            "print(json.dumps([e('B200'), e('RTX-PRO-6000', maximal=True)]))")
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outs) == 1


def test_non_mig_models_have_no_layouts():
    assert enumerate_layouts("T4") == ()
