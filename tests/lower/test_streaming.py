"""The build lowers, renders and writes one artifact at a time: a tenant's
objects are made only when the previous tenant's file has been handed on, so
memory does not grow with the number of tenants."""

from __future__ import annotations

import pytest

from benchmarks.make_fleet import make
from gpuplan.compiler import Options, check_fleet, compile_fleet, render_files
from gpuplan.artifacts import Produced
from gpuplan.lower import tenancy
from gpuplan.lower.driver import iter_artifacts, lower_all


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    (d / "fleet.yaml").write_text(make(100, 50))
    return d / "fleet.yaml"


def test_tenants_are_lowered_one_at_a_time(fleet, monkeypatch) -> None:
    rf = check_fleet(fleet).resolved
    made: list[str] = []
    real = tenancy.namespace
    monkeypatch.setattr(tenancy, "namespace", lambda rf, t, ns: made.append(ns) or real(rf, t, ns))
    it = iter_artifacts(rf)
    first = next(a for a in it if a.path.startswith("tenants/"))
    assert first.path == "tenants/team-0000/namespaces.yaml"
    assert made == list(rf.fleet.spec.tenants[0].namespaces)  # not the other 49 tenants' yet
    rest = list(it)
    assert len(made) == sum(len(t.namespaces) for t in rf.fleet.spec.tenants)
    assert {a.path for a in rest} >= {"kustomization.yaml", "README.md", "tenants/team-0049/namespaces.yaml"}


def test_files_are_handed_on_while_lowering_goes_on(fleet, monkeypatch) -> None:
    """render_files puts each file in its sink before the next artifact is lowered."""
    rf = check_fleet(fleet).resolved
    seen_at_lowering: list[int] = []
    real = tenancy.namespace_quotas

    class Sink(dict):
        pass

    sink = Sink()

    def quotas(rf, t, ns):
        seen_at_lowering.append(len(sink))
        return real(rf, t, ns)

    monkeypatch.setattr(tenancy, "namespace_quotas", quotas)
    render_files(rf, "fleet.yaml", sink)
    # each tenant's quotas are lowered after the earlier tenants' files are in the sink
    assert seen_at_lowering == sorted(seen_at_lowering) and seen_at_lowering[-1] > seen_at_lowering[0] + 50


def test_summaries_carry_what_later_targets_read(fleet) -> None:
    rf = check_fleet(fleet).resolved
    arts = {a.path: a for a in lower_all(rf)}
    ns = Produced.of(arts["tenants/team-0003/namespaces.yaml"])
    assert ns.applied and ns.kinds == {"Namespace"} and ns.namespaces == frozenset()
    rq = Produced.of(arts["tenants/team-0003/resourcequotas.yaml"])
    assert rq.kinds == {"ResourceQuota"} and rq.namespaces == set(rf.fleet.spec.tenants[3].namespaces)
    readme = Produced.of(arts["README.md"])
    assert not readme.yaml and not readme.applied and readme.kinds == frozenset()
    # the root kustomization lists exactly the applied files
    root = arts["kustomization.yaml"].documents[0]["resources"]
    assert root == sorted(p for p, a in arts.items() if Produced.of(a).applied)


@pytest.mark.slow
def test_released_spec_builds_the_same_tree_and_cannot_be_located(fleet) -> None:
    kept = compile_fleet(fleet, options=Options(verify=True))
    released = compile_fleet(fleet, options=Options(verify=True, release_spec=True))
    assert dict(released.files) == dict(kept.files) and released.files
    with pytest.raises(TypeError):
        released.resolved.doc.locate(("spec", "tenants", 0))
    assert kept.resolved.doc.locate(("spec", "tenants", 0)) != (1, 1)
