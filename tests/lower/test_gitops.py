"""Delivery: root kustomization, Argo CD Applications, Flux objects, per-object annotations."""

from __future__ import annotations

import pytest
from tests.outputkit import all_objects, docs, one

from gpuplan.lower import lower_all


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_root_kustomization_lists_every_applied_file(examples, example):
    c = examples[example]
    k = one(c, "kustomization.yaml")
    assert k == {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                 "resources": sorted(k["resources"])}
    expected = sorted(a.path for a in lower_all(c.resolved) if a.kustomize and a.documents is not None)
    assert k["resources"] == expected
    assert all(p in c.files for p in k["resources"])
    assert "delivery/bootstrap.yaml" not in k["resources"], "the syncing object must not sync itself"
    assert "gpu-operator/values.yaml" not in k["resources"]
    assert "kustomization.yaml" not in k["resources"]
    assert not any(p.endswith(".md") for p in k["resources"])


def test_argocd_applications(examples):
    c = examples["argocd"]
    root = one(c, "delivery/bootstrap.yaml")
    g = c.resolved.fleet.spec.cluster.gitops
    assert root["kind"] == "Application" and root["metadata"]["namespace"] == "argocd"
    assert root["spec"]["source"] == {"repoURL": g.repo_url, "targetRevision": g.revision, "path": g.path}
    assert root["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert "ApplyOutOfSyncOnly=true" in root["spec"]["syncPolicy"]["syncOptions"]

    op = one(c, "delivery/gpu-operator.yaml")
    chart, values = op["spec"]["sources"]
    assert chart["repoURL"] == "https://helm.ngc.nvidia.com/nvidia" and chart["chart"] == "gpu-operator"
    assert chart["targetRevision"] == c.resolved.fleet.spec.cluster.gpu_operator.chart_version
    assert values == {"repoURL": g.repo_url, "targetRevision": g.revision, "ref": "values"}
    [vf] = chart["helm"]["valueFiles"]
    assert vf.startswith("$values/")
    assert vf[len("$values/"):] == f"{g.path}/gpu-operator/values.yaml"
    assert "gpu-operator/values.yaml" in c.files
    opts = op["spec"]["syncPolicy"]["syncOptions"]
    assert "CreateNamespace=true" in opts and "ServerSideApply=true" in opts
    assert op["spec"]["destination"]["namespace"] == "gpu-operator"
    assert op["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-1"


def test_argocd_waves_order_the_tree(examples):
    waves = {}
    for path, o in all_objects(examples["argocd"]):
        if path.startswith("delivery/bootstrap"):
            continue
        wave = o["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave")
        assert isinstance(wave, str), (path, o["kind"])
        waves.setdefault(o["kind"], set()).add(int(wave))
    assert max(waves["Namespace"]) < min(waves["ResourceQuota"])
    assert max(waves["PriorityClass"]) < min(waves["ResourceQuota"])
    assert max(waves["ConfigMap"]) <= min(waves["Application"])
    assert max(waves["Application"]) < min(waves["NodeFeatureRule"])


def test_flux_objects(examples):
    c = examples["flux"]
    op_ks, tree_ks = docs(c.files["delivery/bootstrap.yaml"])
    assert op_ks["kind"] == tree_ks["kind"] == "Kustomization"
    assert tree_ks["spec"]["dependsOn"] == [{"name": op_ks["metadata"]["name"]}]
    assert tree_ks["spec"]["path"] == "./clusters/lab/generated"
    assert op_ks["spec"]["path"] == "./clusters/lab/generated/delivery/gpu-operator"
    assert op_ks["spec"]["wait"] is True
    for ks in (op_ks, tree_ks):
        assert ks["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
        assert ks["spec"]["prune"] is True
    sub = one(c, "delivery/gpu-operator/kustomization.yaml")
    assert sub["resources"] == ["helmrelease.yaml", "namespace.yaml"]
    repo, release = docs(c.files["delivery/gpu-operator/helmrelease.yaml"])
    assert repo["kind"] == "HelmRepository" and repo["spec"]["url"] == "https://helm.ngc.nvidia.com/nvidia"
    assert "type" not in repo["spec"], "NGC is an HTTPS index repository, not OCI"
    spec = release["spec"]
    assert spec["chart"]["spec"] == {"chart": "gpu-operator", "version": "v26.7.0",
                                     "sourceRef": {"kind": "HelmRepository", "name": repo["metadata"]["name"]}}
    assert spec["values"] == one(c, "gpu-operator/values.yaml"), "values.yaml stays the single source"
    assert spec["targetNamespace"] == "gpu-operator"
    # Flux gets no Argo CD annotations
    for _, o in all_objects(c):
        assert not any(k.startswith("argocd.argoproj.io/") for k in o["metadata"].get("annotations", {}))


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_every_object_is_managed_by_gpuplan(examples, example):
    objs = all_objects(examples[example])
    assert len(objs) > 10
    for path, o in objs:
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuplan", path


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_every_file_carries_the_header(examples, example):
    for path, data in examples[example].files.items():
        head = data.split(b"\n", 1)[0]
        assert b"generated by gpuplan" in head, path
