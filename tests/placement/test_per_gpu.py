"""CPU and memory per GPU (gpuplan.pergpu; lower/admission.py ``_per_gpu_validations``): a tier's
pod requests at most its pool's share of the node per GPU it holds, where the spec states it or
gpuplan knows the node's size; the boundary proof tries a pod just over it. On the API server:
tests/e2e/test_examples.py judges the proof's pods, these among them."""

from __future__ import annotations

import copy

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.identity import contract_pod, contract_pod_spec
from gpuplan.pergpu import pool_share, unit_share
from gpuplan.placement.boundary import PER_GPU_SHAPE, prove_boundary
from gpuplan.placement.simulate import Cluster
from tests.placement.test_node_agents import _rf
from tests.rules.helpers import BASE

PER_GPU = BASE.replace("      sharing: {mode: exclusive}\n",
                       "      sharing: {mode: exclusive}\n      perGPU: {cpu: \"16\", memory: 120Gi}\n", 1)


def _denied(rf, pod, ns="alpha-ns"):
    cluster = Cluster(rf, placement_docs(rf))
    ns_obj = {"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}
    return [m for m in cluster.policy_denials(pod, ns_obj, cluster.selected(ns_obj),
                                              {"operation": "CREATE", "userInfo": {"username": "tenant"}})
            if "per nvidia.com" in m]


def _pod(rf, tier, units=1, **res):
    t = rf.tier_by_name[tier]
    r = rf.tier_resource(t)
    pod = contract_pod(rf, t, "alpha-ns", contract_pod_spec(rf, t, r, units))
    c = pod["spec"]["containers"][0]
    c["resources"].setdefault("requests", {}).update(res)
    return pod


def test_the_spec_states_the_share_and_a_unit_gets_its_part(tmp_path):
    rf = _rf(tmp_path, PER_GPU)
    train = pool_share(rf, rf.pool_by_name["train"])
    assert (train.cpu_milli, train.memory, train.source) == (16000, 120 * 2 ** 30, "pools[].perGPU")
    # no size known for the other static pools (no inventory): unbounded
    assert pool_share(rf, rf.pool_by_name["infer"]) is None
    assert unit_share(rf, rf.tier_by_name["serve"]) is None


def test_a_pod_over_its_share_is_refused_in_every_form(tmp_path):
    rf = _rf(tmp_path, PER_GPU)
    assert _denied(rf, _pod(rf, "training", 1, cpu="16", memory="120Gi")) == []
    assert _denied(rf, _pod(rf, "training", 2, cpu="32", memory="240Gi")) == []  # two GPUs, twice the share
    assert _denied(rf, _pod(rf, "training", 1, cpu="16001m"))
    assert _denied(rf, _pod(rf, "training", 1, memory="121Gi"))
    # a limit stands for a missing request (the API server defaults a Pod's request to it)
    limited = _pod(rf, "training", 1)
    limited["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "17"
    assert _denied(rf, limited)
    # containers and sidecars add up; each other init container runs beside the sidecars
    two = _pod(rf, "training", 1, cpu="10")
    two["spec"]["containers"].append({"name": "helper", "image": "busybox", "resources": {"requests": {"cpu": "7"}}})
    assert _denied(rf, two)
    side = _pod(rf, "training", 1, cpu="10")
    side["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": "7"}}}]
    assert _denied(rf, side)
    init = _pod(rf, "training", 1, cpu="1")
    init["spec"]["initContainers"] = [{"name": "warm", "image": "busybox", "resources": {"requests": {"cpu": "17"}}}]
    assert _denied(rf, init)
    # pod-level resources (beta and on from 1.34) count as well
    pod_level = _pod(rf, "training", 1, cpu="1")
    pod_level["spec"]["resources"] = {"requests": {"cpu": "17"}}
    assert _denied(rf, pod_level)
    # a quantity that does not parse fails the evaluation: refused (failurePolicy: Fail)
    bad = _pod(rf, "training", 1, cpu="lots")
    cluster = Cluster(rf, placement_docs(rf))
    ns_obj = {"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": "alpha-ns", "labels": {"kubernetes.io/metadata.name": "alpha-ns"}}}
    assert cluster.policy_denials(bad, ns_obj, cluster.selected(ns_obj),
                                  {"operation": "CREATE", "userInfo": {"username": "tenant"}})


def test_a_workload_template_over_its_share_is_refused(tmp_path):
    rf = _rf(tmp_path, PER_GPU)
    pod = _pod(rf, "training", 1)
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "20"  # a template's pods get the limit as request
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "alpha-ns"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": copy.deepcopy(pod["spec"])}}}
    assert _denied(rf, dep)


