"""GP526: the objects a pinned chart renders against the AppProject gpuplan writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet, compile_fleet, render_files
from gpuplan.objchecks import charts
from gpuplan.objchecks.driver import TreeObjects, targets
from gpuplan.upstream.refresh_charts import parse_condition, scan_template

ROOT = Path(__file__).resolve().parents[2]
KUEUE = ROOT / "examples" / "kueue.yaml"


def _tree(path: Path):
    """The resolved spec and the objects the tree check reads, as `build` streams them."""
    checked = check_fleet(path)
    assert checked.resolved is not None and not checked.failed(), checked.diagnostics
    rf = checked.resolved
    tree = TreeObjects(rf)
    render_files(rf, "fleet.yaml", each=lambda p, docs, fs: tree.keep(p, docs))
    return rf, tree


@pytest.fixture(scope="module")
def kueue():
    return _tree(KUEUE)


def _chart_default(tree: TreeObjects) -> list[dict]:
    """The tree's objects with Kueue's values as the chart's defaults leave them
    (the visibility RoleBinding rendered in kube-system)."""
    docs = [dict(d) for d in tree.docs]
    values = next(d for d in docs if d["kind"] == charts.VALUES_KIND and d["path"] == "kueue/values.yaml")
    values["values"] = {k: v for k, v in values["values"].items() if k != "enableVisibilityAuthReaderRoleBinding"}
    return docs


def test_the_kueue_example_builds_with_the_rolebinding_applied_by_hand(tmp_path):
    out = compile_fleet(KUEUE, out_dir=tmp_path / "generated")
    assert not [d for d in out.diagnostics if d.code == "GP526"], out.diagnostics
    values = yaml.safe_load(out.files["kueue/values.yaml"].decode())
    assert values["enableVisibilityAuthReaderRoleBinding"] is False
    (rb,) = [d for d in yaml.safe_load_all(out.files["delivery/bootstrap-kueue.yaml"].decode()) if d]
    assert (rb["kind"], rb["metadata"]["namespace"], rb["roleRef"]["name"]) == (
        "RoleBinding", "kube-system", "extension-apiserver-authentication-reader")
    assert "delivery/bootstrap-kueue.yaml" not in out.files["kustomization.yaml"].decode()


def test_kueue_rolebinding_in_kube_system_is_flagged(kueue):
    rf, tree = kueue
    found = list(charts.check(rf, _chart_default(tree), diag=tree.diag))
    assert [d.code for d in found] == ["GP526"]
    d = found[0]
    assert "RoleBinding" in d.message and "kube-system" in d.message and "kueue 0.19.2" in d.message
    # at the chart's version in the spec
    assert KUEUE.read_text().splitlines()[d.line - 1].strip() == "chartVersion: 0.19.2"
    assert "enableVisibilityAuthReaderRoleBinding" in d.hint


def test_build_refuses_a_tree_the_project_would_not_sync(tmp_path, monkeypatch):
    import gpuplan.lower.kueue as kueue_target

    monkeypatch.setattr(kueue_target, "rolebinding_by_hand", lambda rf: False)
    out = compile_fleet(KUEUE, out_dir=tmp_path / "generated")
    assert [d.code for d in out.diagnostics if d.is_error] == ["GP526"] and not out.files


def test_passes_when_the_project_admits_kube_system(kueue):
    rf, tree = kueue
    docs = _chart_default(tree)
    project = next(d for d in docs if d["kind"] == "AppProject" and d["metadata"]["name"] == "gpuplan-kueue-lab")
    dests = project["spec"]["destinations"] + [{"server": "https://kubernetes.default.svc", "namespace": "kube-system"}]
    docs[docs.index(project)] = {**project, "spec": {**project["spec"], "destinations": dests}}
    assert list(charts.check(rf, docs)) == []


def test_each_application_is_checked_against_the_project_it_names(kueue):
    """The tree holds two projects (#27): the fleet's, delivered by its own Application,
    and the admin project of that Application, which admits no chart object. Whatever
    their order, the chart Applications are checked against the fleet's."""
    rf, tree = kueue
    docs = _chart_default(tree)
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "AppProject"]
    assert sorted(names) == ["gpuplan-kueue-lab", "gpuplan-kueue-lab-admin"]
    admin_first = sorted(docs, key=lambda d: d.get("kind") != "AppProject" or "admin" not in d["metadata"]["name"])
    for order in (docs, admin_first):
        found = list(charts.check(rf, order, diag=tree.diag))
        assert [d.code for d in found] == ["GP526"] and "AppProject gpuplan-kueue-lab:" in found[0].message


