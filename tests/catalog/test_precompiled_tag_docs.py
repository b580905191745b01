"""Every doc and diagnostic that spells out a precompiled driver image tag gives the form the
GPU Operator pulls: ``<branch>-<kernel version>-<os tag>`` (NVIDIA/gpu-operator@v26.7.0
controllers/object_controls.go:3375-3429, ``resolveDriverTag``: the kernel version appended to
the branch at line 3393, the OS tag to every driver image at 3424-3427)."""

from __future__ import annotations

import re
from pathlib import Path

from gpuplan.codes import all_codes

REPO = Path(__file__).resolve().parents[2]
# a tag spelled with placeholders: <branch>-<kernel...> and whatever follows it
TAG = re.compile(r"<branch>-<kernel[^>]*>(\S*)")


def texts() -> dict[str, str]:
    out = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
           for p in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]}
    for code, c in all_codes().items():
        out[f"explain {code}"] = " ".join(str(x) for x in (c.title, c.summary, c.bad, c.good) if x)
    return out


def test_precompiled_tags_carry_the_os_tag():
    seen = 0
    for where, text in texts().items():
        for m in TAG.finditer(text):
            seen += 1
            assert m.group(1).startswith("-<os"), f"{where}: {m.group(0)}"
    assert seen, "no doc spells the precompiled tag"
