"""The proofs' shortcuts at fleet scale decide exactly what evaluating every pod in every
namespace shape decides (docs/performance.md "The proofs at fleet scale"):

- the shapes a pod is refused in are the union of its refusing policies' binding masks
  (``Cluster.policy_masks``), so only the others are visited;
- a tier's shapes that a policy refuses and none of whose namespaces is granted the tier are
  one group per set of refusing bindings (``Cluster.refusals``), its namespaces a view over
  the shapes (``ShapeNamespaces``), not a copy;
- one engine context serves every policy evaluation (``placement.cel._Shared``);
- the proof reads slim copies of the quotas and namespaces (``objchecks.placement.slim``).

Each is compared with the exhaustive path (``exhaustive=True``: every shape asked through
``Cluster.policy_denials``, as before the shortcuts) on every example and on a benchmark fleet
of ``benchmarks/make_fleet.py``: the same verdict for every tier in every namespace, the same
breaches, the same cases a real API server is asked about."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.make_fleet import make
from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.placement import cel
from gpuplan.placement.boundary import prove_boundary
from gpuplan.placement.simulate import ShapeNamespaces, matrix_rows, prove

REPO = Path(__file__).parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _rf(path):
    c = check_fleet(path)
    assert c.resolved is not None, c.diagnostics
    return c.resolved


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    # 400 nodes: 20 pools, 33 tiers, 200 tenants (601 namespaces), 20,433 tier x namespace verdicts
    p = tmp_path_factory.mktemp("bench") / "fleet.yaml"
    p.write_text(make(400, 200), encoding="utf-8")
    return p


def _fleets(bench):
    return [*EXAMPLES, bench]


def _verdicts(proof):
    out = {}
    for g in proof.groups:
        for ns in g.namespaces:
            key = (g.tier, ns)
            assert key not in out, f"{key} in two groups"
            out[key] = (g.granted, tuple(g.denied_by), tuple(g.pools), g.expected_pool, g.capacity)
    return out


@pytest.mark.parametrize("which", [*(p.stem for p in EXAMPLES), "benchmark"])
def test_the_contract_proof_decides_as_every_shape_does(which, bench):
    path = bench if which == "benchmark" else REPO / "examples" / f"{which}.yaml"
    rf = _rf(path)
    docs = placement_docs(rf)
    fast, slow = prove(rf, docs), prove(rf, docs, exhaustive=True)
    got, want = _verdicts(fast), _verdicts(slow)
    assert got == want
    assert len(want) == len(fast.namespaces) * len({t for t, _ in want})  # every tier in every namespace
    assert matrix_rows(fast) == matrix_rows(slow)
    assert fast.twins == slow.twins


@pytest.mark.parametrize("which", [*(p.stem for p in EXAMPLES), "benchmark"])
def test_the_boundary_decides_as_every_shape_does(which, bench):
    path = bench if which == "benchmark" else REPO / "examples" / f"{which}.yaml"
    rf = _rf(path)
    docs = placement_docs(rf)
    fast = prove_boundary(rf, docs, record=True)
    slow = prove_boundary(rf, docs, record=True, exhaustive=True)
    assert fast.cases == slow.cases
    assert fast.breaches == slow.breaches
    assert fast.access == slow.access
    assert (fast.checked, fast.pods, fast.namespace_shapes, fast.tried, fast.not_covered) == \
        (slow.checked, slow.pods, slow.namespace_shapes, slow.tried, slow.not_covered)
    assert fast.cases and any(c.admitted for c in fast.cases) and any(not c.admitted for c in fast.cases)


def test_a_weakened_tree_is_found_the_same_way_on_both_paths(bench):
    """A grant binding that selects every namespace (the tier's pods refused everywhere, its
    granted namespaces included), a namespace's quotas raised above its grants, and no quota
    for the classes a namespace is not granted (the policies alone keep them out): the
    shortcuts see what the exhaustive path sees."""
    rf = _rf(bench)
    docs = [dict(d) for d in placement_docs(rf) if d["metadata"]["name"] != "gpuplan-other-priorities"]
    grant = next(i for i, d in enumerate(docs) if d["kind"] == "ValidatingAdmissionPolicyBinding"
                 and d["metadata"]["name"].endswith("-grant"))
    b = docs[grant]
    docs[grant] = {**b, "spec": {**b["spec"], "matchResources": {"namespaceSelector": {}}}}
    for i, d in enumerate(docs):  # every quota of a namespace, its tiers' own too
        if d["kind"] == "ResourceQuota" and d["metadata"]["namespace"] == "team-0007-1":
            docs[i] = {**d, "spec": {**d["spec"], "hard": {k: "99" for k in d["spec"]["hard"]}}}
    fast, slow = prove(rf, docs), prove(rf, docs, exhaustive=True)
    assert _verdicts(fast) == _verdicts(slow)
    assert any(g.granted and g.denied_by for g in fast.groups)  # the tier refused where it is granted
    bf, bs = prove_boundary(rf, docs, record=True), prove_boundary(rf, docs, record=True, exhaustive=True)
    assert bf.cases == bs.cases
    assert bf.breaches == bs.breaches and bf.breaches
    assert any("(quota) where the namespace is granted" in b.escape and b.namespace == "team-0007-1"
               for b in bf.breaches)


def test_the_refused_namespaces_are_a_view_not_a_copy(bench):
    rf = _rf(bench)
    proof = prove(rf, placement_docs(rf))
    views = [g for g in proof.groups if isinstance(g.namespaces, ShapeNamespaces)]
    assert views  # most of a large fleet's tier x namespace verdicts
    shown = sum(len(g.namespaces) for g in views)
    assert shown > len(proof.groups) * 10
    for g in views[:5]:
        names = list(g.namespaces)
        assert len(g.namespaces) == len(names) and names
        assert tuple(g.namespaces[:3]) == tuple(names[:3]) and g.namespaces[-1] == names[-1]
        assert g.namespaces[len(names) // 2] == names[len(names) // 2]
        assert not g.granted and g.denied_by


# --- one engine context for every evaluation --------------------------------------------------


def _policy(name, variable, validation, fail="Fail"):
    return {"metadata": {"name": name}, "spec": {
        "failurePolicy": fail, "variables": [{"name": "specs", "expression": variable}],
        "validations": [{"expression": validation, "message": f"{name} refuses"}]}}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"priorityClassName": "a", "containers": [{"name": "c", "image": "i"}]}}


def test_a_variable_that_fails_does_not_see_another_policys_value():
    """Policy ``ok`` binds ``variables.specs``; policy ``broken``'s variable of the same name fails
    (no such field): its validation must fail as the API server's would (the variable is an
    error), not read the value ``ok`` left in the shared context."""
    ok = _policy("ok", "[object.spec]", "variables.specs.all(s, s.priorityClassName == 'a')")
    broken = _policy("broken", "[object.spec.noSuchField]", "variables.specs.all(s, s.priorityClassName == 'a')")
    other = {**POD, "metadata": {"name": "q"}}
    for order in ([ok, broken], [broken, ok], [ok, broken, ok, broken]):
        cel._MEMO.clear()
        got = [(p["metadata"]["name"], cel.evaluate_policy(p, pod, None)) for p in order for pod in (POD, other)]
        assert all(msgs == ([] if name == "ok" else ["broken refuses"]) for name, msgs in got), (order, got)


def test_the_shared_context_follows_the_object_namespace_and_request():
    reads = {"metadata": {"name": "reads"}, "spec": {"validations": [
        {"expression": "object.spec.priorityClassName == 'a'", "message": "class"},
        {"expression": "namespaceObject == null || namespaceObject.metadata.name == 'team'", "message": "namespace"},
        {"expression": "request.userInfo.username == 'tenant'", "message": "user"}]}}
    b = {**POD, "spec": {**POD["spec"], "priorityClassName": "b"}}
    team = {"metadata": {"name": "team"}}
    other = {"metadata": {"name": "other"}}
    ctrl = {"operation": "CREATE", "userInfo": {"username": "controller"}}
    cases = [((POD, None, None), []), ((b, None, None), ["class"]), ((POD, team, None), []),
             ((POD, other, None), ["namespace"]), ((POD, team, ctrl), ["user"]), ((b, other, ctrl), ["class", "namespace", "user"])]
    for rounds in (cases, cases[::-1], cases + cases):
        cel._MEMO.clear()
        for (obj, ns, req), want in rounds:
            assert cel.evaluate_policy(reads, obj, ns, req) == want
