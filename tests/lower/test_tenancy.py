"""PriorityClasses, Namespaces and ResourceQuotas."""

from __future__ import annotations

import re

import pytest
from tests.outputkit import all_objects, docs, fleet, one

from gpuplan.identity import priority_class_name


def _quotas(c, tenant):
    return {(q["metadata"]["namespace"], q["metadata"]["name"]): q
            for q in docs(c.files[f"tenants/{tenant}/resourcequotas.yaml"])}


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_quota_keys_are_requests_only_with_string_quantities(examples, example):
    quotas = [o for _, o in all_objects(examples[example]) if o["kind"] == "ResourceQuota"]
    assert quotas
    for q in quotas:
        for key, qty in q["spec"]["hard"].items():
            assert key.startswith("requests."), key
            assert not key.startswith("limits.")
            assert re.fullmatch(r"requests\.nvidia\.com/(gpu|gpu\.shared|mig-[0-9a-z.]+)", key), key
            assert isinstance(qty, str) and re.fullmatch(r"[0-9]+", qty), (key, qty)


def test_tiers_on_the_same_resource_add_up(examples):
    q = _quotas(examples["argocd"], "vision")[("vision-train", "gpuplan-gpus")]
    # training 8 (A100) + burst-training 16 (H100): both nvidia.com/gpu
    assert q["spec"]["hard"]["requests.nvidia.com/gpu"] == "24"
    serve = _quotas(examples["argocd"], "vision")[("vision-serve", "gpuplan-gpus")]["spec"]["hard"]
    assert serve["requests.nvidia.com/mig-3g.40gb"] == "4"
    assert serve["requests.nvidia.com/mig-1g.10gb"] == "6"
    assert serve["requests.nvidia.com/mig-2g.20gb"] == "0"  # not granted: closed
    assert serve["requests.nvidia.com/gpu"] == "0"


def test_shared_resource_key(examples):
    q = _quotas(examples["argocd"], "research")[("research-notebooks", "gpuplan-gpus")]
    assert q["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "16"


def test_mig_media_profile_key_uses_dots(build):
    c = build(fleet("""\
  pools:
    - name: p
      gpu: A100-SXM4-80GB
      gpusPerNode: 1
      nodes: [n1]
      sharing: {mode: mig, layout: {1g.10gb+me: 1, 1g.10gb: 6}}
  tiers:
    - {name: media, pool: p, profile: 1g.10gb+me}
  tenants:
    - name: t
      namespaces: [ns]
      quotas: {ns: {media: 1}}
"""))
    hard = _quotas(c, "t")[("ns", "gpuplan-gpus")]["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-1g.10gb.me"] == "1"
    assert not any("+" in k for k in hard)


def test_enforce_priority_scopes(examples):
    q = _quotas(examples["flux"], "vision")
    scoped = q[("vision-serve", "gpuplan-tier-inference-large")]
    assert scoped["spec"]["hard"] == {"requests.nvidia.com/mig-3g.40gb": "2"}
    assert scoped["spec"]["scopeSelector"] == {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["gpuplan-inference-large"]}]}
    other = q[("vision-serve", "gpuplan-other-priorities")]
    assert other["spec"]["hard"] == {"requests.nvidia.com/mig-3g.40gb": "0"}
    assert other["spec"]["scopeSelector"]["matchExpressions"][0]["operator"] == "NotIn"
    assert ("vision-serve", "gpuplan-tier-inference-small") not in q  # not enforced
    # the plain quota still holds the namespace's total
    assert q[("vision-serve", "gpuplan-gpus")]["spec"]["hard"]["requests.nvidia.com/mig-3g.40gb"] == "2"


def test_other_priorities_keep_non_enforced_units(build):
    c = build(fleet("""\
  pools:
    - {name: a, gpu: L40S, gpusPerNode: 4, nodes: [a1]}
  tiers:
    - {name: prod, pool: a, priority: 1000, enforcePriority: true}
    - {name: dev, pool: a}
  tenants:
    - name: t
      namespaces: [ns]
      quotas: {ns: {prod: 3, dev: 1}}
"""))
    q = _quotas(c, "t")
    assert q[("ns", "gpuplan-gpus")]["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert q[("ns", "gpuplan-tier-prod")]["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
    assert q[("ns", "gpuplan-other-priorities")]["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_priority_classes(examples, example):
    c = examples[example]
    pcs = docs(c.files["cluster/priorityclasses.yaml" if example == "argocd" else "delivery/priorityclasses/priorityclasses.yaml"])
    tiers = c.resolved.fleet.spec.tiers
    assert [p["metadata"]["name"] for p in pcs] == [priority_class_name(t) for t in tiers]
    for pc, tier in zip(pcs, tiers):
        assert pc["apiVersion"] == "scheduling.k8s.io/v1"
        assert "spec" not in pc
        assert pc["value"] == tier.priority and pc["preemptionPolicy"] == tier.preemption
        assert pc["globalDefault"] is False
        assert pc["description"]
        ann = pc["metadata"]["annotations"]
        if example == "argocd":
            assert ann["argocd.argoproj.io/sync-options"] == "Force=true,Replace=true"
            assert ann["argocd.argoproj.io/sync-wave"] == "2"  # after the policies' bindings (wave 1)
        else:
            assert ann == {"kustomize.toolkit.fluxcd.io/force": "enabled"}


def test_priority_class_name_is_stable_across_value_changes(build):
    body = """\
  pools:
    - {{name: a, gpu: L40S, gpusPerNode: 4, nodes: [a1]}}
  tiers:
    - {{name: prod, pool: a, priority: {p}, preemption: {pp}}}
"""
    one_ = build(fleet(body.format(p=1000, pp="Never")), "a.yaml")
    two = build(fleet(body.format(p=5000, pp="PreemptLowerPriority")), "b.yaml")
    a = one(one_, "cluster/priorityclasses.yaml")
    b = one(two, "cluster/priorityclasses.yaml")
    assert a["metadata"]["name"] == b["metadata"]["name"] == "gpuplan-prod"
    assert (a["value"], b["value"]) == (1000, 5000)


def test_namespace_labels(examples):
    nss = {n["metadata"]["name"]: n for n in docs(examples["argocd"].files["tenants/nlp/namespaces.yaml"])}
    assert list(nss) == ["nlp-train", "nlp-serve", "nlp-notebooks"]
    labels = nss["nlp-serve"]["metadata"]["labels"]
    assert labels["gpuplan.dev/tenant"] == "nlp"
    assert labels["app.kubernetes.io/managed-by"] == "gpuplan"
    assert {k for k in labels if k.startswith("tier.gpuplan.dev/")} == {
        "tier.gpuplan.dev/inference-large", "tier.gpuplan.dev/inference-medium", "tier.gpuplan.dev/inference-small"}
    assert all(labels[k] == "true" for k in labels if k.startswith("tier.gpuplan.dev/"))
    flux_ns = one(examples["flux"], "tenants/students/namespaces.yaml")
    assert flux_ns["metadata"]["labels"]["lab.example.org/cost-center"] == "teaching"
