"""The old-tree gate (gpuplan.report.treeshape) refuses only what no generated tree holds:
every golden tree passes it, and what it refuses is named by file, object and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.output.objdiff import tree_objects
from gpuplan.report.treeshape import MAX_SHOWN, TreeShapeError, check, require
from tests.conftest import REPO

GOLDEN = sorted(p for p in (REPO / "tests" / "golden").iterdir() if p.is_dir() and not p.name.startswith("_"))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("tree", GOLDEN, ids=lambda p: p.name)
def test_every_generated_tree_passes(tree: Path):
    parsed = tree_objects(_files(tree))
    assert len([k for k in parsed if k.kind]) > 10
    assert check(parsed) == []


NFR = b"""apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: gpu-a, labels: {gpuplan.dev/pool: a}}
spec:
  rules:
    - labels: {nvidia.com/mig.config: [all-1g.10gb]}
      matchFeatures: [{matchExpressions: {nodename: {value: [n1, 2]}}}]
"""


def test_a_refusal_names_the_file_the_object_and_the_field():
    found = check(tree_objects({"pools/a/node-labels.yaml": NFR}), tree="old")
    assert [(d.code, d.file) for d in found] == [("GP839", "old/pools/a/node-labels.yaml")] * 2
    assert found[0].message.startswith("NodeFeatureRule.nfd.k8s-sigs.io gpu-a: ")
    assert {d.message.split(": ", 1)[1].split(";")[0] for d in found} == {
        'spec.rules[0].labels["nvidia.com/mig.config"] is a list, not a string',
        "spec.rules[0].matchFeatures[0].matchExpressions.nodename.value[1] is a number, not a string"}
    assert all("git checkout" in d.hint for d in found)


def test_require_raises_with_every_problem_counted():
    docs = b"".join(b"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\ndata: [1]\n" % i
                    for i in range(MAX_SHOWN + 5))
    with pytest.raises(TreeShapeError) as exc:
        require(tree_objects({"x.yaml": docs}))
    assert len(exc.value.diagnostics) == MAX_SHOWN + 1 and exc.value.exit_code == 1
    assert "5 more fields" in exc.value.diagnostics[-1].message
    assert exc.value.diagnostic is exc.value.diagnostics[0]
