"""Delivery: root kustomization, Argo CD Applications, Flux objects, per-object annotations."""

from __future__ import annotations

import pytest
from tests.outputkit import all_objects, docs, one

from gpuplan.lower.driver import lower_all


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_root_kustomization_lists_every_applied_file(examples, example):
    c = examples[example]
    k = one(c, "kustomization.yaml")
    assert k == {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                 "resources": sorted(k["resources"])}
    expected = sorted(a.path for a in lower_all(c.resolved) if a.kustomize and a.documents is not None)
    if example == "flux":  # the tenancy files are the tenancy Kustomization's
        away = {p.removeprefix("../../") for p in one(c, "delivery/tenancy/kustomization.yaml")["resources"]}
        assert away - {"delivery/priorityclasses.yaml"} <= set(expected) and "cluster/admission-policy.yaml" in away
        expected = [p for p in expected if p not in away]
    assert k["resources"] == expected
    assert all(p in c.files for p in k["resources"])
    assert "delivery/bootstrap.yaml" not in k["resources"], "the syncing object must not sync itself"
    assert "gpu-operator/values.yaml" not in k["resources"]
    assert "kustomization.yaml" not in k["resources"]
    assert not any(p.endswith(".md") for p in k["resources"])


def test_argocd_applications(examples):
    c = examples["argocd"]
    admin, project_app, root = docs(c.files["delivery/bootstrap.yaml"])
    [project] = docs(c.files["delivery/project/appproject.yaml"])
    g = c.resolved.fleet.spec.cluster.gitops
    assert project["kind"] == "AppProject" and root["spec"]["project"] == project["metadata"]["name"]
    # the fleet's project is delivered from Git by its own Application, in the admin project
    assert admin["kind"] == "AppProject" and project_app["spec"]["project"] == admin["metadata"]["name"]
    assert project_app["spec"]["source"]["path"] == f"{g.path}/delivery/project"
    assert "delivery/project/appproject.yaml" not in c.files["kustomization.yaml"].decode()
    assert op_project(c) == project["metadata"]["name"] != "default"
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


def op_project(c) -> str:
    return one(c, "delivery/gpu-operator.yaml")["spec"]["project"]


def _argo_permits(project: dict, obj: dict, namespaced: bool) -> bool:
    """Argo CD's per-object project check at sync (argoproj/argo-cd@v3.5.1
    controller/sync.go:647-671, pkg/apis/application/v1alpha1/app_project_types.go:
    399-419, 483-520): a cluster-scoped kind must be in clusterResourceWhitelist,
    a namespaced object's namespace must match a destination."""
    import fnmatch

    spec = project["spec"]
    group = obj["apiVersion"].rpartition("/")[0]
    if not namespaced:
        return any(fnmatch.fnmatchcase(group, w["group"]) and fnmatch.fnmatchcase(obj["kind"], w["kind"])
                   for w in spec.get("clusterResourceWhitelist", []))
    ns = obj["metadata"].get("namespace", "")
    return any(fnmatch.fnmatchcase(ns, d["namespace"]) for d in spec["destinations"])


