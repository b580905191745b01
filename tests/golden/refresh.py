#!/usr/bin/env python3
"""Regenerate every golden tree, after reviewing the change it makes.

    python tests/golden/refresh.py

examples/fleet.yaml -> generated/ (the tree this repository commits);
examples/<name>.yaml -> tests/golden/<name>/. Review `git diff` before committing."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def targets() -> list[tuple[Path, Path]]:
    out = []
    for spec in sorted((REPO / "examples").glob("*.yaml")):
        tree = REPO / "generated" if spec.stem == "fleet" else REPO / "tests" / "golden" / spec.stem
        out.append((spec, tree))
    return out


def main() -> int:
    from gpuplan.compiler import Options, compile_fleet
    from gpuplan.output.tree import write_tree

    status = 0
    for spec, tree in targets():
        # a fresh build: config names an older tree kept for its nodes are not
        # carried into the examples (docs/transitions.md)
        compiled = compile_fleet(spec, out_dir=tree, options=Options(keep_previous=False))
        errors = [d for d in compiled.diagnostics if d.is_error]
        if errors or not compiled.files:
            print(f"{spec.relative_to(REPO)}: invalid, not written", file=sys.stderr)
            status = 1
            continue
        result = write_tree(tree, compiled.files, force=True)
        print(f"{tree.relative_to(REPO)}: {len(result.written)} written, {len(result.removed)} removed")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
