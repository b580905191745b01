"""GP633: Karpenter before v1.11.0 ignores NodePool limits.nodes (kubernetes-sigs/karpenter
#2526, commit 9f749d9, first tagged v1.11.0), so a pool's maxGPUs is no ceiling."""

from __future__ import annotations

from pathlib import Path

from gpuplan.compiler import check_fleet
from tests.rules.helpers import position

BURST = (Path(__file__).parents[2] / "examples" / "aws-burst.yaml").read_text()


def _gp633(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    return [d for d in check_fleet(p).diagnostics if d.code == "GP633"]


def test_an_old_karpenter_has_no_gpu_ceiling(tmp_path):
    text = BURST.replace("      nodeRole: KarpenterNodeRole-aws-burst\n",
                         "      nodeRole: KarpenterNodeRole-aws-burst\n      karpenterVersion: 1.10.2\n")
    [d] = _gp633(tmp_path, text)
    assert "train-h100" in d.message and "infer-l40s" in d.message and d.severity.value == "warning"
    assert (d.line, d.col) == position(text, "1.10.2")


def test_from_1_11_the_limit_holds(tmp_path):
    assert _gp633(tmp_path, BURST) == []  # default 1.14.1
    text = BURST.replace("      nodeRole: KarpenterNodeRole-aws-burst\n",
                         "      nodeRole: KarpenterNodeRole-aws-burst\n      karpenterVersion: 1.11.0\n")
    assert _gp633(tmp_path, text) == []
