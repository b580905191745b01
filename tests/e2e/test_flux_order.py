"""Flux's order over gpuplan's Kustomizations (tests.e2e.engine.flux_steps), without a control
plane: a broken GPU Operator (its Kustomization never Ready) still lets a tenancy change apply."""

from __future__ import annotations

from tests.e2e.engine import flux_steps, load_tree
from tests.e2e.transitions import FLUX, TWO, build_pair
from tests.rules.helpers import BASE


def _quotas(steps) -> dict[str, list[str]]:
    return {st.name: sorted(o["metadata"]["namespace"] for o in st.apply if o["kind"] == "ResourceQuota")
            for st in steps}


def test_a_quota_change_applies_while_the_operator_is_broken(tmp_path):
    old, new = build_pair(tmp_path, BASE.replace(*FLUX, 1), TWO.replace(*FLUX, 1))
    o, n = load_tree(old.tree), load_tree(new.tree)
    op = next(k[3] for k in n.objects if k[1] == "Kustomization" and k[3].endswith("-gpu-operator"))
    healthy = flux_steps(o, n)
    broken = flux_steps(o, n, broken=frozenset({op}))
    names = [s.name for s in broken]
    assert "apply" not in names, "the root dependsOn the operator: it waits"
    assert not any(x["kind"] == "NodeFeatureRule" for s in broken for x in s.apply)
    assert any(x["kind"] == "NodeFeatureRule" for s in healthy for x in s.apply)
    applied = {ns for v in _quotas(broken).values() for ns in v}
    assert "beta-ns" in applied, "the new tenant's quota reaches the cluster"
    # the classes still come after their rules, in both
    for steps in (healthy, broken):
        at = {s.name: i for i, s in enumerate(steps)}
        pol = min(i for i, s in enumerate(steps) if any(x["kind"] == "ValidatingAdmissionPolicyBinding" for x in s.apply))
        cls = min(i for i, s in enumerate(steps) if any(x["kind"] == "PriorityClass" for x in s.apply))
        assert pol < cls, at


def test_moving_the_tenancy_objects_out_of_the_root_prunes_none(tmp_path):
    """A tree of the old layout (everything in the root) replaced by this one: the tenancy
    Kustomization applies before the root prunes, so no policy, binding or quota is deleted."""
    old, new = build_pair(tmp_path, BASE.replace(*FLUX, 1), TWO.replace(*FLUX, 1))
    o = load_tree(old.tree)
    # the old layout: the root lists every tenancy file, no tenancy Kustomization
    import yaml
    root = old.tree / "kustomization.yaml"
    k = yaml.safe_load(root.read_text())
    tenancy = yaml.safe_load((old.tree / "delivery/tenancy/kustomization.yaml").read_text())["resources"]
    k["resources"] = sorted(k["resources"] + [p.removeprefix("../../") for p in tenancy])
    root.write_text(yaml.safe_dump(k))
    (old.tree / "delivery/tenancy/kustomization.yaml").write_text(yaml.safe_dump({"resources": []}))
    o = load_tree(old.tree)
    steps = flux_steps(o, load_tree(new.tree))
    pruned = [x["kind"] for s in steps for x in s.prune]
    assert not {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ResourceQuota", "Namespace",
                "PriorityClass"} & set(pruned), pruned
