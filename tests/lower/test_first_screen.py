"""The first screen of the generated README ("Before the first sync") and of each tenant page
("Your contract"): the first section, within one screen, linking to the details below, and
carrying the facts from the values the rest of the tree is made from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.golden.refresh import targets

BUDGET = 25  # lines: one screen


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _first_section(text: str, title: str) -> list[str]:
    """The lines of the first `## ` section, which must be ``title``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("## "))
    assert lines[start] == f"## {title}", lines[start]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    while lines[end - 1] == "":
        end -= 1
    return lines[start:end]


def _links_resolve(block: list[str], text: str) -> None:
    anchors = {_slug(ln.lstrip("#")) for ln in text.splitlines() if ln.startswith("#")}
    links = re.findall(r"\]\(#([^)]+)\)", "\n".join(block))
    assert links, "the first screen links to the details"
    assert set(links) <= anchors, set(links) - anchors


TREES = [pytest.param(spec, tree, id=tree.name) for spec, tree in targets()]


@pytest.fixture(scope="module")
def checked():
    from gpuplan.compiler import check_fleet

    cache: dict[Path, object] = {}
    return lambda spec: cache.get(spec) or cache.setdefault(spec, check_fleet(spec).resolved)


@pytest.mark.parametrize("spec,tree", TREES)
def test_readme_opens_with_before_the_first_sync(spec, tree, checked):
    from gpuplan.lower.docs import FLUX_FLOORS, argocd_floor

    rf = checked(spec)
    text = (tree / "README.md").read_text()
    block = _first_section(text, "Before the first sync")
    assert len(block) <= BUDGET
    _links_resolve(block, text)
    flat = "\n".join(block)
    if rf.fleet.spec.cluster.gitops.engine == "flux":
        assert all(f"{c} **{v}**" in flat for c, v in FLUX_FLOORS.items())
    else:
        floor, why = argocd_floor(rf)
        assert f"Argo CD **{floor}** or later ({why})" in flat
    assert f"Kubernetes **{rf.fleet.spec.cluster.kubernetes_version}**" in flat
    out = rf.fleet.spec.cluster.gitops.path.strip("/") or "."
    assert f"`kubectl apply -f {out}/delivery/bootstrap.yaml`" in flat  # the hand step
    # moved, not copied: the details below still hold the whole bootstrap step
    assert text.count("## Prerequisites") == 1 and "bootstrap.yaml` creates" in text.split(flat, 1)[1]


@pytest.mark.parametrize("spec,tree", TREES)
def test_tenant_pages_open_with_the_contract(spec, tree, checked):
    from gpuplan.identity import LOCAL_QUEUE, QUEUE_LABEL, priority_class_name
    from gpuplan.queues import queue_ledger

    rf = checked(spec)
    ledger = queue_ledger(rf) if rf.fleet.spec.queueing is not None else None
    queued = set(ledger.queued_tiers) if ledger is not None else set()
    for tn in rf.fleet.spec.tenants:
        text = (tree / "tenants" / tn.name / "README.md").read_text()
        block = _first_section(text, "Your contract")
        assert len(block) <= BUDGET
        _links_resolve(block, text)
        flat = "\n".join(block)
        assert "- Namespaces: " + ", ".join(f"`{n}`" for n in tn.namespaces) + "." in flat
        assert text.count("- Namespaces: ") == 1  # moved into the block, not repeated
        granted = {t for per in tn.quotas.values() for t, units in per.items()}
        for name in granted:
            tier = rf.tier_by_name[name]
            row = next(ln for ln in block if ln.startswith(f"| [{name}](#tier-{name}) |"))
            assert f"`{rf.tier_resource(tier)}`" in row and f"`{priority_class_name(tier)}` ({tier.priority})" in row
            if name in queued and "## Queue" in text and rf.fleet.spec.queueing.engine == "volcano":
                from gpuplan.queueing.volcano.queues import leaf_name

                assert f"a Volcano Job in queue `{leaf_name(tn.name, tier.pool)}`" in row
            elif name in queued and "## Queue" in text:
                assert f"`{QUEUE_LABEL}: {LOCAL_QUEUE}`" in row
            else:
                assert f"`priorityClassName: {priority_class_name(tier)}`" in row


def test_a_tenant_of_many_tiers_still_fits(tmp_path):
    from gpuplan.compiler import Options, compile_fleet
    from tests.rules.helpers import BASE, edit

    n = 30
    tiers = "".join(f"    - {{name: t{i:02d}, pool: train, workload: batch, priority: {100 + i}}}\n" for i in range(n))
    text = edit(BASE, "  tenants:\n", tiers + "  tenants:\n")
    text = edit(text, "alpha-ns: {training: 8, serve: 8, notebooks: 16}",
                "alpha-ns: {" + ", ".join(f"t{i:02d}: 0" for i in range(n)) + ", training: 8}")
    (tmp_path / "fleet.yaml").write_text(text)
    c = compile_fleet(tmp_path / "fleet.yaml", out_dir=tmp_path / "generated", options=Options(keep_previous=False))
    assert not [d for d in c.diagnostics if d.is_error], c.diagnostics
    page = c.files["tenants/alpha/README.md"].decode()
    block = _first_section(page, "Your contract")
    assert len(block) <= BUDGET
    assert any("more tiers: their sections below" in ln for ln in block)
    assert "## Tier t29" in page  # the details keep every tier
