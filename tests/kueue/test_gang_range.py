"""Gangs of a range of sizes (`gang.minNodesPerJob` to `nodesPerJob`): every queue that reaches
the tier must admit the smallest job (GP421), the tenant page says the largest its queue admits
and shows a Job of that size, and an upside-down range is refused (GP433)."""

from __future__ import annotations

import yaml

from gpuplan.compiler import compile_fleet
from tests.outputkit import REPO

GANG = "        nodesPerJob: 2\n"


def _compile(tmp_path, gang: str):
    text = (REPO / "examples" / "kueue.yaml").read_text()
    assert text.count(GANG) == 1
    p = tmp_path / "fleet.yaml"
    p.write_text(text.replace(GANG, gang))
    return compile_fleet(p, out_dir=tmp_path / "generated"), p.read_text()


def test_a_range_is_admitted_where_its_smallest_job_fits(tmp_path):
    fixed, _ = _compile(tmp_path, "        nodesPerJob: 4\n")
    assert "GP421" in {d.code for d in fixed.diagnostics}, "a 4-node job (32 GPUs) is over nlp's 24"
    ranged, _ = _compile(tmp_path, "        nodesPerJob: 4\n        minNodesPerJob: 2\n")
    assert not [d for d in ranged.diagnostics if d.is_error]
    page = ranged.files["tenants/nlp/README.md"].decode()
    assert "2 to 4 pods of 8 `nvidia.com/gpu` each" in page and "admits jobs of up to 3 pods" in page
    jobs = [d for block in page.split("```yaml")[1:] for d in yaml.safe_load_all(block.split("```")[0])
            if d and d.get("kind") == "Job" and d["metadata"].get("generateName") == "training-"]
    assert jobs and {j["spec"]["parallelism"] for j in jobs} == {3}


def test_an_upside_down_range_is_refused_at_its_line(tmp_path):
    c, text = _compile(tmp_path, "        nodesPerJob: 2\n        minNodesPerJob: 3\n")
    [d] = [d for d in c.diagnostics if d.code == "GP433"]
    assert d.is_error and text.splitlines()[d.line - 1].strip() == "minNodesPerJob: 3"