@pytest.mark.parametrize("example,pool,cpu_milli,memory_gi,source", [
    ("kueue", "burst-h100", 24000, 256, "p5.48xlarge: 192 CPUs and 2Ti ÷ 8 GPUs"),
    ("onprem-capi", "train-h100", 28000, 256, "the capi machine: 224 CPUs and 2Ti ÷ 8 GPUs"),
])
def test_the_share_comes_from_the_nodes_size(example, pool, cpu_milli, memory_gi, source):
    from pathlib import Path

    rf = check_fleet(Path(__file__).resolve().parents[2] / "examples" / f"{example}.yaml").resolved
    share = pool_share(rf, rf.pool_by_name[pool])
    assert (share.cpu_milli, share.memory, share.source) == (cpu_milli, memory_gi * 2 ** 30, source)


def test_a_mig_slice_gets_its_part_of_the_share(tmp_path):
    text = PER_GPU.replace("      sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n",
                           "      sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
                           "      perGPU: {cpu: \"16\", memory: 128Gi}\n", 1)
    rf = _rf(tmp_path, text)
    s = unit_share(rf, rf.tier_by_name["serve"])
    # 1g.10gb holds one of the A100 80GB's eight memory slices
    assert (s.cpu_milli, s.memory) == (2000, 16 * 2 ** 30)
    assert _denied(rf, _pod(rf, "serve", 1, cpu="2")) == []
    assert _denied(rf, _pod(rf, "serve", 1, cpu="2001m"))


def test_a_static_pools_share_comes_from_the_probe(tmp_path):
    """The node probe's online CPUs of the pool's nodes, the smallest; memory stays unbounded (the
    probe does not read it)."""
    from gpuplan.pergpu import cpulist_count
    from gpuplan.probe.inventory import Metadata, NodeInventory, Probe, SystemInfo

    assert [cpulist_count(t) for t in ("0-3,8", "0", "", None)] == [5, 1, None, None]
    rf = _rf(tmp_path, BASE)
    rf.inventory = [NodeInventory(metadata=Metadata(name=n), probe=Probe(version="0", source="fake"),
                                  system=SystemInfo(hostname=n, online_cpus=cpus))
                    for n, cpus in (("n1", "0-63"), ("n2", "0-47"))]
    share = pool_share(rf, rf.pool_by_name["train"])
    assert (share.cpu_milli, share.memory, share.source) == (12000, None, "node n2 (probe): 48 CPUs ÷ 4 GPUs")


def test_the_proof_tries_a_pod_over_the_share_and_names_the_unbounded_pools(tmp_path, monkeypatch):
    rf = _rf(tmp_path, PER_GPU)
    b = prove_boundary(rf, placement_docs(rf))
    assert b.breaches == [], [str(x) for x in b.breaches]
    assert b.tried.get(PER_GPU_SHAPE, 0) >= 1
    assert any("infer" in n and "dev" in n and "perGPU" in n for n in b.not_covered), b.not_covered
    # without the rule, the build's proof finds the breach
    from tests.placement.test_boundary import _drop_validations

    _drop_validations(monkeypatch, lambda v: "per nvidia.com" in v["message"])
    spec = tmp_path / "weakened.yaml"
    spec.write_text(PER_GPU, encoding="utf-8")
    found = [d for d in check_fleet(spec).diagnostics if d.code == "GP527"]
    assert any("keeps its node's other GPUs" in d.message for d in found), [str(d) for d in found]


def test_a_resize_in_place_is_held_to_the_share(tmp_path):
    """A pod's CPU and memory change in place through ``pods/resize`` (on from 1.33): the policies
    match that subresource, so a running pod cannot grow past its share; a resize within it passes."""
    from gpuplan.lower.admission import POD_RESIZE

    rf = _rf(tmp_path, PER_GPU)
    policies = [d for d in placement_docs(rf) if d["kind"] == "ValidatingAdmissionPolicy"]
    assert all(POD_RESIZE in r["resources"] for p in policies for r in p["spec"]["matchConstraints"]["resourceRules"]
               if "" in r["apiGroups"])
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.placement.simulate import _matches

    ns_obj = {"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": "alpha-ns", "labels": {"kubernetes.io/metadata.name": "alpha-ns"}}}
    resize = {"operation": "UPDATE", "subResource": "resize", "userInfo": {"username": "tenant"}}

    def refused(old, new):
        return [m for p in policies if _matches(p, new, resize)
                for m in evaluate_policy(p, new, ns_obj, resize, old) if "per nvidia.com" in m]
    old = _pod(rf, "training", 1, cpu="8")
    assert refused(old, _pod(rf, "training", 1, cpu="32"))
    assert refused(old, _pod(rf, "training", 1, cpu="12")) == []
    # a subresource the policies do not name is not theirs
    assert not any(_matches(p, old, {**resize, "subResource": "status"}) for p in policies)
