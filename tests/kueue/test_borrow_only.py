"""A tenant that may only borrow: without a quota row for a queued tier no namespace of it gets the
LocalQueue (gpuplan.queues.queued_namespaces), so its borrowing is unreachable — an error at the
borrowingLimit, whose hint, pasted, gives the tenant a working queue."""

from __future__ import annotations

import re

import yaml

from gpuplan.compiler import compile_fleet
from tests.outputkit import REPO

RESEARCH = """    - name: research
      namespaces: [research]
      quotas:
        research: {batch: 4}
      queueing:"""


def _write(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text)
    return p


def test_a_borrow_only_tenant_is_refused_and_the_hint_is_the_fix(tmp_path):
    text = (REPO / "examples" / "kueue.yaml").read_text()
    assert RESEARCH in text
    borrow_only = text.replace(RESEARCH, "    - name: research\n      namespaces: [research]\n      queueing:")
    c = compile_fleet(_write(tmp_path, borrow_only), out_dir=tmp_path / "generated")
    [d] = [d for d in c.diagnostics if d.code == "GP432"]
    assert d.is_error and not c.files
    line = borrow_only.splitlines()[d.line - 1]
    assert line.strip().startswith("borrowingLimit:") and line[d.col - 1:].startswith("batch")
    quotas = re.search(r"quotas: (\{.*\}) — ", d.hint).group(1)
    assert yaml.safe_load(quotas) == {"research": {"batch": 0}}
    fixed = borrow_only.replace("      namespaces: [research]\n      queueing:",
                                f"      namespaces: [research]\n      quotas: {quotas}\n      queueing:")
    c = compile_fleet(_write(tmp_path, fixed), out_dir=tmp_path / "generated")
    assert not [d for d in c.diagnostics if d.is_error]
    queues = [q for q in yaml.safe_load_all(c.files["tenants/research/localqueues.yaml"]) if q]
    assert [q["metadata"]["namespace"] for q in queues] == ["research"]


def test_a_tenant_with_a_queued_row_may_borrow_other_tiers():
    """The example's research tenant borrows burst-training with no row for it: its LocalQueue (from
    the batch row) reaches every tier its queue covers, so nothing is refused."""
    c = compile_fleet(REPO / "examples" / "kueue.yaml", out_dir=REPO / "examples" / "generated")
    assert "GP432" not in {d.code for d in c.diagnostics}
