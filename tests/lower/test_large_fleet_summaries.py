"""A large fleet's README.md and CAPACITY.md keep aggregates; each tenant's
capacity rows move to tenants/<tenant>/CAPACITY.md. Small fleets keep the full
tables (the example trees are unchanged)."""

from __future__ import annotations

import re

import pytest

from benchmarks.make_fleet import make
from gpuplan.compiler import compile_fleet
from gpuplan.report.render import LARGE_TENANT_ROWS, render_markdown


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    d = tmp_path_factory.mktemp("large")
    (d / "fleet.yaml").write_text(make(200, 200))  # 600 namespaces
    c = compile_fleet(d / "fleet.yaml", out_dir=d / "generated")
    assert c.files, c.diagnostics
    return c


def _text(c, path: str) -> str:
    return c.files[path].decode()


def test_large_fleet_root_files_hold_aggregates(large) -> None:
    readme = _text(large, "README.md")
    cap = _text(large, "CAPACITY.md")
    assert "200 tenants, 600 namespaces:" in readme
    assert "| team-0000 | team-0000-0 |" not in readme  # no per-namespace rows
    assert "| `tenants/` |" in readme and "| `tenants/team-0000/namespaces.yaml` |" not in readme
    tenants = cap.split("## Tenants", 1)[1].split("\n## ", 1)[0]
    assert "200 tenants, 600 namespaces" in tenants
    assert len([ln for ln in tenants.splitlines() if ln.startswith("| team-")]) == 20
    # the root files no longer grow with the tenants
    assert len(readme) < 60_000 and len(cap) < 60_000


def test_every_tenant_row_is_in_its_tenant_file(large) -> None:
    full = render_markdown(large.resolved.capacity)  # what `gpuplan plan` prints: the whole table
    rows = [ln for ln in full.split("## Tenants", 1)[1].split("\n## ", 1)[0].splitlines()
            if ln.startswith("| team-")]
    assert len(rows) > LARGE_TENANT_ROWS
    per_file = []
    for tn in large.resolved.fleet.spec.tenants:
        text = _text(large, f"tenants/{tn.name}/CAPACITY.md")
        mine = [ln for ln in text.splitlines() if ln.startswith("| team-")]
        assert mine and all(re.match(rf"\| {tn.name}( total)? \|", ln) for ln in mine)
        per_file += mine
    assert per_file == rows


def test_small_fleet_keeps_full_tables(tmp_path) -> None:
    (tmp_path / "fleet.yaml").write_text(make(40, 20))
    c = compile_fleet(tmp_path / "fleet.yaml", out_dir=tmp_path / "generated")
    readme = _text(c, "README.md")
    assert "| team-0000 | team-0000-0 |" in readme
    assert "| `tenants/team-0000/namespaces.yaml` |" in readme
    assert "| team-0000 | team-0000-0 |" in _text(c, "CAPACITY.md")
    assert not any(p.startswith("tenants/") and p.endswith("CAPACITY.md") for p in c.files)