def test_cluster_kind_outside_the_whitelist_is_flagged(kueue):
    rf, tree = kueue
    docs = [dict(d) for d in tree.docs]
    values = next(d for d in docs if d["kind"] == charts.VALUES_KIND and d["path"] == "kueue/values.yaml")
    values["values"] = {**values["values"], "enableVisibilityAPF": True}
    found = list(charts.check(rf, docs))
    assert {d.code for d in found} == {"GP526"}
    assert sorted(m for d in found for m in ("FlowSchema", "PriorityLevelConfiguration") if m in d.message) == [
        "FlowSchema", "PriorityLevelConfiguration"]


def test_validate_lowers_nothing_for_the_tree_check(kueue):
    """The check reads the whole tree: it runs where the tree is made (`build`, `check`)."""
    rf, _ = kueue
    assert "gpuplan.objchecks.charts" not in targets(rf)


def test_operator_application_is_checked_and_admitted(kueue):
    _, tree = kueue
    apps = {s[0] for d in tree.docs if d["kind"] == "Application" for s in charts._chart_sources(d)}
    assert {"gpu-operator", "kueue"} <= apps
    assert charts.chart_objects("gpu-operator", "v26.7.0") is not None


def test_flux_and_own_project_are_not_checked():
    rf = check_fleet(ROOT / "examples" / "flux-onprem.yaml").resolved
    assert rf is not None and not charts.needed(rf)


@pytest.mark.parametrize("name", ["kueue-0.19.2.json", "gpu-operator-v26.7.0.json", "dra-driver-nvidia-gpu-0.5.0.json"])
def test_pinned_data_files_are_well_formed(name):
    data = json.loads((ROOT / "gpuplan" / "upstream" / "charts" / name).read_text())
    assert data["commit"] and data["tag"] and data["repository"] and data["objects"]
    for o in data["objects"]:
        assert set(o) >= {"kind", "group", "namespace", "clusterScoped", "template", "when"}
        assert (o["namespace"] is None) == o["clusterScoped"]
        for path, _ in o["when"]:
            assert path in data["defaults"]


def test_kueue_data_pins_the_kube_system_rolebinding():
    data = charts.chart_objects("kueue", "0.19.2")
    rb = [o for o in data["objects"] if o["namespace"] == "kube-system"]
    assert [(o["kind"], o["when"]) for o in rb] == [("RoleBinding", [["enableVisibilityAuthReaderRoleBinding", True]])]
    assert data["defaults"]["enableVisibilityAuthReaderRoleBinding"] is True


def test_template_scanner():
    text = """{{- if and .Values.a (not .Values.b.c) }}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: x
  namespace: kube-system
{{- end }}
---
apiVersion: v1
kind: Service
metadata:
  namespace: '{{ .Release.Namespace }}'
"""
    docs = scan_template(text)
    assert [(d["kind"], d.get("namespace"), d["conds"]) for d in docs] == [
        ("RoleBinding", "kube-system", ["and .Values.a (not .Values.b.c)"]),
        ("Service", "{{ .Release.Namespace }}", []),
    ]
    assert parse_condition("and .Values.a (not .Values.b.c)") == ([["a", True], ["b.c", False]], [])
    assert parse_condition('and .Values.x (.Capabilities.APIVersions.Has "v1/X")') == (
        [["x", True]], ['(.Capabilities.APIVersions.Has "v1/X")'])


def test_the_dra_driver_chart_is_checked_against_the_project():
    """The DRA driver's chart renders DeviceClasses (resource.k8s.io, its apiVersion picked by
    the cluster's Capabilities), RBAC, a ValidatingAdmissionPolicy and the kubelet plugin
    DaemonSet in the release namespace: all admitted by the generated project, and a project
    without DeviceClass in its whitelist is a GP526 naming the template."""
    rf, tree = _tree(ROOT / "examples" / "dra.yaml")
    apps = {s[0] for d in tree.docs if d["kind"] == "Application" for s in charts._chart_sources(d)}
    assert "dra-driver-nvidia-gpu" in apps
    data = charts.chart_objects("dra-driver-nvidia-gpu", "0.5.0")
    assert {o["group"] for o in data["objects"] if o["kind"] == "DeviceClass"} == {"resource.k8s.io"}
    assert not list(charts.check(rf, tree.docs))
    docs = [dict(d) for d in tree.docs]
    project = next(d for d in docs if d["kind"] == "AppProject")
    spec = dict(project["spec"])
    spec["clusterResourceWhitelist"] = [w for w in spec["clusterResourceWhitelist"] if w.get("kind") != "DeviceClass"
                                        and w.get("group") != "resource.k8s.io"]
    docs[docs.index(project)] = {**project, "spec": spec}
    found = [d for d in charts.check(rf, docs) if "dra-driver-nvidia-gpu" in d.message]
    assert found and all(d.code == "GP526" for d in found)
    assert any("templates/deviceclass-gpu.yaml" in d.message for d in found)
