"""A gang tier on a Karpenter pool with EFA (gpuplan.identity.pool_gang_resources, decided in
gpuplan.cloud.aws.gang_pod_resources): its contract pods request ``vpc.amazonaws.com/efa``, the
node model advertises it so they still fit, and the class's admission policy refuses a pod of the
tier that leaves it out (lower/admission.py ``_gang_fabric_validations``). On the API server:
tests/e2e/test_examples.py judges the same policies."""

from __future__ import annotations

import copy

import pytest

from gpuplan.compiler import placement_docs
from gpuplan.identity import contract_job, contract_pod, contract_spec
from gpuplan.placement.simulate import Cluster, proof
from tests.placement.test_node_agents import _rf

EFA = "vpc.amazonaws.com/efa"

# p5e.48xlarge has 32 EFA interfaces, p5en.48xlarge 16: a pod asks for the smaller count
FLEET = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {name: efa}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops:
      repoURL: https://git.example.com/fleet.git
    aws: {clusterName: efa, nodeRole: KarpenterNodeRole-efa}
  pools:
    - name: h200
      gpu: H200-SXM-141GB
      karpenter: {instanceTypes: [p5e.48xlarge, p5en.48xlarge], maxGPUs: 32, amiVersion: v20260714%s}
      sharing: {mode: exclusive}
      pricePerGPUHour: 4.0
  tiers:
    - {name: train, pool: h200, workload: training, priority: 1000, maxGPUsPerPod: 8, gang: {nodesPerJob: 2}}
    - {name: solo, pool: h200, workload: batch, priority: 100, maxGPUsPerPod: 8}
  tenants:
    - name: alpha
      namespaces: [alpha-ns]
      quotas:
        alpha-ns: {train: 16, solo: 8}