CLUSTER_SCOPED = {"Namespace", "PriorityClass", "NodeFeatureRule", "NodePool", "EC2NodeClass", "NodeOverlay",
                  "NVIDIADriver",
                  "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize("example", ["argocd", "aws"])
def test_app_project_admits_the_tree_and_nothing_wider(examples, example):
    from tests.outputkit import REPO, compile_ok

    c = examples[example] if example in examples else compile_ok(REPO / "examples" / "aws-burst.yaml")
    root = docs(c.files["delivery/bootstrap.yaml"])[-1]
    [project] = docs(c.files["delivery/project/appproject.yaml"])
    for path, o in all_objects(c):
        if path.startswith(("delivery/bootstrap", "delivery/project/")):
            continue
        assert _argo_permits(project, o, o["kind"] not in CLUSTER_SCOPED), (path, o["kind"])
    assert _argo_permits(project, {"apiVersion": "v1", "kind": "x", "metadata": {
        "namespace": root["spec"]["destination"]["namespace"]}}, True)
    # scoped: not every namespace, not every kind, only the two repositories
    assert not _argo_permits(project, {"apiVersion": "v1", "kind": "Secret",
                                       "metadata": {"namespace": "kube-system"}}, True)
    assert not _argo_permits(project, {"apiVersion": "admissionregistration.k8s.io/v1",
                                       "kind": "MutatingWebhookConfiguration", "metadata": {}}, False)
    assert sorted(project["spec"]["sourceRepos"]) == sorted(
        {c.resolved.fleet.spec.cluster.gitops.repo_url, "https://helm.ngc.nvidia.com/nvidia"})


def test_crd_kinds_skip_dry_run(examples):
    """A missing CRD must not fail the dry run of the whole sync (argo-cd@v3.5.1
    gitops-engine/pkg/sync/sync_context.go:1072): every object whose CRD comes
    with the operator chart or Karpenter skips it."""
    from tests.outputkit import REPO, compile_ok

    for c in (examples["argocd"], compile_ok(REPO / "examples" / "aws-burst.yaml")):
        for path, o in all_objects(c):
            if o["kind"] in {"NodeFeatureRule", "NodePool", "EC2NodeClass", "NodeOverlay"}:
                opts = o["metadata"]["annotations"]["argocd.argoproj.io/sync-options"].split(",")
                assert "SkipDryRunOnMissingResource=true" in opts, (path, o["kind"])


def _argo_prunes(obj: dict, app_prune: bool = True) -> str:
    """What Argo CD does with an object that left the tree: 'prune',
    'confirm' (held until confirmed) or 'keep' (gitops-engine/pkg/sync/
    sync_context.go:322-343)."""
    opts = obj["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-options", "").split(",")
    if "Prune=false" in opts:
        return "keep"
    if "Prune=confirm" in opts:
        return "confirm"
    return "prune" if app_prune else "keep"


def _flux_prunes(obj: dict) -> bool:
    """kustomize-controller garbage-collects objects that left the tree unless
    annotated or labelled prune: disabled (fluxcd/kustomize-controller@v1.9.4
    docs/spec/v1/kustomizations.md:160-168, 1686-1693)."""
    meta = obj["metadata"]
    marks = {**meta.get("labels", {}), **meta.get("annotations", {})}
    return marks.get("kustomize.toolkit.fluxcd.io/prune", "").lower() != "disabled"


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_removing_a_tenant_never_deletes_its_namespaces(examples, example):
    c = examples[example]
    namespaces = [(p, o) for p, o in all_objects(c) if o["kind"] == "Namespace"]
    flux_op_ns = [o for o in docs(c.files.get("delivery/gpu-operator/namespace.yaml", b"")) if o]
    assert namespaces
    for path, ns in namespaces + [("delivery/gpu-operator/namespace.yaml", o) for o in flux_op_ns]:
        if example == "argocd":
            # kept, and no held prune (Prune=confirm would hold the whole root sync, #27)
            assert _argo_prunes(ns) == "keep", path
            opts = ns["metadata"]["annotations"]["argocd.argoproj.io/sync-options"].split(",")
            assert "Delete=false" in opts  # kept when the Application is deleted (controller/appcontroller.go:1253)
            # and the orphan does not make the Application OutOfSync (controller/state.go:986-997)
            assert ns["metadata"]["annotations"]["argocd.argoproj.io/compare-options"] == "IgnoreExtraneous"
        else:
            assert not _flux_prunes(ns), path
    # and nothing else is protected but each namespace's GPU quota, which outlives its grant like
    # the namespace (docs/transitions.md "The tenancy boundary at every step"): pruning still
    # cleans up what gpuplan stops producing
    from gpuplan.identity import QUOTA_NAME

    def kept(o):
        return o["kind"] == "Namespace" or (o["kind"] == "ResourceQuota" and o["metadata"]["name"] == QUOTA_NAME)
    quotas = [o for p, o in all_objects(c) if kept(o) and o["kind"] == "ResourceQuota"]
    assert quotas and all((_argo_prunes(o) == "keep") if example == "argocd" else not _flux_prunes(o) for o in quotas)
    others = [o for p, o in all_objects(c) if not kept(o)]
    assert all(_argo_prunes(o) == "prune" if example == "argocd" else _flux_prunes(o) for o in others)


def test_argocd_waves_order_the_tree(examples):
    waves = {}
    for path, o in all_objects(examples["argocd"]):
        if path.startswith(("delivery/bootstrap", "delivery/project/")):  # not in the root sync
            continue
        wave = o["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave")
        assert isinstance(wave, str), (path, o["kind"])
        waves.setdefault(o["kind"], set()).add(int(wave))
    assert max(waves["Namespace"]) < min(waves["ResourceQuota"])
    # a tier's class exists only once its policies are bound (docs/transitions.md)
    assert min(waves["PriorityClass"]) > max(waves["ValidatingAdmissionPolicyBinding"])
    assert max(waves["ResourceQuota"]) <= min(waves["ValidatingAdmissionPolicy"])
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
    assert sub["resources"] == ["helmrelease.yaml", "namespace.yaml", "tenancy.yaml"]
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


def test_named_project_is_used_and_not_emitted(build):
    from tests.outputkit import fleet

    c = build(fleet("  pools:\n    - {name: p, gpu: L40S, gpusPerNode: 4, nodes: [n1]}\n")
              .replace('repoURL: "https://git.example.com/fleet.git"}',
                       'repoURL: "https://git.example.com/fleet.git", project: platform}'))
    [root] = docs(c.files["delivery/bootstrap.yaml"])
    assert root["kind"] == "Application" and root["spec"]["project"] == "platform"
    assert one(c, "delivery/gpu-operator.yaml")["spec"]["project"] == "platform"


def _flux_kustomizations(c) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for _, o in all_objects(c)
            if o["kind"] == "Kustomization" and o["apiVersion"].startswith("kustomize.toolkit.fluxcd.io/")}


