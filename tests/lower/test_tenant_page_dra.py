"""Tenant pages state a DRA tier's enforced grant: the quota key that charges its claims and
each namespace's number, as the emitted ResourceQuotas hold them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gpuplan.compiler import check_fleet, render_files
from gpuplan.dra.claims import tier_claims

REPO = Path(__file__).resolve().parents[2]


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def test_dra_tier_pages_state_the_quota_key_and_its_number():
    rf = check_fleet(REPO / "examples" / "dra.yaml").resolved
    files = render_files(rf, "examples/dra.yaml")
    claims = {c.tier: c for c in tier_claims(rf)}
    assert claims
    seen = 0
    for tn in rf.fleet.spec.tenants:
        page = _text(files[f"tenants/{tn.name}/README.md"])
        hard = {}
        for q in yaml.safe_load_all(_text(files[f"tenants/{tn.name}/resourcequotas.yaml"])):
            if q and not q["spec"].get("scopeSelector"):
                hard[q["metadata"]["namespace"]] = q["spec"]["hard"]
        for section in page.split("\n## Tier ")[1:]:
            tier = section.split("\n", 1)[0]
            line = next((x for x in section.splitlines() if x.startswith("- DRA:")), None)
            if tier not in claims:
                assert line is None
                continue
            c = claims[tier]
            assert f"`{c.quota_key}`" in line
            for ns, n in re.findall(r"`([a-z0-9-]+)` at most (\d+) devices", line):
                assert int(n) == int(hard[ns][c.quota_key])
                seen += 1
            assert f"at most {max(c.template_counts())} per claim" in line
    assert seen >= len(claims)
