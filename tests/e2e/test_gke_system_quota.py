"""GKE's quota admission on the API server: a cluster whose ResourceQuota admission plugin limits
pods of the system PriorityClasses to namespaces with a quota scoped to them (the
``limitedResources`` GKE Standard configures; k8s.io/apiserver@v0.36.3
pkg/admission/plugin/resourcequota/controller.go:388-399, :583-591) refuses the GPU Operator's
``system-node-critical`` pods until the GKE example's tree is applied, and admits them after: the
tree's quota in the operator namespace covers them (gpuplan.provisioning.gke)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cluster import deploy

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SYSTEM_CLASSES = ["system-node-critical", "system-cluster-critical"]
# the ResourceQuota plugin's configuration (apiserver.config.k8s.io/v1 ResourceQuotaConfiguration,
# k8s.io/apiserver@v0.36.3 pkg/admission/plugin/resourcequota/apis/resourcequota/v1/register.go:25-28)
# as GKE Standard sets it: pods of the system classes need a covering quota
GKE_ADMISSION = {
    "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
    "plugins": [{"name": "ResourceQuota", "configuration": {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
        "limitedResources": [{"resource": "pods", "matchScopes": [
            {"scopeName": "PriorityClass", "operator": "In", "values": SYSTEM_CLASSES}]}]}}],
}


def pod(namespace: str, priority_class: str | None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace}, "spec": spec}


def test_the_gke_tree_lets_the_operators_system_pods_in(tmp_path, clusters):
    tree = tmp_path / "tree"
    subprocess.run([sys.executable, "-m", "gpuplan", "build", str(REPO / "examples" / "gke.yaml"), "-o", str(tree)],
                   check=True, cwd=REPO, capture_output=True)
    cp = clusters.start("gke-system-quota", admission_config=GKE_ADMISSION)
    try:
        ns = "gpu-operator"
        code, body = cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                              manager="gpuplan-test-setup")
        assert code < 300, body
        cp.wait(lambda: cp.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default") is not None, 60,
                "the operator namespace's default ServiceAccount")
        # before the tree: the system classes are refused, a pod without one is not
        assert cp.create(pod(ns, None), dry_run=True)[0] == 201
        for cls in SYSTEM_CLASSES:
            assert cp.create(pod(ns, cls), dry_run=True)[0] >= 400, cls
        d = deploy(cp, tree)
        assert not d.refusals, [str(r) for r in d.refusals]
        # the quota is used once the controller manager has written its status
        # (until then the plugin refuses with "status unknown", controller.go:474)
        cp.wait(lambda: cp.create(pod(ns, "system-node-critical"), dry_run=True)[0] == 201, 60,
                "a system-node-critical pod admitted in the operator namespace")
        assert cp.create(pod(ns, "system-cluster-critical"), dry_run=True)[0] == 201
        # the gate still holds where gpuplan made no such quota
        assert cp.create(pod("default", "system-node-critical"), dry_run=True)[0] >= 400
    finally:
        clusters.stop(cp)