def _synced_kinds(c, path: str) -> set[str]:
    """The kinds of the objects the kustomization.yaml at ``path`` lists."""
    import posixpath
    base = posixpath.dirname(path)
    return {o["kind"] for r in one(c, path)["resources"]
            for o in docs(c.files[posixpath.normpath(posixpath.join(base, r))]) if o}


def test_flux_tenancy_never_waits_for_the_operator(examples):
    """The tenancy objects are synced by a Kustomization that depends on nothing, applied by the
    operator's (which applies before its health check); the objects of the operator chart's CRDs
    (NodeFeatureRule) and the operator's ConfigMaps stay in the root, which dependsOn it."""
    c = examples["flux"]
    ks = _flux_kustomizations(c)
    op, root = ks["gpuplan-research-lab-gpu-operator"], ks["gpuplan-research-lab"]
    tenancy, classes = ks["gpuplan-research-lab-tenancy"], ks["gpuplan-research-lab-classes"]
    assert "dependsOn" not in tenancy["spec"]
    assert tenancy["spec"]["path"] == "./clusters/lab/generated/delivery/tenancy"
    assert classes["spec"]["dependsOn"] == [{"name": "gpuplan-research-lab-tenancy"}]
    assert root["spec"]["dependsOn"] == [{"name": op["metadata"]["name"]}]
    assert op["spec"]["wait"] is True, "the root applies only once the tenancy Kustomization is Ready"
    assert tenancy in docs(c.files["delivery/gpu-operator/tenancy.yaml"])
    kinds = _synced_kinds(c, "delivery/tenancy/kustomization.yaml")
    assert {"Namespace", "ResourceQuota", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
            "Kustomization"} <= kinds
    assert "NodeFeatureRule" not in kinds and "ConfigMap" not in kinds
    in_root = _synced_kinds(c, "kustomization.yaml")
    assert "NodeFeatureRule" in in_root and "ConfigMap" in in_root
    assert not in_root & {"Namespace", "ResourceQuota", "ValidatingAdmissionPolicy", "PriorityClass"}


def test_flux_bootstrap_is_unchanged_by_the_tenancy_kustomization(examples):
    """bootstrap.yaml, applied by hand, holds the same two Kustomizations as before: nothing for
    an existing Flux user to apply again."""
    c = examples["flux"]
    assert [o["metadata"]["name"] for o in docs(c.files["delivery/bootstrap.yaml"]) if o] == [
        "gpuplan-research-lab-gpu-operator", "gpuplan-research-lab"]
