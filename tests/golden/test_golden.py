"""Golden trees: every example compiles to exactly its reviewed tree.

Regenerate with `python tests/golden/refresh.py` and review the diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import compile_fleet
from gpuplan.output.tree import check_tree
from tests.golden.refresh import targets

CASES = targets()


def test_every_example_has_a_golden_tree():
    assert len(CASES) >= 3
    for spec, tree in CASES:
        assert tree.is_dir(), f"{tree} missing: run python tests/golden/refresh.py"


@pytest.mark.parametrize("spec,tree", CASES, ids=[s.stem for s, _ in CASES])
def test_example_matches_golden_tree(spec: Path, tree: Path):
    compiled = compile_fleet(spec, out_dir=tree)
    assert not [d for d in compiled.diagnostics if d.is_error]
    result = check_tree(tree, compiled.files)
    problems = []
    if result.missing:
        problems.append(f"missing: {', '.join(result.missing)}")
    if result.extra:
        problems.append(f"extra: {', '.join(result.extra)}")
    if result.differing:
        problems.append(f"differing: {', '.join(result.differing)}")
    assert result.ok, "golden tree is stale (python tests/golden/refresh.py):\n" + "\n".join(problems) + "\n" + result.diff
