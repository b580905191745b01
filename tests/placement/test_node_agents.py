"""Node agents' namespaces (``cluster.admission.nodeAgentNamespaces``): a DaemonSet there may
tolerate every taint, the GPU pools' included; every other rule holds, and nothing else there
tolerates the pools (lower/admission.py ``pool_toleration``). On the API server:
tests/e2e/test_node_agents.py."""

from __future__ import annotations

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.lower import admission
from gpuplan.placement.boundary import prove_boundary
from gpuplan.placement.cel import evaluate_policy
from gpuplan.placement.simulate import Cluster
from tests.rules.helpers import BASE

AGENTS = BASE.replace("    gitops:\n", "    admission: {nodeAgentNamespaces: [logging]}\n    gitops:\n", 1)
EVERYTHING = [{"operator": "Exists"}]


def _rf(tmp_path, text):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    checked = check_fleet(spec)
    assert checked.resolved is not None and not checked.failed(), [str(d) for d in checked.diagnostics]
    return checked.resolved


def daemonset(ns: str, kind: str = "DaemonSet", gpu: bool = False, env: bool = False) -> dict:
    c = {"name": "agent", "image": "registry.example/agent:1"}
    if gpu:
        c["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    if env:
        c["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    spec = {"selector": {"matchLabels": {"app": "agent"}}, "template": {
        "metadata": {"labels": {"app": "agent"}}, "spec": {"tolerations": EVERYTHING, "containers": [c]}}}
    api = "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "agent", "namespace": ns}, "spec": spec}


def _denied(rf, obj) -> list[str]:
    cluster = Cluster(rf, placement_docs(rf))
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": obj["metadata"]["namespace"],
                       "labels": {"kubernetes.io/metadata.name": obj["metadata"]["namespace"]}}}
    return cluster.policy_denials(obj, ns, cluster.selected(ns), None)


@pytest.mark.parametrize("obj,admitted", [
    (daemonset("logging"), True),
    (daemonset("logging", gpu=True), False),
    (daemonset("logging", env=True), False),
    (daemonset("logging", kind="Deployment"), False),
    (daemonset("default"), False),
])
def test_only_a_node_agents_daemonset_tolerates_the_pools(tmp_path, obj, admitted):
    rf = _rf(tmp_path, AGENTS)
    assert (not _denied(rf, obj)) == admitted, _denied(rf, obj)


def test_without_the_field_the_namespace_is_like_any_other(tmp_path):
    rf = _rf(tmp_path, BASE)
    assert _denied(rf, daemonset("logging"))
    names = [p["metadata"]["name"] for p in admission.policies(rf)]
    assert not [n for n in names if n.endswith(("-pool-tolerations", "-node-agents"))]


def test_the_boundary_proof_tries_every_pod_shape_in_the_agents_namespace(tmp_path):
    rf = _rf(tmp_path, AGENTS)
    b = prove_boundary(rf, placement_docs(rf), record=True)
    there = [c for c in b.cases if c.namespace == "logging"]
    assert there and b.breaches == []
    # a tenant's own pod tolerating every taint is refused there: only DaemonSets are trusted
    keyless = [c for c in there if "keyless" in c.words and "no GPU" in c.words]
    assert keyless and not [c for c in keyless if c.admitted]


def test_a_tenant_namespace_among_the_node_agents_is_an_error(tmp_path):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(AGENTS.replace("[logging]", "[logging, alpha-ns]"), encoding="utf-8")
    checked = check_fleet(spec)
    [d] = [d for d in checked.diagnostics if d.code == "GP509"]
    assert d.is_error and d.path == "spec.tenants[0].namespaces[0]" and checked.failed()