"""

NS = {"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "alpha-ns", "labels": {"kubernetes.io/metadata.name": "alpha-ns"}}}
TENANT = {"operation": "CREATE", "userInfo": {"username": "tenant"}}


def _fleet(tmp_path, karpenter_extra: str = ""):
    return _rf(tmp_path, FLEET % karpenter_extra)


def _denied(rf, obj) -> list[str]:
    cluster = Cluster(rf, placement_docs(rf))
    return [m for m in cluster.policy_denials(obj, NS, cluster.selected(NS), TENANT) if EFA in m]


def _pod(rf, tier: str) -> dict:
    return contract_pod(rf, rf.tier_by_name[tier], "alpha-ns")


def _main(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def _without_efa(pod: dict) -> dict:
    pod = copy.deepcopy(pod)
    for part in ("requests", "limits"):
        _main(pod)["resources"][part].pop(EFA, None)
    return pod


def test_the_contract_pod_of_a_gang_tier_requests_the_fewest_interfaces_of_its_pool(tmp_path):
    rf = _fleet(tmp_path)
    res = _main(_pod(rf, "train"))["resources"]
    assert res["requests"] == res["limits"] == {"nvidia.com/gpu": "1", EFA: "16"}
    job = contract_job(rf, rf.tier_by_name["train"], "alpha-ns")
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][EFA] == "16"


def test_the_tenant_pages_example_job_requests_efa(tmp_path):
    from gpuplan.lower.tenant_page import example_job

    rf = _fleet(tmp_path)
    job = example_job(rf, rf.tier_by_name["train"], "alpha-ns", "nvidia.com/gpu", 8, 2)
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"nvidia.com/gpu": "8", EFA: "16"}


def test_a_pod_of_one_node_or_a_pool_without_efa_requests_none(tmp_path):
    rf = _fleet(tmp_path)
    assert EFA not in _main(_pod(rf, "solo"))["resources"]["limits"]
    off = _fleet(tmp_path, ", efa: false")
    assert EFA not in _main(_pod(off, "train"))["resources"]["limits"]
    assert _denied(off, _without_efa(_pod(off, "train"))) == []


def test_a_gang_pod_without_efa_is_refused_and_told_what_to_add(tmp_path):
    rf = _fleet(tmp_path)
    assert _denied(rf, _pod(rf, "train")) == []
    refused = _denied(rf, _without_efa(_pod(rf, "train")))
    assert len(refused) == 1 and f'Add {EFA}: "16"' in refused[0]
    # too few is refused too; more (a p5e node's 32) is the pod's choice
    few = _pod(rf, "train")
    _main(few)["resources"]["requests"][EFA] = _main(few)["resources"]["limits"][EFA] = "8"
    assert _denied(rf, few)
    more = _pod(rf, "train")
    _main(more)["resources"]["requests"][EFA] = _main(more)["resources"]["limits"][EFA] = "32"
    assert _denied(rf, more) == []
    # a limit stands for a left-out request (requests default to limits)
    limited = _pod(rf, "train")
    del _main(limited)["resources"]["requests"][EFA]
    assert _denied(rf, limited) == []
    # a pod of the one-node tier on the same pool needs none
    assert _denied(rf, _without_efa(_pod(rf, "solo"))) == []


def test_efa_counts_in_the_containers_that_use_the_gpus(tmp_path):
    rf = _fleet(tmp_path)
    # EFA in a sidecar only leaves the GPU container on TCP sockets
    side = _without_efa(_pod(rf, "train"))
    side["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                                       "resources": {"limits": {EFA: "16"}}}]
    assert _denied(rf, side)
    # two GPU containers share the node's interfaces: each some, all of them together
    two = _pod(rf, "train")
    second = copy.deepcopy(_main(two))
    second["name"] = "second"
    for c in (_main(two), second):
        c["resources"] = {"limits": {"nvidia.com/gpu": "4", EFA: "8"}}
    two["spec"]["containers"].append(second)
    assert _denied(rf, two) == []
    second["resources"]["limits"].pop(EFA)
    _main(two)["resources"]["limits"][EFA] = "16"
    assert _denied(rf, two)


def test_a_job_template_without_efa_is_refused(tmp_path):
    rf = _fleet(tmp_path)
    job = contract_job(rf, rf.tier_by_name["train"], "alpha-ns",
                       _without_efa({"spec": contract_spec(rf, rf.tier_by_name["train"])})["spec"])
    job["metadata"]["name"] = job["metadata"].pop("generateName") + "x"
    assert _denied(rf, job)


def test_the_node_model_advertises_efa_so_the_contract_pod_fits(tmp_path):
    from gpuplan.report.nodes import fleet_nodes

    rf = _fleet(tmp_path)
    docs = placement_docs(rf)
    verdicts = {v.tier: v for v in proof(rf, docs).verdicts if v.namespace == "alpha-ns"}
    assert verdicts["train"].ok and verdicts["train"].pools == ["h200"]
    from gpuplan.cloud.aws import instance_type

    nodes = fleet_nodes(rf, docs, count=2)
    assert nodes
    for n in nodes:  # each node its own instance type's interfaces (p5e: 32)
        itype = instance_type(n["metadata"]["labels"]["node.kubernetes.io/instance-type"])
        assert n["status"]["allocatable"][EFA] == str(itype.efa_interfaces)
        assert int(n["status"]["allocatable"][EFA]) >= 16


@pytest.mark.parametrize("extra", ["", ", efa: false"])
def test_a_pool_whose_gang_pods_need_no_efa_advertises_none(tmp_path, extra):
    from gpuplan.report.nodes import fleet_nodes

    text = FLEET % extra
    if not extra:  # no gang tier: EFA stays off by default
        text = text.replace(", gang: {nodesPerJob: 2}", "")
    rf = _rf(tmp_path, text)
    assert all(EFA not in n["status"]["allocatable"] for n in fleet_nodes(rf, placement_docs(rf), count=1))


def test_the_boundary_proof_tries_a_gang_pod_without_efa(tmp_path, monkeypatch):
    import gpuplan.lower.admission as admission
    from gpuplan.placement.boundary import FABRIC_SHAPE, prove_boundary

    rf = _fleet(tmp_path)
    b = prove_boundary(rf, placement_docs(rf))
    assert b.tried.get(FABRIC_SHAPE) == 1 and b.breaches == []
    # the tenant's own gang pods (with EFA) still reach the pool
    assert [(a.pool, a.priority_class) for a in b.access if a.pool == "h200"] == [
        ("h200", "gpuplan-solo"), ("h200", "gpuplan-train")]
    # without the policy's rule the pod is admitted: the check fails on the breach
    from tests.rules.helpers import check_text

    monkeypatch.setattr(admission, "_gang_fabric_validations", lambda *a: [])
    checked = check_text(tmp_path, FLEET % "")
    breaches = [d for d in checked.diagnostics if "TCP sockets" in d.message]
    assert checked.failed() and len(breaches) == 1 and "alpha-ns" in breaches[0].message


def test_on_a_dra_pool_the_containers_that_name_a_claim_request_it(tmp_path):
    text = (FLEET % "").replace('kubernetesVersion: "1.33"', 'kubernetesVersion: "1.36"').replace(
        "    aws: {clusterName: efa, nodeRole: KarpenterNodeRole-efa}\n",
        "    aws: {clusterName: efa, nodeRole: KarpenterNodeRole-efa}\n"
        "    gpuOperator: {chartVersion: v26.7.0}\n    allocation: {draDriverVersion: v0.5.0}\n").replace(
        "      sharing: {mode: exclusive}\n",
        "      sharing: {mode: exclusive}\n      allocation: {backend: dra, extendedResources: false}\n")
    rf = _rf(tmp_path, text)
    pod = _pod(rf, "train")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpuplan-train"}]
    _main(pod)["resources"] = {"limits": {EFA: "16"}, "claims": [{"name": "gpu"}]}
    assert _denied(rf, pod) == []
    _main(pod)["resources"]["limits"] = {}
    assert _denied(rf, pod)
