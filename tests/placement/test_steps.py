"""The tenancy boundary at every step of the sync from one tree to the next
(gpuplan.placement.steps): the orders gpuplan gives its objects open no window, and the
proof finds the windows the orders it replaced opened."""

from __future__ import annotations

import pytest

from gpuplan.compiler import placement_docs
from gpuplan.lower import common
from gpuplan.placement.steps import step_breaches, sync_states
from tests.e2e.transitions import SCENARIOS, build_pair

pytestmark = pytest.mark.slow


def _apart(tmp, before: str, after: str):
    """Both specs resolved and lowered, each on its own (no existing tree: `build` itself would
    refuse the orders these tests put back)."""
    from gpuplan.compiler import Options, compile_fleet

    out = []
    for i, text in enumerate((before, after)):
        spec = tmp / f"fleet-{i}.yaml"
        spec.write_text(text, encoding="utf-8")
        c = compile_fleet(spec, out_dir=tmp / f"tree-{i}", options=Options(keep_previous=False))
        assert c.files, [str(d) for d in c.diagnostics if d.is_error]
        out.append(c.resolved)
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_step_of_a_transition_opens_the_boundary(name, tmp_path):
    old, new = build_pair(tmp_path, *SCENARIOS[name])
    found = step_breaches(new.rf, placement_docs(old.rf), placement_docs(new.rf))
    assert not found, "\n".join(map(str, found))


def test_a_namespace_the_new_tree_trusts_is_no_window_at_any_step(tmp_path):
    """With every object of the trees (the DRA driver's Namespace too, created in an early wave
    while the old tree's bindings still select it), the change to DRA opens no window: the new
    tree exempts that namespace, so what it admits there is not past the new boundary; without
    the exemption the proof would count its claims."""
    from gpuplan.placement.boundary import prove_boundary
    from gpuplan.placement.steps import STEP_KINDS, trusted_namespaces
    from tests.e2e.engine import load_tree

    old, new = build_pair(tmp_path, *SCENARIOS["migration-before-dra-to-dra"])
    old_docs, new_docs = (list(load_tree(b.tree).objects.values()) for b in (old, new))
    assert step_breaches(new.rf, old_docs, new_docs) == []
    driver = next(n for n in trusted_namespaces(new.rf) if "dra" in n)
    early = sync_states(old_docs, new_docs, "argocd")[0][1]
    assert driver in {d["metadata"]["name"] for d in early if d["kind"] == "Namespace"}
    rest = [d for d in new_docs if d.get("kind") not in STEP_KINDS]
    assert any(b.namespace == driver for b in prove_boundary(new.rf, rest + early).breaches)


@pytest.mark.parametrize("name,step", [("add-tier", "wave -1"), ("rename-tier", "wave -2"),
                                       ("remove-tier", "wave -2")])
def test_a_class_synced_before_its_rules_is_found_at_its_step(name, step, tmp_path, monkeypatch):
    # the order before: the tiers' PriorityClasses with the Namespaces, ahead of the policies' bindings
    monkeypatch.setitem(common.WAVES, "PriorityClass", -2)
    old, new = _apart(tmp_path, *SCENARIOS[name])
    found = step_breaches(new, placement_docs(old), placement_docs(new))
    assert found and found[0].step == step, found[:3]
    assert any(b.namespace == "default" for b in found)


def test_a_quota_pruned_before_its_grant_is_found(tmp_path, monkeypatch):
    # a removed namespace's quota pruned (wave 0) while its grant (the bindings, wave 1) still holds
    from gpuplan.lower import tenancy

    real = tenancy.object_annotations
    monkeypatch.setattr(tenancy, "object_annotations", lambda rf, kind, **kw: real(rf, kind, **{**kw, "protected": False}))
    monkeypatch.setitem(common.WAVES, "ResourceQuota", 0)
    old, new = _apart(tmp_path, *SCENARIOS["remove-tenant"])
    found = step_breaches(new, placement_docs(old), placement_docs(new))
    assert [b.step for b in found] == ["wave 0"] * len(found) and found
    assert all("uncharged" in b.escape and b.namespace == "beta-ns" for b in found)


def test_flux_applies_the_classes_after_the_root_and_argo_prunes_them_first(tmp_path):
    old, new = build_pair(tmp_path, *SCENARIOS["remove-tier"])
    states = sync_states(placement_docs(old.rf), placement_docs(new.rf), "argocd")
    gone = "gpuplan-notebooks"

    def has_class(held):
        return any(d["kind"] == "PriorityClass" and d["metadata"]["name"] == gone for d in held)

    def has_rules(held):
        return any(d["kind"] == "ValidatingAdmissionPolicyBinding" and gone in d["metadata"]["name"] for d in held)
    # at every step the removed class exists only with its rules
    assert all(has_rules(h) or not has_class(h) for _, h in states)
    assert not has_class(states[-1][1]) and not has_rules(states[-1][1])
    (tmp_path / "flux").mkdir()
    old, new = build_pair(tmp_path / "flux", *SCENARIOS["flux-remove-tier"])
    steps = [n for n, _ in sync_states(placement_docs(old.rf), placement_docs(new.rf), "flux")]
    assert steps == ["apply", "prune", "priority classes"]


def test_build_refuses_a_change_whose_sync_step_opens_the_boundary(tmp_path):
    """A tree whose PriorityClasses were moved before their rules by hand: renaming a tier
    over it is refused with the step named, and nothing is written."""
    from click.testing import CliRunner

    from gpuplan.cli.main import cli
    from tests.e2e.transitions import BASE, RENAMED_TIER

    spec = tmp_path / "fleet.yaml"
    spec.write_text(BASE, encoding="utf-8")
    out = tmp_path / "generated"
    r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(out)])
    assert r.exit_code == 0, r.output
    pcs = out / "cluster" / "priorityclasses.yaml"
    edited = pcs.read_text(encoding="utf-8").replace("sync-wave: '2'", "sync-wave: '-2'")
    assert edited != pcs.read_text(encoding="utf-8")
    pcs.write_text(edited, encoding="utf-8")
    spec.write_text(RENAMED_TIER, encoding="utf-8")
    r = CliRunner().invoke(cli, ["build", str(spec), "-o", str(out), "--force"])
    assert r.exit_code == 1, r.output
    assert "GP529" in r.output and "step wave -2" in r.output and "'default'" in r.output
    assert pcs.read_text(encoding="utf-8") == edited  # not written
